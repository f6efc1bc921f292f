"""A sensor on the data folder: dropping, editing or deleting a file is enough to (re-)ingest or remove videos."""

import dagster as dg

from pstuts_pipeline.defs.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.reconcile import plan_tick
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource, TranscriptSource
from pstuts_pipeline.settings import DEFAULT_SENSOR_INTERVAL_S


def build_folder_sensor(interval_s: int = DEFAULT_SENSOR_INTERVAL_S) -> dg.SensorDefinition:
    """The folder sensor, looking every `interval_s` seconds (`definitions.py` reads it from the environment)."""

    @dg.sensor(
        jobs=[ingest_videos_job, remove_videos_job],
        minimum_interval_seconds=interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def transcript_folder_sensor(
        context: dg.SensorEvaluationContext,
        transcript_source: TranscriptSource,
        embeddings: EmbeddingsResource,
        chunker: ChunkerResource,
        qdrant: QdrantResource,
    ) -> dg.SensorResult:
        """Reconciles the folder with Qdrant: batched range runs for new or changed videos, one removal run."""
        plan = plan_tick(context.instance, transcript_source, embeddings, chunker, qdrant, trigger="sensor")
        for line in plan.warnings:
            context.log.warning(line)
        additions = [video_partitions.build_add_request(plan.new_partitions)] if plan.new_partitions else []
        return dg.SensorResult(
            run_requests=plan.run_requests,
            dynamic_partitions_requests=additions,
            skip_reason=plan.skip_reason if not additions else None,
        )

    return transcript_folder_sensor
