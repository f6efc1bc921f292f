"""A sensor on the data folder: dropping, editing or deleting a file is enough to (re-)ingest."""

import json

import dagster as dg

from pstuts_pipeline.resources import TranscriptSource
from pstuts_pipeline.jobs import RemovedVideosConfig, ingest_videos_job, remove_videos_job
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.transcripts import load_catalog


def read_cursor(cursor: str | None) -> tuple[int, dict[str, str]]:
    """(tick number, content hash of every video already requested) from the sensor's cursor."""
    state = json.loads(cursor) if cursor else {}
    if "videos" not in state:  # the first cursor format held the hashes alone
        return 0, state
    return int(state["tick"]), state["videos"]


@dg.sensor(
    jobs=[ingest_videos_job, remove_videos_job],
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def transcript_folder_sensor(context: dg.SensorEvaluationContext, transcript_source: TranscriptSource) -> dg.SensorResult:
    """Registers new videos as partitions and requests runs for new or changed ones (content hash in the cursor)."""
    previous_tick, seen = read_cursor(context.cursor)
    tick = previous_tick + 1
    catalog = load_catalog(transcript_source.path())
    for error in catalog.errors:
        context.log.error(f"not ingested: {error}")
    current = {key: video.content_hash for key, video in catalog.videos.items()}
    known = set(context.instance.get_dynamic_partitions(video_partitions.name))
    new_keys = sorted(set(current) - known, key=int)
    changed = sorted((k for k, h in current.items() if seen.get(k) != h), key=int)
    # A video whose file is broken keeps its partition and its points until a good version replaces it; if
    # some input names no video at all, no missing video can be told apart from an unreadable one.
    held = {str(v) for v in catalog.bad_video_ids}
    if catalog.hides_videos:
        held |= set(seen) - set(current)
    removed = sorted(set(seen) - set(current) - held, key=int)
    # Run keys carry the tick so that a video edited back to an earlier version is ingested again.
    run_requests = [
        dg.RunRequest(
            run_key=f"{key}:{current[key]}:{tick}",
            job_name=ingest_videos_job.name,
            partition_key=key,
            tags={"pstuts/trigger": "sensor", "pstuts/reason": "new video" if key not in seen else "source changed"},
        )
        for key in changed
    ]
    if removed:
        run_requests.append(
            dg.RunRequest(
                run_key=f"remove:{','.join(removed)}:{tick}",
                job_name=remove_videos_job.name,
                run_config=dg.RunConfig(ops={"delete_video_points": RemovedVideosConfig(video_ids=[int(k) for k in removed])}),
                tags={"pstuts/trigger": "sensor", "pstuts/reason": "video removed from data folder"},
            )
        )
    partition_requests = []
    if new_keys:
        partition_requests.append(video_partitions.build_add_request(new_keys))
    if removed and any(k in known for k in removed):
        partition_requests.append(video_partitions.build_delete_request([k for k in removed if k in known]))
    videos = {k: h for k, h in seen.items() if k in held} | current
    skip = None
    if not run_requests:
        skip = "no new, changed or removed videos"
        if catalog.errors:
            skip += f"; not ingested: {'; '.join(str(e) for e in catalog.errors[:5])}"
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=partition_requests,
        cursor=json.dumps({"tick": tick if run_requests else previous_tick, "videos": videos}, sort_keys=True),
        skip_reason=skip,
    )
