"""The nightly re-ingest schedule: only changed videos, all of them on request, tags that say why, a configurable cron."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.ingest import ingest
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.resources import (
    ChunkingResource,
    EmbeddingsResource,
    QdrantResource,
    RerankerResource,
    TranscriptSource,
)
from pstuts_pipeline.schedules import CHANGED_REASON, FULL_REASON, nightly_reingest

from conftest import SAMPLE_DIR

TICK = datetime(2026, 3, 1, 3, 0, tzinfo=timezone.utc)


def write_videos(folder: Path, videos: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "videos.json").write_text(json.dumps(videos, indent=1), encoding="utf-8")


def evaluate(instance: dg.DagsterInstance, resources: dict) -> list[dg.RunRequest] | dg.SkipReason:
    context = dg.build_schedule_context(instance=instance, resources=resources, scheduled_execution_time=TICK)
    return nightly_reingest(context)


def requested(result: list[dg.RunRequest] | dg.SkipReason) -> dict[str, dict[str, str]]:
    assert not isinstance(result, dg.SkipReason), result.skip_message
    return {r.partition_key: r.tags for r in result}


@pytest.mark.slow
def test_schedule_requests_changed_videos_only_and_all_on_request(storage, tmp_path, monkeypatch):
    videos = json.loads((SAMPLE_DIR / "sample_videos.json").read_text())
    folder = tmp_path / "data"
    write_videos(folder, videos)
    resources = {
        "transcript_source": TranscriptSource(data_dir=str(folder)),
        "embeddings": EmbeddingsResource(),
        "chunking_settings": ChunkingResource(),
        "qdrant": QdrantResource(path=str(storage / "qdrant")),
        "reranker": RerankerResource(),
    }
    defs = build_definitions(resources)
    instance = dg.DagsterInstance.get()
    assert ingest(defs, instance).ok

    unchanged = evaluate(instance, resources)
    assert isinstance(unchanged, dg.SkipReason) and "3 videos unchanged" in unchanged.skip_message

    videos[1]["transcripts"][0]["sent"] = "A corrected first phrase about the spot healing brush."
    write_videos(folder, videos)
    changed = requested(evaluate(instance, resources))
    assert list(changed) == ["9002"]
    assert changed["9002"] == {"pstuts/trigger": "schedule", "pstuts/reason": CHANGED_REASON}

    monkeypatch.setenv("PSTUTS_REINGEST_ALL", "1")
    everything = requested(evaluate(instance, resources))
    assert sorted(everything) == ["9001", "9002", "9003"]
    assert {tags["pstuts/reason"] for tags in everything.values()} == {FULL_REASON}
    monkeypatch.delenv("PSTUTS_REINGEST_ALL")

    # Other chunking settings change every video's fingerprint.
    retuned = {**resources, "chunking_settings": ChunkingResource(max_chunk_tokens=96)}
    assert sorted(requested(evaluate(instance, retuned))) == ["9001", "9002", "9003"]

    # A new video waits until the folder sensor has registered it as a partition.
    write_videos(folder, videos + [{**videos[2], "video_id": 9004}])
    assert list(requested(evaluate(instance, resources))) == ["9002"]
    instance.add_dynamic_partitions(video_partitions.name, ["9004"])
    assert list(requested(evaluate(instance, resources))) == ["9002", "9004"]

    # Running what the schedule asked for brings Qdrant up to date, so the next tick has nothing to do.
    job = defs.resolve_job_def("ingest_videos")
    for request in evaluate(instance, resources):
        result = job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags)
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run.tags["pstuts/trigger"] == "schedule" and run.tags["pstuts/reason"] == CHANGED_REASON
    after = evaluate(instance, resources)
    assert isinstance(after, dg.SkipReason) and "4 videos unchanged" in after.skip_message


def test_cron_and_timezone_come_from_the_environment():
    code = "from pstuts_pipeline.schedules import nightly_reingest as s; print(s.cron_schedule, s.execution_timezone)"
    env = {**os.environ, "PSTUTS_REINGEST_CRON": "30 1 * * 0", "PSTUTS_REINGEST_TIMEZONE": "Europe/Berlin"}
    configured = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert configured.returncode == 0, configured.stderr
    assert configured.stdout.strip().splitlines()[-1].split() == ["30", "1", "*", "*", "0", "Europe/Berlin"]
    assert nightly_reingest.cron_schedule == os.environ.get("PSTUTS_REINGEST_CRON", "0 3 * * *")
    assert nightly_reingest.default_status == dg.DefaultScheduleStatus.STOPPED


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
