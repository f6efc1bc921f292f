"""The tuned embedder: pairs and batches, a short real training run through Dagster, and the pipeline using it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets.evaluation import retrieval_evaluation
from pstuts_pipeline.defs.resources import EmbeddingsResource, resources_from_env
from pstuts_pipeline.search import evaluation, retrieval
from pstuts_pipeline.sources.pstuts_json import raw_phrases
from pstuts_pipeline.training import tuning
from pstuts_pipeline_tests.support.helpers import bag_of_words, sha256_of

BIN = Path(sys.executable).parent
TRAIN_QUESTIONS = 40
DEV_QUESTIONS = 20


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory, pstuts_files) -> tuple[Path, Path]:
    """One train video cut to 40 questions and the shortest dev video cut to 20: a training run of seconds."""
    folder = tmp_path_factory.mktemp("tuning_data")
    train = json.loads(pstuts_files[0].read_text())[0]
    dev = min(json.loads(pstuts_files[1].read_text()), key=lambda v: len(v["transcripts"]))
    train["qa"], dev["qa"] = train["qa"][:TRAIN_QUESTIONS], dev["qa"][:DEV_QUESTIONS]
    (folder / "train_slice.json").write_text(json.dumps([train]))
    (folder / "dev").mkdir()
    (folder / "dev" / "dev_slice.json").write_text(json.dumps([dev]))
    return folder / "train_slice.json", folder / "dev" / "dev_slice.json"


def test_pairs_are_questions_with_the_answer_phrase_and_its_neighbours(pstuts_records):
    record = pstuts_records[0]
    passages = tuning.phrase_passages(raw_phrases(record["transcripts"]), buffer_size=1)
    texts = {p["sent_id"]: " ".join(p["sent"].split()) for p in record["transcripts"]}
    spoken = [s for s in sorted(texts) if texts[s]]
    middle = spoken[5]
    assert passages[middle] == " ".join(texts[s] for s in spoken[4:7])
    assert passages[spoken[0]] == " ".join(texts[s] for s in spoken[:2])
    assert tuning.phrase_passages(raw_phrases(record["transcripts"]), buffer_size=0)[middle] == texts[middle]


def test_questions_are_trained_as_search_embeds_them(slice_files):
    split = tuning.load_split([slice_files[0]], 0)
    raw = {p["q"] for v in json.loads(slice_files[0].read_text()) for p in v["qa"]}
    assert {e.question for e in split.examples} == {retrieval.dense_query_text(q).strip() for q in raw}
    assert any(q.lower().startswith("how") for q in raw) and not any(
        e.question.lower().startswith("how ") for e in split.examples
    )


def test_training_refuses_dev_videos(slice_files):
    train, dev = slice_files
    train_split = tuning.load_split([train], 1)
    with pytest.raises(tuning.TuningDataError, match="both the training files and the dev files"):
        tuning.check_disjoint(train_split, tuning.load_split([train, dev], 1))
    tuning.check_disjoint(train_split, tuning.load_split([dev], 1))


def test_length_grouped_batches_cover_every_row_once_without_repeated_texts(pstuts_files):
    split = tuning.load_split([pstuts_files[0]], tuning.TuningSettings().buffer_size)
    columns = tuning.training_pairs(split)
    rows = list(zip(columns["anchor"], columns["positive"], strict=True))
    batches = tuning.length_grouped_batches(rows, 64, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(len(rows)))
    assert all(len(b) <= 64 for b in batches) and sum(len(b) == 64 for b in batches) >= 0.9 * len(batches)
    for batch in batches:
        texts = [t for i in batch for t in rows[i]]
        assert len(set(texts)) == len(texts)
    lengths = np.array([len(r[1]) for r in rows])
    padded = sum(lengths[b].max() * len(b) for b in batches)
    assert padded < 1.6 * lengths.sum()  # random batches of bare phrases pad to 2.8 times the text
    assert tuning.length_grouped_batches(rows, 64, seed=4) != batches


def test_hard_negatives_come_from_another_video_and_are_never_the_positive(pstuts_files, tmp_path):
    videos = json.loads(pstuts_files[0].read_text())[:4]
    (tmp_path / "train.json").write_text(json.dumps(videos))
    split = tuning.load_split([tmp_path / "train.json"], 0)
    columns = tuning.training_triplets(split, bag_of_words, top_k=5, seed=1)
    assert (
        list(columns) == ["anchor", "positive", "negative"]
        and columns["anchor"] == tuning.training_pairs(split)["anchor"]
    )
    texts_of: dict[int, set[str]] = {}
    for key, text in split.passages.items():
        texts_of.setdefault(int(key.split(":")[0]), set()).add(text)
    video_of = {(e.question, e.passage): e.video_id for e in split.examples}
    for question, positive, negative in zip(*columns.values(), strict=True):
        assert negative != positive and negative not in texts_of[video_of[question, positive]]
        assert any(negative in texts for texts in texts_of.values())
    assert len(set(columns["negative"])) > 10  # a random one of the top few, not one phrase for every question
    one_video = tuning.Split(
        split.examples[:3], {k: v for k, v in split.passages.items() if k.startswith(f"{split.examples[0].video_id}:")}
    )
    with pytest.raises(tuning.TuningDataError, match="no passage of another video"):
        tuning.training_triplets(one_video, bag_of_words, top_k=5, seed=1)


def tune_command(args: list[str], root: Path) -> subprocess.CompletedProcess:
    """`pstuts tune` as a user runs it, with its own Dagster instance and storage."""
    (root / "dagster_home").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster_home"), "PSTUTS_STORAGE_DIR": str(root)}
    return subprocess.run([str(BIN / "pstuts"), "tune", *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def tuned(slice_files, tmp_path_factory) -> tuple[Path, dg.AssetMaterialization]:
    """A few real training steps, run by `pstuts tune` through Dagster; the folder it prints and its event."""
    train, dev = slice_files
    root = tmp_path_factory.mktemp("tune")
    args = ["--train", str(train), "--dev", str(dev), "--out", str(root / "models")]
    done = tune_command([*args, "--batch-size", "8", "--max-steps", "4", "--eval-steps", "2"], root)
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.parent == root / "models" and "accuracy@5" in done.stderr
    with dg.DagsterInstance.from_config(str(root / "dagster_home")) as instance:
        record = instance.get_latest_materialization_event(dg.AssetKey("tuned_embedder"))
    return folder, record.asset_materialization


@pytest.mark.slow
def test_tune_refuses_dev_files_among_the_training_files(slice_files, tmp_path):
    train, dev = slice_files
    done = tune_command(["--train", str(train), "--train", str(dev), "--dev", str(dev)], tmp_path)
    assert done.returncode == 1
    assert "both the training files and the dev files" in " ".join(done.stderr.split())  # rich wraps lines
    assert not (tmp_path / "tuned_models").exists()


@pytest.mark.slow
def test_tuned_model_folder_records_its_card(tuned, slice_files):
    folder, event = tuned
    card = tuning.read_card(folder)
    assert card["base_model"]["sha256"] == embedding.OFFICIAL_MINILM_SHA256["model.safetensors"]
    assert card["model_sha256"] == sha256_of(folder / "model.safetensors") != card["base_model"]["sha256"]
    assert [d["sha256"] for d in card["training_data"]] == [sha256_of(slice_files[0])]
    assert [d["sha256"] for d in card["dev_data"]] == [sha256_of(slice_files[1])]
    qa = json.loads(slice_files[0].read_text())[0]["qa"]
    distinct = {
        (retrieval.dense_query_text(p["q"]).strip(), p["sent_id"]) for p in qa
    }  # "How do I X?" = "How can I X?"
    assert card["pairs"] == len(distinct) and 20 < len(distinct) <= TRAIN_QUESTIONS and card["steps"] == 4
    assert card["settings"]["batch_size"] == 8 and card["settings"]["max_steps"] == 4
    assert set(card["metrics"]["dev_base"]) == set(card["metrics"]["dev_tuned"]) >= {"accuracy@5", "mrr@10"}
    assert [e["step"] for e in card["eval_history"]] == [2, 4]
    assert 0 < card["seconds"]["training"] <= card["seconds"]["total"]
    assert event.metadata["model_sha256"].value == card["model_sha256"]
    assert event.metadata["dev_accuracy@5"].value == card["metrics"]["dev_tuned"]["accuracy@5"]
    assert (folder / "README.md").exists()  # sentence-transformers' own model card
    # The pipeline sizes chunks by the model's window: the tuned model keeps the base model's 256 tokens.
    assert embedding.window_tokens(embedding.EmbeddingSpec(model=str(folder)))[0] == 256


@pytest.mark.slow
def test_tuned_model_loads_and_embeds_differently_from_the_base(tuned):
    folder, _ = tuned
    base, tuned_resource = EmbeddingsResource(), EmbeddingsResource(model=str(folder))
    assert tuned_resource.model_id != base.model_id and tuned_resource.model_id.startswith(f"local:{folder.name}:")
    text = "Press Command+T for Free Transform"
    tuned_vector = np.array(tuned_resource.query_embeddings().embed_query(text))
    base_vector = np.array(base.query_embeddings().embed_query(text))
    assert tuned_vector.shape == (384,) and abs(np.linalg.norm(tuned_vector) - 1) < 1e-4
    assert 0.9 < float(tuned_vector @ base_vector) < 0.99999


@pytest.mark.slow
def test_latest_points_the_pipeline_at_the_newest_version_and_evaluation_compares_it_with_the_base(
    tuned, slice_files, storage, monkeypatch
):
    folder, _ = tuned
    monkeypatch.setenv("PSTUTS_TUNED_MODELS_DIR", str(folder.parent))
    monkeypatch.setenv("PSTUTS_EMBEDDING_MODEL", "latest")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(slice_files[1].parent))
    defs = build_definitions(resources_from_env())
    embeddings = defs.resources["embeddings"]
    assert Path(embeddings.model) == folder
    # The model is in the code version of the assets that use it, so a new model marks them stale.
    graph = defs.resolve_asset_graph()
    for key in ("kamradt_chunks", "timestamped_chunks", "qdrant_collection"):
        assert graph.get(dg.AssetKey(key)).code_version.endswith(f"embedder={embeddings.model_id}")
    assert graph.get(dg.AssetKey("raw_transcripts")).code_version is None

    with dg.DagsterInstance.get() as instance:
        report = ingest(defs, instance)
        assert report.ok and report.chunks > 0
        with defs.resources["qdrant"].get_store() as store:
            assert store.model() == embeddings.model_id

        # retrieval_evaluation scores the tuned collection and a base-model one side by side.
        monkeypatch.setenv("PSTUTS_EMBEDDING_MODEL", "")
        monkeypatch.setenv("PSTUTS_COLLECTION", "base")
        base_defs = build_definitions(resources_from_env())
        assert ingest(base_defs, instance).ok
        result = dg.materialize(
            [retrieval_evaluation],
            resources={k: defs.resources[k] for k in ("transcript_source", "embeddings", "qdrant", "reranker")},
            instance=instance,
            run_config={"ops": {"retrieval_evaluation": {"config": {"compare_collection": "base"}}}},
        )
        metadata = result.asset_materializations_for_node("retrieval_evaluation")[0].metadata
        base = base_defs.resources["embeddings"]
        assert metadata["embedding_model"].value == embeddings.model_id
        assert metadata["compared_model"].value == base.model_id != embeddings.model_id
        questions = evaluation.load_questions([slice_files[1]])
        with base_defs.resources["qdrant"].get_store() as store:
            ranked = retrieval.search_many(
                store, base.query_embeddings(), base.model_id, [q.text for q in questions], 10
            )
        expected = evaluation.evaluate(questions, ranked)
        for name in ("hit@5", "link@5", "mrr@10"):
            assert metadata[f"compared_{name}"].value == pytest.approx(expected[name], abs=1e-4)
            difference = metadata[name].value - metadata[f"compared_{name}"].value
            assert metadata[f"vs_compared_{name}"].value == pytest.approx(difference, abs=2e-4)


def test_latest_without_a_tuned_model_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTUTS_TUNED_MODELS_DIR", str(tmp_path))
    (tmp_path / ".minilm-pstuts-x.partial").mkdir()  # an unfinished run is not a version
    with pytest.raises(FileNotFoundError, match="run `pstuts tune` first"):
        embedding.resolve_model("latest")
    assert embedding.resolve_model("/some/folder") == "/some/folder"
