"""Jobs: ingesting ranges of video partitions, and removing videos that left the data folder."""

import dagster as dg

from pstuts_pipeline.defs.assets import ingestion_assets
from pstuts_pipeline.defs.instance import RunTags
from pstuts_pipeline.defs.partitions import VIDEO_PARTITIONS
from pstuts_pipeline.defs.reconcile import INGEST_JOB_NAME, REMOVE_JOB_NAME
from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline.search import vectorstore

# Both jobs take the code location's executor (definitions.py: in-process unless PSTUTS_EXECUTOR=celery, so a run
# loads torch and the model once rather than once per step; deploy/celery passes the Celery one).
ingest_videos_job = dg.define_asset_job(
    INGEST_JOB_NAME,
    selection=dg.AssetSelection.assets(*ingestion_assets),
    description="Materialize the six ingestion assets for a range of videos.",
)


class RemovedVideosConfig(dg.Config):
    video_ids: list[int]


@dg.op
def delete_video_points(
    context: dg.OpExecutionContext,
    config: RemovedVideosConfig,
    qdrant: QdrantResource,
    run_tags: RunTags,  # its setup tags the run with its process (reclaimed if killed) and why it runs
) -> None:
    """Delete the points and the partitions of videos that are no longer in the data folder."""
    known = set(context.instance.get_dynamic_partitions(VIDEO_PARTITIONS))
    removed: dict[int, int] = {}
    with qdrant.get_store() as store:
        for video_id in config.video_ids:
            removed[video_id] = vectorstore.delete_video(store, video_id)
            context.log.info(f"video {video_id}: removed {removed[video_id]} points from {qdrant.collection}")
        points = store.count() if store.exists() else 0
    # The collection's page in the UI shows this beside the last ingest's figures: the true count after a removal.
    context.log_event(
        dg.AssetObservation(
            asset_key=dg.AssetKey("qdrant_collection"),
            metadata={
                "collection_points": points,
                "videos_removed": dg.MetadataValue.json(sorted(config.video_ids)),
                "points_removed": sum(removed.values()),
            },
        )
    )
    for video_id in config.video_ids:
        if str(video_id) in known:
            context.instance.delete_dynamic_partition(VIDEO_PARTITIONS, str(video_id))


@dg.job(
    name=REMOVE_JOB_NAME,
    description="Remove the points and partitions of videos that were deleted from the data folder.",
)
def remove_videos_job() -> None:
    delete_video_points()
