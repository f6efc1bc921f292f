"""The nightly schedules: the sensor's reconcile policy on a clock (changed and removed videos), all on request."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import execute_request, ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.reconcile import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pstuts_pipeline.defs.resources import (
    ChunkerResource,
    EmbeddingsResource,
    QdrantResource,
    RerankerResource,
    TranscriptSource,
)
from pstuts_pipeline.sources.reconciliation import CHANGED_REASON, FORCED_REASON, REMOVED_REASON
from pstuts_pipeline_tests.support.helpers import SAMPLE_DIR

TICK = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
pytestmark = pytest.mark.usefixtures("files_written_long_ago")


def write_videos(folder: Path, videos: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "videos.json").write_text(json.dumps(videos, indent=1), encoding="utf-8")


def evaluate(defs: dg.Definitions, name: str, instance: dg.DagsterInstance) -> list[dg.RunRequest] | dg.SkipReason:
    # Entered and closed here: the context opens its own instance from `instance`'s ref, and left to the garbage
    # collector (on whatever thread collects it) that instance stayed Dagster's current one after it was gone,
    # failing a later test's run with "Attempted to resolve undefined DagsterInstance weakref".
    with dg.build_schedule_context(
        instance=instance, resources=defs.resources, scheduled_execution_time=TICK
    ) as context:
        return defs.resolve_schedule_def(name)(context)


def ranges(result: list[dg.RunRequest] | dg.SkipReason) -> list[tuple[str, str, str]]:
    assert not isinstance(result, dg.SkipReason), result.skip_message
    return [
        (r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG], r.tags["pstuts/reason"])
        for r in result
    ]


@pytest.mark.slow
def test_schedules_request_changed_and_removed_videos_and_all_on_request(storage, instance, tmp_path, monkeypatch):
    videos = json.loads((SAMPLE_DIR / "sample_videos.json").read_text())
    folder = tmp_path / "data"
    write_videos(folder, videos)
    resources = {
        "transcript_source": TranscriptSource(data_dir=str(folder)),
        "embeddings": EmbeddingsResource(),
        "chunker": ChunkerResource(),
        "qdrant": QdrantResource(path=str(storage / "qdrant")),
        "reranker": RerankerResource(),
    }
    defs = build_definitions(resources)
    first = ingest(defs, instance)
    assert first.ok, first.failed_runs

    unchanged = evaluate(defs, "nightly_reingest", instance)
    assert isinstance(unchanged, dg.SkipReason) and "3 videos match" in unchanged.skip_message

    videos[1]["transcripts"][0]["sent"] = "A corrected first phrase about the spot healing brush."
    write_videos(folder, videos)
    assert ranges(evaluate(defs, "nightly_reingest", instance)) == [("9002", "9002", CHANGED_REASON)]

    monkeypatch.setenv("PSTUTS_REINGEST_ALL", "1")
    assert ranges(evaluate(defs, "nightly_reingest", instance)) == [("9001", "9003", FORCED_REASON)]
    monkeypatch.delenv("PSTUTS_REINGEST_ALL")

    # Other chunking settings change every video's fingerprint: one run for all three.
    retuned = build_definitions({**resources, "chunker": ChunkerResource(max_chunk_tokens=96)})
    assert [r[:2] for r in ranges(evaluate(retuned, "nightly_reingest", instance))] == [("9001", "9003")]

    # A new video is registered by the schedule itself and joins the range; a removed one goes to the removal job.
    write_videos(folder, videos[1:] + [{**videos[2], "video_id": 9004}])
    assert [r[:2] for r in ranges(evaluate(defs, "nightly_reingest", instance))] == [("9002", "9002"), ("9004", "9004")]
    assert "9004" in instance.get_dynamic_partitions(video_partitions.name)
    [removal] = evaluate(defs, "nightly_removal", instance)
    assert removal.job_name == "remove_videos" and removal.tags["pstuts/reason"] == REMOVED_REASON

    # Running what the schedules asked for brings Qdrant up to date, so the next ticks have nothing to do.
    for name in ("nightly_removal", "nightly_reingest"):
        for request in evaluate(defs, name, instance):
            assert execute_request(defs, instance, request).success
            run = instance.get_runs(limit=1)[0]
            assert run.tags["pstuts/trigger"] == "schedule"
    assert isinstance(evaluate(defs, "nightly_reingest", instance), dg.SkipReason)
    assert isinstance(evaluate(defs, "nightly_removal", instance), dg.SkipReason)
    assert "9001" not in instance.get_dynamic_partitions(video_partitions.name)


def test_cron_and_timezone_come_from_the_environment():
    code = (
        "from pstuts_pipeline.definitions import defs; s = defs().resolve_schedule_def('nightly_removal'); "
        "print(s.cron_schedule, s.execution_timezone)"
    )
    env = {**os.environ, "PSTUTS_REINGEST_CRON": "30 1 * * 0", "PSTUTS_REINGEST_TIMEZONE": "Europe/Berlin"}
    configured = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert configured.returncode == 0, configured.stderr
    assert configured.stdout.strip().splitlines()[-1].split() == ["30", "1", "*", "*", "0", "Europe/Berlin"]
    schedule = build_definitions().resolve_schedule_def("nightly_reingest")
    assert schedule.cron_schedule == os.environ.get("PSTUTS_REINGEST_CRON", "0 3 * * *")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_assets_that_call_services_retry_transient_errors_with_backoff():
    defs = build_definitions()
    for name in ("kamradt_chunks", "qdrant_collection"):
        policy = defs.resolve_assets_def(name).op.retry_policy
        assert policy is not None, f"{name} has no RetryPolicy"
        assert policy.max_retries >= 2 and policy.delay and policy.delay > 0
        assert policy.backoff == dg.Backoff.EXPONENTIAL and policy.jitter == dg.Jitter.PLUS_MINUS
    # A bad transcript is not transient: retrying it would only repeat the same error.
    assert defs.resolve_assets_def("raw_transcripts").op.retry_policy is None
    assert defs.resolve_assets_def("qdrant_collection").op.pool == "qdrant_writes"
