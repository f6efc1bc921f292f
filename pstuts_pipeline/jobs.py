"""Jobs: ingesting video partitions, and removing videos that left the data folder; both run in one process."""

import dagster as dg

from pstuts_pipeline import vectorstore
from pstuts_pipeline.assets import ingestion_assets
from pstuts_pipeline.instance import record_run_process
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.reconcile import INGEST_JOB_NAME, REMOVE_JOB_NAME
from pstuts_pipeline.resources import QdrantResource

# Every step in the run's own process: torch, the project and the model load once per run, not once per step
# (each step of the multiprocess executor is a fresh interpreter), and the steps run one after another anyway.
ingest_videos_job = dg.define_asset_job(
    INGEST_JOB_NAME,
    selection=dg.AssetSelection.assets(*ingestion_assets),
    partitions_def=video_partitions,
    executor_def=dg.in_process_executor,
    description="Materialize the six ingestion assets for a range of videos, in one process.",
)


class RemovedVideosConfig(dg.Config):
    video_ids: list[int]


@dg.op
def delete_video_points(context: dg.OpExecutionContext, config: RemovedVideosConfig, qdrant: QdrantResource) -> None:
    """Delete the points and the partitions of videos that are no longer in the data folder."""
    record_run_process(context)
    known = set(context.instance.get_dynamic_partitions(video_partitions.name))
    with qdrant.get_client() as client:
        for video_id in config.video_ids:
            removed = vectorstore.delete_video(client, qdrant.collection, video_id)
            context.log.info(f"video {video_id}: removed {removed} points from {qdrant.collection}")
    for video_id in config.video_ids:
        if str(video_id) in known:
            context.instance.delete_dynamic_partition(video_partitions.name, str(video_id))


@dg.job(name=REMOVE_JOB_NAME, executor_def=dg.in_process_executor,
        description="Remove the points and partitions of videos that were deleted from the data folder.")
def remove_videos_job() -> None:
    delete_video_points()
