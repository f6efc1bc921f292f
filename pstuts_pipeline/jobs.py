"""Jobs: ingesting video partitions, and removing videos that left the data folder."""

import dagster as dg

from pstuts_pipeline import vectorstore
from pstuts_pipeline.assets import ingestion_assets
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.resources import QdrantResource

ingest_videos_job = dg.define_asset_job(
    "ingest_videos",
    selection=dg.AssetSelection.assets(*ingestion_assets),
    partitions_def=video_partitions,
    description="Materialize the six ingestion assets for the selected videos.",
)


class RemovedVideosConfig(dg.Config):
    video_ids: list[int]


@dg.op
def delete_video_points(context: dg.OpExecutionContext, config: RemovedVideosConfig, qdrant: QdrantResource) -> None:
    """Delete the points of videos that are no longer in the data folder."""
    with qdrant.get_client() as client:
        for video_id in config.video_ids:
            removed = vectorstore.delete_video(client, qdrant.collection, video_id)
            context.log.info(f"video {video_id}: removed {removed} points from {qdrant.collection}")


@dg.job(description="Remove the points of videos that were deleted from the data folder.")
def remove_videos_job() -> None:
    delete_video_points()
