"""The data-folder sensor: new, changed and reverted videos, bad files reported, removed videos cleaned up."""

from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline import chunking, vectorstore
from pstuts_pipeline.assets.ingestion import TranscriptSource
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.resources import resources_from_env
from pstuts_pipeline.sensors import read_cursor, transcript_folder_sensor
from pstuts_pipeline.transcripts import load_catalog, repair_times

from test_bad_input import CASES, SAMPLE, stored_points, write_data

KEYS = ["9001", "9002", "9003"]


def evaluate(instance: dg.DagsterInstance, folder: Path, cursor: str | None) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"transcript_source": TranscriptSource(data_dir=str(folder))}
    )
    return transcript_folder_sensor(context)


def apply_partition_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


def ingest_requests(result: dg.SensorResult) -> list[dg.RunRequest]:
    return [r for r in result.run_requests if r.job_name == ingest_videos_job.name]


@pytest.fixture
def folder(tmp_path) -> Path:
    write_data(tmp_path / "data")
    return tmp_path / "data"


@pytest.fixture
def started(folder) -> tuple[dg.DagsterInstance, str]:
    """An instance that has seen the sample folder once, and the cursor that tick left."""
    instance = dg.DagsterInstance.ephemeral()
    first = evaluate(instance, folder, None)
    apply_partition_requests(instance, first)
    return instance, first.cursor


def test_new_videos_become_partitions_and_runs(folder):
    instance = dg.DagsterInstance.ephemeral()
    result = evaluate(instance, folder, None)
    [add] = result.dynamic_partitions_requests
    assert isinstance(add, dg.AddDynamicPartitionsRequest) and list(add.partition_keys) == KEYS
    assert [r.partition_key for r in ingest_requests(result)] == KEYS
    assert {r.tags["pstuts/reason"] for r in result.run_requests} == {"new video"}
    catalog = load_catalog(folder)
    assert read_cursor(result.cursor)[1] == {k: v.content_hash for k, v in catalog.videos.items()}


def test_unchanged_videos_skip_and_an_edit_back_to_an_old_version_runs_again(started, folder):
    instance, cursor = started
    unchanged = evaluate(instance, folder, cursor)
    assert not unchanged.run_requests and unchanged.skip_reason
    edited = [SAMPLE[0], {**SAMPLE[1], "title": "Edited"}]
    write_data(folder, a=edited)
    first_edit = evaluate(instance, folder, unchanged.cursor)
    [request] = first_edit.run_requests
    assert (request.partition_key, request.tags["pstuts/reason"]) == ("9002", "source changed")
    write_data(folder)
    reverted = evaluate(instance, folder, first_edit.cursor)
    write_data(folder, a=edited)
    edited_again = evaluate(instance, folder, reverted.cursor)
    # The daemon launches one run per run key, ever: a repeated key would leave Qdrant on the old version.
    keys = [r.run_key for tick in (first_edit, reverted, edited_again) for r in tick.run_requests]
    assert [r.partition_key for tick in (reverted, edited_again) for r in tick.run_requests] == ["9002", "9002"]
    assert len(set(keys)) == 3


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_file_is_reported_and_its_videos_kept(case, started, folder, capsys):
    instance, cursor = started
    expected = CASES[case](folder)
    result = evaluate(instance, folder, cursor)
    logged = capsys.readouterr().err  # the tick's log, shown in the UI
    assert not result.run_requests and not result.dynamic_partitions_requests
    for message in expected.values():
        for line in message.splitlines():
            assert line in result.skip_reason.skip_message
            assert f"ERROR - not ingested: {line}" in logged
    assert set(instance.get_dynamic_partitions(video_partitions.name)) == set(KEYS)
    # The broken videos keep their last good hash: restoring the file asks for nothing, editing it does.
    assert read_cursor(result.cursor)[1] == read_cursor(cursor)[1]
    write_data(folder)
    assert not evaluate(instance, folder, result.cursor).run_requests


def test_a_missing_folder_removes_nothing(started, folder, tmp_path):
    instance, cursor = started
    folder.rename(tmp_path / "unmounted")
    result = evaluate(instance, folder, cursor)
    assert not result.run_requests and not result.dynamic_partitions_requests
    assert f"{folder}: is not a folder" in result.skip_reason.skip_message
    assert read_cursor(result.cursor)[1] == read_cursor(cursor)[1]


def _store_sample_points(hash_embeddings) -> None:
    """Points for the sample videos, embedded with the hash embedder (the removal does not care how)."""
    resources = resources_from_env()
    with resources["qdrant"].get_client() as client:
        vectorstore.ensure_collection(client, resources["qdrant"].collection, hash_embeddings.size, "hash")
        for video in SAMPLE:
            phrases, _ = repair_times(video["transcripts"])
            chunks = [chunking.TimedChunk(i, tuple(phrases[i * 5 : i * 5 + 5])) for i in range((len(phrases) + 4) // 5)]
            info = vectorstore.VideoInfo(video["video_id"], video["title"], video["desc"], video["url"], "hash")
            dense = hash_embeddings.embed_documents([c.text for c in chunks])
            sentences = [hash_embeddings.embed_documents([p.text for p in c.phrases]) for c in chunks]
            points = vectorstore.build_points(info, chunks, dense, sentences, "fingerprint")
            vectorstore.replace_video_points(client, resources["qdrant"].collection, video["video_id"], points)


def _point_counts(storage: Path) -> Counter[int]:
    return Counter(p["payload"]["metadata"]["video_id"] for p in stored_points(storage))


def test_a_removed_video_loses_its_partition_and_points_through_the_sensor_requests(
    started, folder, storage, hash_embeddings
):
    instance, cursor = started
    _store_sample_points(hash_embeddings)
    before = _point_counts(storage)
    assert set(before) == {9001, 9002, 9003}
    (folder / "b.json").unlink()

    result = evaluate(instance, folder, cursor)

    [delete] = result.dynamic_partitions_requests
    assert isinstance(delete, dg.DeleteDynamicPartitionsRequest) and list(delete.partition_keys) == ["9003"]
    [removal] = result.run_requests
    assert removal.job_name == remove_videos_job.name
    apply_partition_requests(instance, result)
    job = build_definitions(resources_from_env()).resolve_job_def(remove_videos_job.name)
    assert job.execute_in_process(run_config=removal.run_config, instance=instance).success
    assert _point_counts(storage) == {9001: before[9001], 9002: before[9002]}
    assert set(instance.get_dynamic_partitions(video_partitions.name)) == {"9001", "9002"}
    assert not evaluate(instance, folder, result.cursor).run_requests
