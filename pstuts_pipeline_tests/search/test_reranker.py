"""The reranker: first-stage negatives, a short real training run through `pstuts tune-reranker`, and search using it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pstuts_pipeline.defs.resources import RerankerResource, resources_from_env
from pstuts_pipeline.embedding import bundled_model_path, versions
from pstuts_pipeline.search import evaluation, reranking, retrieval
from pstuts_pipeline.search.langchain_retriever import PstutsRetriever
from pstuts_pipeline.training import reranker as reranker_training
from pstuts_pipeline.training import tuning
from pstuts_pipeline_tests.support.helpers import bag_of_words, sha256_of

BIN = Path(sys.executable).parent
STEPS = 12
QUESTIONS_PER_VIDEO = 50


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory, pstuts_files) -> tuple[Path, Path]:
    """Three train videos cut to 20 questions each and two short dev videos cut to 10: seconds of training."""
    folder = tmp_path_factory.mktemp("reranker_data")
    train = json.loads(pstuts_files[0].read_text())[:3]
    dev = sorted(json.loads(pstuts_files[1].read_text()), key=lambda v: len(v["transcripts"]))[3:5]
    for video in train:
        video["qa"] = video["qa"][:20]
    for video in dev:
        video["qa"] = video["qa"][:10]
    (folder / "train_slice.json").write_text(json.dumps(train))
    (folder / "dev_slice.json").write_text(json.dumps(dev))
    return folder / "train_slice.json", folder / "dev_slice.json"


def test_bm25_scores_follow_shared_rare_terms():
    texts = ["Choose Free Transform from the Edit menu.", "Open the layer mask.", "The layer is open."]
    scores = reranker_training.bm25_scores(["free transform the layer", "mask"], texts)
    assert scores.shape == (2, 3)
    assert scores[0].argmax() == 0 and scores[1].argmax() == 1 and scores[1, 2] == 0


def test_training_rows_take_several_hard_negatives_from_other_videos(slice_files):
    split = tuning.load_split([slice_files[0]], 0)
    settings = reranker_training.RerankerSettings(negatives=3, negatives_top_k=5)
    columns = reranker_training.training_rows(split, tuning.dense_scores(bag_of_words), settings)
    assert list(columns) == ["anchor", "positive", "negative_1", "negative_2", "negative_3"]
    texts_of: dict[int, set[str]] = {}
    for key, text in split.passages.items():
        texts_of.setdefault(int(key.split(":")[0]), set()).add(text)
    video_of = {(e.question, e.passage): e.video_id for e in split.examples}
    for anchor, positive, *negatives in zip(*columns.values(), strict=True):
        assert len(set(negatives)) == 3 and positive not in negatives
        assert not set(negatives) & texts_of[video_of[anchor, positive]]


@pytest.fixture(scope="module")
def trained(slice_files, tmp_path_factory) -> Path:
    """A few real training steps, run by `pstuts tune-reranker` through Dagster; the folder it prints."""
    train, dev = slice_files
    root = tmp_path_factory.mktemp("tune_reranker")
    (root / "dagster_home").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(root / "dagster_home"), "PSTUTS_STORAGE_DIR": str(root)}
    args = ["--train", str(train), "--dev", str(dev), "--out", str(root / "rerankers"), "--batch-size", "8"]
    done = subprocess.run(
        [
            str(BIN / "pstuts"),
            "tune-reranker",
            *args,
            "--max-steps",
            str(STEPS),
            "--eval-steps",
            "6",
            "--learning-rate",
            "3e-4",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.parent == root / "rerankers" and "mrr@10" in done.stderr
    return folder


@pytest.mark.slow
def test_reranker_folder_records_its_card(trained, slice_files):
    card = versions.read_card(trained)
    assert card["kind"] == "cross-encoder reranker" and card["steps"] == STEPS
    assert card["base_model"]["sha256"] == sha256_of(bundled_model_path() / "model.safetensors")
    assert card["model_sha256"] == sha256_of(trained / "model.safetensors") != card["base_model"]["sha256"]
    assert [d["sha256"] for d in card["training_data"]] == [sha256_of(slice_files[0])]
    assert [d["sha256"] for d in card["dev_data"]] == [sha256_of(slice_files[1])]
    assert set(card["metrics"]["dev_trained"]) == {"map", "mrr@10", "ndcg@10"}
    assert [e["step"] for e in card["eval_history"]] == [6, 12]
    assert 0 < card["seconds"]["training"] <= card["seconds"]["total"]
    assert card["settings"]["batch_size"] == 8 and card["settings"]["learning_rate"] == 3e-4


@pytest.mark.slow
def test_training_moves_the_answer_above_other_videos_phrases(trained, slice_files):
    """The trained model prefers each training question's answer over its first-stage hard negatives more than the
    untrained one (base weights, fresh head) does."""
    split = tuning.load_split([slice_files[0]], 0)
    settings = reranker_training.RerankerSettings(negatives=3)
    columns = reranker_training.training_rows(split, tuning.dense_scores(bag_of_words), settings)

    def margin(model: reranking.Reranker) -> float:
        pairs = [(q, p) for q, p in zip(columns["anchor"], columns["positive"], strict=True)]
        positive = model.score(pairs)
        negative = np.mean([model.score(list(zip(columns["anchor"], columns[f"negative_{n}"]))) for n in (1, 2, 3)], 0)
        return float(np.mean(positive - negative))

    untrained = model_versions_untrained(trained.parent)
    assert margin(reranking.Reranker(trained)) > margin(untrained) + 0.5
    # A hand-made case: the phrase naming the question's tool beats an unrelated one from another video.
    model = reranking.Reranker(trained)
    scores = model.score(
        [
            ("crop the photo", "Select the Crop tool and drag over the photo."),
            ("crop the photo", "Now we add a gradient to the sky."),
        ]
    )
    assert scores[0] > scores[1]


def model_versions_untrained(root: Path) -> reranking.Reranker:
    """The base weights with a fresh classification head, saved as a folder the Reranker can load."""
    from sentence_transformers.cross_encoder import CrossEncoder

    folder = root / "untrained"
    if not folder.exists():
        CrossEncoder(str(bundled_model_path()), num_labels=1, device="cpu").save(str(folder))
    return reranking.Reranker(folder)


def test_latest_reranker_and_no_reranker(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTUTS_RERANKERS_DIR", str(tmp_path))
    monkeypatch.delenv("PSTUTS_RERANKER", raising=False)
    assert resources_from_env()["reranker"].get() is None
    with pytest.raises(FileNotFoundError, match="pstuts tune-reranker"):
        reranker_training.resolve_reranker("latest")
    monkeypatch.setenv("PSTUTS_RERANKER", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="not a reranker folder"):
        resources_from_env()["reranker"].get()


@pytest.mark.slow
def test_search_with_the_reranker_on_real_dev_videos(searchable, trained, monkeypatch, tmp_path):  # noqa: F811
    embeddings, qdrant = searchable["resources"]["embeddings"], searchable["resources"]["qdrant"]
    # The first QUESTIONS_PER_VIDEO questions of each video, here and in `pstuts evaluate` (each reranks 20 pairs).
    videos = json.loads(searchable["qa_file"].read_text())
    for video in videos:
        video["qa"] = video["qa"][:QUESTIONS_PER_VIDEO]
    qa_file = tmp_path / "dev_questions.json"
    qa_file.write_text(json.dumps(videos))
    questions = evaluation.load_questions([qa_file])
    assert len(questions) == QUESTIONS_PER_VIDEO * len(videos)
    texts = [q.text for q in questions]
    monkeypatch.setenv("PSTUTS_RERANKER", str(trained))
    resource = resources_from_env()["reranker"]
    assert isinstance(resource, RerankerResource) and resource.get() is resource.get()  # loaded once per process
    model = resource.get()
    depth = model.settings.depth
    with qdrant.get_store() as store:
        args = (store, embeddings.query_embeddings(), embeddings.model_id)
        first = retrieval.search_many(*args, texts, depth)
        reranked = retrieval.search_many(*args, texts, depth, reranker=model)
        documents = PstutsRetriever(store=store, embeddings=args[1], model_id=args[2], k=3, reranker=model).invoke(
            texts[0]
        )
    key = lambda r: (r.video_id, r.chunk_index)
    for before, after in zip(first, reranked, strict=True):
        assert sorted(map(key, before)) == sorted(map(key, after))  # the same candidates, reordered
        assert [r.score for r in after] == sorted((r.score for r in after), reverse=True)
        assert all(r.start <= r.link_time <= r.stop and r.link_sentence in r.text for r in after)
    assert sum(list(map(key, b)) != list(map(key, a)) for b, a in zip(first, reranked)) > len(texts) // 10
    assert [d.metadata["chunk_index"] for d in documents] == [r.chunk_index for r in reranked[0][:3]]
    metrics = evaluation.evaluate(questions, reranked)
    assert metrics["hit@5"] >= 0.5 and metrics["video@1"] >= 0.5, metrics

    # `pstuts evaluate` goes through the same path and reports the unambiguous subset and video@k.
    run = subprocess.run(
        [str(BIN / "pstuts"), "evaluate", "--qa", str(qa_file), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **searchable["env"], "PSTUTS_RERANKER": str(trained)},
    )
    assert run.returncode == 0, run.stderr
    reported = json.loads(run.stdout.strip().splitlines()[-1])
    # It counts a question's ambiguity over every question of the data folder's videos.
    expected = evaluation.evaluate(questions, [r[:10] for r in reranked], asked=searchable["questions"])
    for name in ("hit@5", "link@5", "video@1", "unambiguous_questions", "unambiguous_hit@5", "unambiguous_video@5"):
        assert reported[name] == pytest.approx(expected[name])


class KeywordScorer:
    """Scores a pair by whether the phrase holds the question's last word: the fusion logic without a model."""

    def __init__(self, settings: reranking.RerankSettings):
        self.settings = settings

    def score(self, pairs):  # noqa: ANN001, ANN201
        return np.array([float(q.split()[-1] in p) for q, p in pairs], dtype=np.float32)


@pytest.mark.parametrize("relink", [False, True])
def test_rerank_moves_the_chunk_the_cross_encoder_prefers_up_and_keeps_or_moves_the_link(relink):
    def found(score: float, texts: list[str], link_scores: list[float]) -> retrieval.Candidate:
        scores = np.array(link_scores)
        return retrieval.Candidate(None, score, list(range(len(texts))), texts, scores, int(np.argmax(scores)))

    pool = [
        found(1.0, ["add a gradient", "paint the sky"], [0.9, 0.1]),
        found(0.5, ["open the layers panel", "select the crop tool"], [0.8, 0.7]),
    ]
    scorer = KeywordScorer(reranking.RerankSettings(depth=2, phrases=2, weight=2.0, relink=relink))
    [reranked] = retrieval.rerank(scorer, ["how do I crop"], [pool], top_k=2)
    assert [c.texts[0] for c in reranked] == ["open the layers panel", "add a gradient"]
    assert reranked[0].choice == (1 if relink else 0)


class BatchScaledScorer(KeywordScorer):
    """Rounds to a step set by the longest pair in the call, as int8's per-batch scale ties a score to its batch."""

    def score(self, pairs):  # noqa: ANN001, ANN201
        step = max(len(q) + len(p) for q, p in pairs) / 4
        return np.array([round(len(p) / step) for q, p in pairs], dtype=np.float32)


def test_a_questions_reranking_does_not_depend_on_what_else_was_asked():
    def pool() -> list[retrieval.Candidate]:
        texts = [["a"], ["a much longer phrase"], ["a mid phrase"]]
        return [retrieval.Candidate(None, 1.0 - n / 10, [0], t, np.array([1.0]), 0) for n, t in enumerate(texts)]

    scorer = BatchScaledScorer(reranking.RerankSettings(depth=3, phrases=1, weight=1.0, relink=False))
    [alone] = retrieval.rerank(scorer, ["crop"], [pool()], top_k=3)
    together = retrieval.rerank(scorer, ["crop", "x" * 500], [pool(), pool()], top_k=3)[0]
    assert [(c.texts, round(c.score, 6)) for c in alone] == [(c.texts, round(c.score, 6)) for c in together]
