"""A sensor on the data folder: dropping, editing or deleting a file is enough to (re-)ingest."""

import json

import dagster as dg

from pstuts_pipeline.assets.ingestion import TranscriptSource
from pstuts_pipeline.jobs import RemovedVideosConfig, ingest_videos_job, remove_videos_job
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.transcripts import load_catalog


@dg.sensor(
    jobs=[ingest_videos_job, remove_videos_job],
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def transcript_folder_sensor(context: dg.SensorEvaluationContext, transcript_source: TranscriptSource) -> dg.SensorResult:
    """Registers new videos as partitions and requests runs for new or changed ones (content hash in the cursor)."""
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    catalog = load_catalog(transcript_source.path())
    for error in catalog.errors:
        context.log.error(f"not ingested: {error}")
    current = {key: video.content_hash for key, video in catalog.videos.items()}
    known = set(context.instance.get_dynamic_partitions(video_partitions.name))
    new_keys = sorted(set(current) - known, key=int)
    changed = sorted((k for k, h in current.items() if seen.get(k) != h), key=int)
    # A video whose file is broken keeps its partition and its points until a good version replaces it.
    bad_keys = {str(v) for v in catalog.bad_video_ids}
    removed = sorted(set(seen) - set(current) - bad_keys, key=int)
    run_requests = [
        dg.RunRequest(
            run_key=f"{key}:{current[key]}",
            job_name=ingest_videos_job.name,
            partition_key=key,
            tags={"pstuts/trigger": "sensor", "pstuts/reason": "new video" if key not in seen else "source changed"},
        )
        for key in changed
    ]
    if removed:
        run_requests.append(
            dg.RunRequest(
                run_key=f"remove:{','.join(removed)}:{len(seen)}",
                job_name=remove_videos_job.name,
                run_config=dg.RunConfig(ops={"delete_video_points": RemovedVideosConfig(video_ids=[int(k) for k in removed])}),
                tags={"pstuts/trigger": "sensor", "pstuts/reason": "video removed from data folder"},
            )
        )
    partition_requests = []
    if new_keys:
        partition_requests.append(video_partitions.build_add_request(new_keys))
    if removed:
        partition_requests.append(video_partitions.build_delete_request([k for k in removed if k in known]))
    cursor = {k: h for k, h in seen.items() if k in bad_keys} | current
    skip = None
    if not run_requests:
        skip = "no new, changed or removed videos" + (f"; {len(catalog.errors)} input errors" if catalog.errors else "")
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=partition_requests,
        cursor=json.dumps(cursor, sort_keys=True),
        skip_reason=skip,
    )
