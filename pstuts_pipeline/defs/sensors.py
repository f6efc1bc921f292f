"""A sensor on the data folder: dropping, editing or deleting a file is enough to (re-)ingest or remove videos."""

import json

import dagster as dg

from pstuts_pipeline.defs.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.reconcile import plan_tick, tick_signature
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource, TranscriptSource
from pstuts_pipeline.settings import OperationsSettings
from pstuts_pipeline.settings.base import default


def build_folder_sensor(interval_s: int = default(OperationsSettings, "sensor_interval_s")) -> dg.SensorDefinition:
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
    ) -> dg.SensorResult | dg.SkipReason:
        """Reconciles the folder with Qdrant: batched range runs for new or changed videos, one removal run.

        Its cursor keeps the signature of a tick that found nothing to do and what it said: while the folder, the
        collection and the settings keep that signature, a tick answers from it without reading a file or Qdrant.
        """
        signature = tick_signature(context.instance, transcript_source, embeddings, chunker, qdrant)
        last = json.loads(context.cursor) if context.cursor else {}
        last = last if isinstance(last, dict) else {}  # a cursor of an older version: start afresh
        if last.get("signature") == signature:
            return dg.SkipReason(f"unchanged since the last look: {last['said']}")
        plan = plan_tick(context.instance, transcript_source, embeddings, chunker, qdrant, trigger="sensor")
        for line in plan.warnings:
            context.log.warning(line)
        additions = [video_partitions.build_add_request(plan.new_partitions)] if plan.new_partitions else []
        said = plan.skip_reason if not additions else None
        events, refused = refused_files_events(last.get("refused"), plan.refused, str(transcript_source.path()))
        state = {"refused": refused, **({"signature": signature, "said": said} if plan.settled else {})}
        return dg.SensorResult(
            run_requests=plan.run_requests,
            dynamic_partitions_requests=additions,
            skip_reason=said,
            asset_events=events,
            cursor=json.dumps(state),
        )

    return transcript_folder_sensor


def refused_files_events(
    last: list[str] | None, refused: list[str] | None, folder: str
) -> tuple[list[dg.AssetObservation], list[str] | None]:
    """An observation of raw_transcripts naming the refused files, videos and fields, each time that list changes.

    The UI shows it on the asset's page (and the tick's log has the same lines); an empty list says they are fixed.
    The cursor keeps the last list, so an unchanged folder logs nothing new.
    """
    if refused is None or refused == last:
        return [], last
    if last is None and not refused:
        return [], refused
    metadata = {
        "refused_videos": dg.MetadataValue.int(sum(line.startswith("not ingested: ") for line in refused)),
        "errors": dg.MetadataValue.json(refused),  # data, not markdown: the lines quote the files
        "data_folder": dg.MetadataValue.path(folder),
    }
    return [dg.AssetObservation(asset_key=dg.AssetKey("raw_transcripts"), metadata=metadata)], refused
