"""Scheduled re-ingestion: nightly by default, only what changed unless a full rebuild is asked for."""

import os

import dagster as dg

from pstuts_pipeline.jobs import ingest_videos_job
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.ingest import plan_against_store
from pstuts_pipeline.resources import ChunkingResource, EmbeddingsResource, QdrantResource, TranscriptSource

REINGEST_CRON = os.environ.get("PSTUTS_REINGEST_CRON", "0 3 * * *")
REINGEST_TIMEZONE = os.environ.get("PSTUTS_REINGEST_TIMEZONE", "UTC")
FULL_REASON = "full re-ingest requested (PSTUTS_REINGEST_ALL=1, e.g. a new embedding model)"
CHANGED_REASON = "new video, or its source, embedding model or chunking settings differ from what Qdrant holds"


@dg.schedule(
    job=ingest_videos_job,
    cron_schedule=REINGEST_CRON,
    execution_timezone=REINGEST_TIMEZONE,
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
def nightly_reingest(
    context: dg.ScheduleEvaluationContext,
    transcript_source: TranscriptSource,
    embeddings: EmbeddingsResource,
    chunking_settings: ChunkingResource,
    qdrant: QdrantResource,
) -> list[dg.RunRequest] | dg.SkipReason:
    """Re-ingest videos whose source, model or settings changed; all of them when PSTUTS_REINGEST_ALL=1."""
    force = os.environ.get("PSTUTS_REINGEST_ALL", "") == "1"
    _, plan = plan_against_store(transcript_source, embeddings, chunking_settings, qdrant, force=force)
    for key, error in plan.failed.items():
        context.log.error(f"not ingested: {error}")
    if not plan.to_ingest:
        return dg.SkipReason(f"{len(plan.unchanged)} videos unchanged; nothing to re-ingest")
    known = set(context.instance.get_dynamic_partitions(video_partitions.name))
    unregistered = [k for k in plan.to_ingest if k not in known]
    if unregistered:
        context.log.warning(f"videos {unregistered} are not partitions yet; the folder sensor registers them")
    reason = FULL_REASON if force else CHANGED_REASON
    return [
        dg.RunRequest(
            run_key=f"{context.scheduled_execution_time}:{key}",
            partition_key=key,
            tags={"pstuts/trigger": "schedule", "pstuts/reason": reason},
        )
        for key in plan.to_ingest
        if key in known
    ] or dg.SkipReason("every video to re-ingest still waits for the sensor to register it")
