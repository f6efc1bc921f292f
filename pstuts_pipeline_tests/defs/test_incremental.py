"""Re-ingesting: unchanged videos cost nothing, an edited video re-embeds only its new text, a new model redoes all."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.cli.report import IngestSettings, unchanged_report
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.reconcile import RunLimits, fingerprint_function, ingest_ranges, plan_tick, read_store
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.sources import load_catalog, normalize_text
from pstuts_pipeline.sources.reconciliation import reconcile
from pstuts_pipeline_tests.support.helpers import run_metadata

REPO = Path(__file__).resolve().parents[2]
FEW_VIDEOS = 3


@pytest.fixture
def data_folder(tmp_path, pstuts_files, monkeypatch) -> Path:
    """The three shortest dev videos in a data folder of their own (a test may edit it)."""
    videos = sorted(json.loads(pstuts_files[1].read_text()), key=lambda v: len(v["transcripts"]))[:FEW_VIDEOS]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "videos.json").write_text(json.dumps(videos))
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(folder))
    return folder


def points_by_id(resources: dict) -> dict[str, dict]:
    """Every stored point: payload and vectors, to compare before and after."""
    qdrant = resources["qdrant"]
    with qdrant.get_store() as store:
        points, _ = store.scroll(limit=10_000, with_payload=True, with_vectors=True)
    return {str(p.id): {"payload": p.payload, "vector": p.vector} for p in points}


def texts_sent_to_model(instance: dg.DagsterInstance, run_id: str) -> int:
    return (
        run_metadata(instance, run_id, "kamradt_chunks")["windows_embedded"]
        + run_metadata(instance, run_id, "timestamped_chunks").get("texts_embedded", 0)
        + run_metadata(instance, run_id, "qdrant_collection")["texts_embedded"]
    )


def spoken_phrases(video: dict) -> list[str]:
    return [line for line in (normalize_text(p["sent"]) for p in video["transcripts"]) if line]


def chunker_windows_of(video: dict) -> list[str]:
    """The texts the chunker embeds for a video: each spoken phrase with its neighbours."""
    return chunking.chunker_windows(spoken_phrases(video), chunking.ChunkerSettings().buffer_size)


def texts_of(video: dict, chunk_texts: list[str]) -> set[str]:
    """Every text the pipeline embeds for a video: the chunker's windows, the chunks, each phrase alone."""
    return set(chunker_windows_of(video)) | set(chunk_texts) | set(spoken_phrases(video))


@pytest.mark.slow
def test_unchanged_videos_launch_no_run_and_keep_their_points(data_folder, storage, instance, monkeypatch):
    resources = resources_from_env()
    defs = build_definitions(resources)
    first = ingest(defs, instance)
    assert first.ok and len(first.run_ids) == 1 and len(first.plan.to_ingest) == FEW_VIDEOS
    before, runs_before = points_by_id(resources), instance.get_runs_count()

    again = ingest(defs, instance)
    assert again.ok and again.run_ids == [] and again.plan.to_ingest == []
    assert sorted(again.plan.unchanged) == sorted(first.plan.to_ingest)
    assert instance.get_runs_count() == runs_before
    assert points_by_id(resources) == before and again.points_in_collection == len(before)

    # The CLI's shortcut reaches the same verdict from the ledger, without opening Qdrant or the instance, and
    # without reading the data folder's files, which it found untouched.
    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data folder was read")

    monkeypatch.setattr("pstuts_pipeline.cli.report.reconcile_folder", no_reading)
    quick = unchanged_report(IngestSettings.from_env())
    assert quick is not None and quick.from_ledger
    assert quick.plan.unchanged == again.plan.unchanged and quick.points_in_collection == len(before)
    # The sensor's tick reaches it too, from the instance's partitions and the same proof.
    monkeypatch.setattr("pstuts_pipeline.defs.reconcile.reconcile_folder", no_reading)
    r = defs.resources
    tick = plan_tick(instance, r["transcript_source"], r["embeddings"], r["chunker"], r["qdrant"], trigger="sensor")
    assert tick.run_requests == [] and tick.skip_reason.endswith("nothing to ingest or remove (files untouched)")
    # A file touched (even to the same text) sends the check back to reading the folder.
    touched = next(data_folder.glob("*.json"))
    touched.write_text(touched.read_text())
    with pytest.raises(AssertionError, match="the data folder was read"):
        unchanged_report(IngestSettings.from_env())
    with pytest.raises(AssertionError, match="the data folder was read"):
        plan_tick(instance, r["transcript_source"], r["embeddings"], r["chunker"], r["qdrant"], trigger="sensor")


@pytest.mark.slow
def test_the_ledger_gives_way_to_any_other_write(data_folder, storage, instance, monkeypatch):
    monkeypatch.setenv("PSTUTS_MAX_VIDEOS_PER_RUN", "2")
    resources = resources_from_env()
    defs = build_definitions(resources)
    first = ingest(defs, instance)
    assert first.ok and len(first.run_ids) == 2 and unchanged_report(IngestSettings.of(resources)) is not None
    before = points_by_id(resources)

    # Another writer removes a video's points: the ledger no longer proves anything, the video comes back.
    victim = before[next(iter(before))]["payload"]["metadata"]["video_id"]
    from pstuts_pipeline.search import vectorstore

    with resources["qdrant"].get_store() as store:
        assert vectorstore.delete_video(store, victim) > 0
    assert unchanged_report(IngestSettings.of(resources)) is None
    repaired = ingest(defs, instance)
    assert repaired.plan.to_ingest == [str(victim)] and len(repaired.run_ids) == 1
    assert points_by_id(resources) == before
    assert unchanged_report(IngestSettings.of(resources)) is not None

    # A partition deleted in the instance (say from the UI) is registered again, without a run.
    instance.delete_dynamic_partition("videos", str(victim))
    assert unchanged_report(IngestSettings.of(resources)) is None
    reregistered = ingest(defs, instance)
    assert reregistered.run_ids == [] and str(victim) in instance.get_dynamic_partitions("videos")
    assert unchanged_report(IngestSettings.of(resources)) is not None


@pytest.mark.slow
def test_an_edited_video_reembeds_only_its_new_texts(data_folder, storage, instance):
    resources = resources_from_env()
    defs = build_definitions(resources)
    assert ingest(defs, instance).ok
    before = points_by_id(resources)
    file = data_folder / "videos.json"
    videos = json.loads(file.read_text())
    known_texts = set().union(
        *(texts_of(v, []) for v in videos), (p["payload"]["page_content"] for p in before.values())
    )

    edited = max(videos, key=lambda v: len(v["transcripts"]))
    phrase = edited["transcripts"][len(edited["transcripts"]) // 2]
    phrase["sent"] = "Now the layer mask hides everything outside the selection."
    file.write_text(json.dumps(videos))

    report = ingest(defs, instance)
    assert report.ok and report.plan.to_ingest == [str(edited["video_id"])] and len(report.run_ids) == 1
    after = points_by_id(resources)

    def mine(points, want):
        return {i: p for i, p in points.items() if (p["payload"]["metadata"]["video_id"] == edited["video_id"]) == want}

    assert mine(after, False) == mine(before, False), "other videos' points changed"
    new_chunks = [p["payload"]["page_content"] for p in mine(after, True).values()]
    assert any(phrase["sent"] in text for text in new_chunks)

    # Exactly the texts nobody embedded before reach the model: the new windows, phrase and chunks.
    new_texts = texts_of(edited, new_chunks) - known_texts
    assert phrase["sent"] in new_texts and len(new_texts) < len(texts_of(edited, new_chunks)) / 2
    assert texts_sent_to_model(instance, report.run_ids[0]) == len(new_texts)


@pytest.mark.slow
def test_new_chunk_settings_reingest_every_video_from_cached_windows(data_folder, storage, instance, monkeypatch):
    resources = resources_from_env()
    defs = build_definitions(resources)
    assert ingest(defs, instance).ok
    before = points_by_id(resources)

    monkeypatch.setenv("PSTUTS_MAX_CHUNK_TOKENS", "64")  # another fingerprint; same model, same chunker windows
    resources = resources_from_env()
    assert unchanged_report(IngestSettings.of(resources)) is None
    report = ingest(build_definitions(resources), instance)
    assert report.ok and len(report.plan.to_ingest) == FEW_VIDEOS
    after = points_by_id(resources)
    assert {p["payload"]["metadata"]["fingerprint"] for p in after.values()}.isdisjoint(
        p["payload"]["metadata"]["fingerprint"] for p in before.values()
    )
    assert run_metadata(instance, report.run_ids[0], "kamradt_chunks")["windows_embedded"] == 0


@pytest.mark.slow
def test_another_model_is_another_fingerprint_and_another_cache(data_folder, storage, instance, monkeypatch, tmp_path):
    resources = resources_from_env()
    first = ingest(build_definitions(resources), instance)
    assert first.ok

    # The same weights under another folder name are another model id: nothing stored or cached is reused.
    other = tmp_path / "renamed-minilm"
    other.mkdir()
    for item in embedding.bundled_model_path().iterdir():
        (other / item.name).symlink_to(item)
    monkeypatch.setenv("PSTUTS_EMBEDDING_MODEL", str(other))
    renamed = resources_from_env()
    assert renamed["embeddings"].model_id != resources["embeddings"].model_id
    stored, _ = read_store(renamed["qdrant"])
    fingerprint_of = fingerprint_function(renamed["embeddings"], renamed["chunker"])
    plan = reconcile(load_catalog(renamed["transcript_source"].path()), stored, fingerprint_of)
    assert sorted(plan.to_ingest) == sorted(first.plan.to_ingest) and plan.unchanged == []
    assert unchanged_report(IngestSettings.of(renamed)) is None

    monkeypatch.setenv("PSTUTS_COLLECTION", "renamed_model")  # a collection holds one model's vectors
    renamed = resources_from_env()
    report = ingest(build_definitions(renamed), instance)
    assert report.ok and sorted(report.plan.to_ingest) == sorted(first.plan.to_ingest)
    windows = sum(len(chunker_windows_of(v)) for v in json.loads((data_folder / "videos.json").read_text()))
    assert run_metadata(instance, report.run_ids[0], "kamradt_chunks")["windows_embedded"] == windows


@pytest.mark.slow
def test_a_cli_ingest_with_nothing_to_do_loads_neither_dagster_nor_qdrant_nor_a_model_runtime(data_folder, storage):
    env = {**os.environ, "PSTUTS_DATA_DIR": str(data_folder), "PSTUTS_STORAGE_DIR": str(storage)}
    command = [sys.executable, "-X", "importtime", "-m", "pstuts_pipeline.cli.app", "ingest"]
    first = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]

    def loaded(run):
        return {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}

    assert {"dagster", "onnxruntime", "qdrant_client"} <= loaded(first)  # the runner, the backend's runtime, the store

    again = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "videos unchanged (skipped) │ 3" in again.stderr
    assert loaded(again).isdisjoint(
        {"dagster", "torch", "onnxruntime", "qdrant_client", "sqlalchemy", "pandas"}
        | {"langchain_experimental.text_splitter"}
        | {"bm25s", "scipy"}  # BM25's stop words are read when first used
    )


def test_runs_hold_at_most_the_limit_of_consecutive_partitions():
    order = [str(k) for k in (3, 5, 8, 13, 21, 34, 55)]
    assert ingest_ranges(order, order, RunLimits(3)) == [("3", "8"), ("13", "34"), ("55", "55")]
    assert ingest_ranges(["5", "8", "21", "34", "55"], order, RunLimits(2)) == [("5", "8"), ("21", "34"), ("55", "55")]
    assert ingest_ranges(["13"], order, RunLimits(1)) == [("13", "13")]
    assert ingest_ranges(["3", "8", "13"], order, RunLimits(100)) == [("3", "3"), ("8", "13")]
    # By phrases too: a video over the budget runs alone, the others fill runs up to it.
    phrases = {"3": 10, "5": 10, "8": 500, "13": 10, "21": 10, "34": 30}
    by_phrases = RunLimits(100, max_phrases=40, phrases=phrases)
    assert ingest_ranges(order[:6], order, by_phrases) == [("3", "5"), ("8", "8"), ("13", "21"), ("34", "34")]


def test_runs_of_an_ingest_are_cut_where_their_work_is_most_even():
    order = [str(k) for k in range(1, 9)]
    work = dict(zip(order, (50, 10, 10, 10, 10, 10, 10, 50), strict=True))
    # Two runs by count alone would be 4 + 4 videos of 80 and 80: already even.
    assert ingest_ranges(order, order, RunLimits(100, min_runs=2, work=work)) == [("1", "4"), ("5", "8")]
    work["1"] = 90  # now 120 against 80 at 4 + 4, 100 against 100 at 2 + 6
    assert ingest_ranges(order, order, RunLimits(100, min_runs=2, work=work)) == [("1", "2"), ("3", "8")]
    # The count limit still holds (at most 5 a run: 3 + 5 is 110 against 90), and a limit that already makes 3 runs
    # (3 + 3 + 2 by count: 110, 30, 60) evens those 3 (100, 30, 70).
    assert ingest_ranges(order, order, RunLimits(5, min_runs=2, work=work)) == [("1", "3"), ("4", "8")]
    assert ingest_ranges(order, order, RunLimits(3, work=work)) == [("1", "2"), ("3", "5"), ("6", "8")]
    # Without work, or with fewer videos than runs, nothing is balanced or split further.
    assert ingest_ranges(order, order, RunLimits(100, min_runs=2)) == [("1", "8")]
    assert ingest_ranges(["5"], order, RunLimits(100, min_runs=4, work=work)) == [("5", "5")]
    # A key not selected ends a run (the ranges are Dagster partition ranges): that cut alone makes two.
    gap = order[:3] + order[4:]
    assert ingest_ranges(gap, order, RunLimits(100, min_runs=2, work=work)) == [("1", "3"), ("5", "8")]
    assert ingest_ranges(gap, order, RunLimits(100, min_runs=3, work=work)) == [("1", "1"), ("2", "3"), ("5", "8")]


@pytest.mark.slow
def test_bfloat16_is_another_model_id_with_nearly_the_same_vectors():
    exact = embedding.EmbeddingSpec(backend="torch")
    fast = embedding.EmbeddingSpec(precision="bfloat16", backend="torch")
    assert fast.model_id == f"{exact.model_id}@bfloat16" and embedding.cache_namespace(
        fast
    ) != embedding.cache_namespace(exact)
    texts = ["Select the layer mask, then paint with black.", "Okay.", "Choose Filter > Blur > Gaussian Blur " * 8]
    a = np.array(embedding.load_embeddings(exact).embed_documents(texts))
    b = np.array(embedding.load_embeddings(fast).embed_documents(texts))
    assert not np.array_equal(a, b) and (a * b).sum(axis=1).min() > 0.999
    with pytest.raises(ValueError, match="PSTUTS_EMBEDDING_PRECISION is 'float16'"):
        embedding.load_embeddings(embedding.EmbeddingSpec(precision="float16", backend="torch"))
