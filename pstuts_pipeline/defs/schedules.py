"""Scheduled reconcile: the folder sensor's policy on a clock, and a full re-ingest when asked for.

A Dagster schedule launches one job, so the policy's two kinds of run are two schedules on the same cron:
`nightly_reingest` (ingest ranges) and `nightly_removal` (the removal job). Both are off by default.
"""

import dagster as dg

from pstuts_pipeline.defs.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.defs.partitions import VIDEO_PARTITIONS
from pstuts_pipeline.defs.reconcile import plan_tick
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource, TranscriptSource
from pstuts_pipeline.settings import OperationsSettings, load
from pstuts_pipeline.settings.base import default


def build_reconcile_schedule(name: str, job_name: str, cron: str, timezone: str) -> dg.ScheduleDefinition:
    """A schedule that reconciles the folder with Qdrant and requests the runs of its one job."""

    @dg.schedule(
        name=name,
        job_name=job_name,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
    def reconcile_on_schedule(
        context: dg.ScheduleEvaluationContext,
        transcript_source: TranscriptSource,
        embeddings: EmbeddingsResource,
        chunker: ChunkerResource,
        qdrant: QdrantResource,
    ) -> list[dg.RunRequest] | dg.SkipReason:
        """Reconcile as the sensor does; every video when PSTUTS_REINGEST_ALL=1."""
        plan = plan_tick(
            context.instance,
            transcript_source,
            embeddings,
            chunker,
            qdrant,
            trigger="schedule",
            force=load(OperationsSettings).reingest_all,
            salt=str(context.scheduled_execution_time),
            busy_jobs={job_name},
        )
        for line in plan.warnings:
            context.log.warning(line)
        if plan.new_partitions:  # a schedule cannot return partition requests: register them directly
            context.instance.add_dynamic_partitions(VIDEO_PARTITIONS, plan.new_partitions)
        mine = [r for r in plan.run_requests if r.job_name == job_name]
        return mine or dg.SkipReason(plan.skip_reason or f"nothing for {job_name} to do")

    return reconcile_on_schedule


def build_schedules(
    cron: str = default(OperationsSettings, "reingest_cron"),
    timezone: str = default(OperationsSettings, "reingest_timezone"),
) -> list[dg.ScheduleDefinition]:
    """The nightly schedules, for a cron and timezone that `definitions.py` reads from the environment."""
    return [
        build_reconcile_schedule("nightly_reingest", ingest_videos_job.name, cron, timezone),
        build_reconcile_schedule("nightly_removal", remove_videos_job.name, cron, timezone),
    ]
