"""A sensor on the data folder: dropping, editing or deleting a file is enough to (re-)ingest or remove videos."""

import json

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
        events, cursor = refused_files_events(context.cursor, plan.refused, str(transcript_source.path()))
        return dg.SensorResult(
            run_requests=plan.run_requests,
            dynamic_partitions_requests=additions,
            skip_reason=plan.skip_reason if not additions else None,
            asset_events=events,
            cursor=cursor,
        )

    return transcript_folder_sensor


def refused_files_events(
    cursor: str | None, refused: list[str] | None, folder: str
) -> tuple[list[dg.AssetObservation], str | None]:
    """An observation of raw_transcripts naming the refused files, videos and fields, each time that list changes.

    The UI shows it on the asset's page (and the tick's log has the same lines); an empty list says they are fixed.
    The cursor keeps the last list, so an unchanged folder logs nothing new.
    """
    if refused is None or (cursor is not None and json.loads(cursor) == refused):
        return [], cursor
    if cursor is None and not refused:
        return [], json.dumps(refused)
    metadata = {
        "refused_videos": dg.MetadataValue.int(sum(line.startswith("not ingested: ") for line in refused)),
        "errors": dg.MetadataValue.json(refused),  # data, not markdown: the lines quote the files
        "data_folder": dg.MetadataValue.path(folder),
    }
    return [dg.AssetObservation(asset_key=dg.AssetKey("raw_transcripts"), metadata=metadata)], json.dumps(refused)
