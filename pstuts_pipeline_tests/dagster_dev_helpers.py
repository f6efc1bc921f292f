"""What the `pstuts dev` tests read back: the sensor's runs, their partition ranges and the stored videos."""

from benchmarks.dagster_dev_path import DagsterDev
from benchmarks.ingest_speed import Workspace
from pstuts_pipeline.defs.resources import QdrantResource


def stored(space: Workspace, collection: str = "pstuts_transcripts") -> dict[int, set[str]]:
    """Each stored video's titles, read from the local Qdrant folder under its lock (runs may be writing)."""
    found: dict[int, set[str]] = {}
    with QdrantResource(path=str(space.storage / "qdrant"), collection=collection).get_store() as store:
        points, _ = store.scroll(limit=10_000, with_payload=True)
    for point in points:
        meta = point.payload["metadata"]
        found.setdefault(meta["video_id"], set()).add(meta["title"])
    return found


def ingest_runs(dev: DagsterDev, trigger: str = "sensor") -> list[dict]:
    """Ingest runs the sensor (or another trigger) requested, oldest first."""
    runs = [r for r in dev.runs() if r["jobName"] == "ingest_videos" and r["tags"].get("pstuts/trigger") == trigger]
    return sorted(runs, key=lambda r: r["startTime"] or 0)


def ranges(runs: list[dict]) -> list[tuple[str, str]]:
    """Each run's first and last partition."""
    return [
        (r["tags"]["dagster/asset_partition_range_start"], r["tags"]["dagster/asset_partition_range_end"]) for r in runs
    ]
