"""`pstuts ingest`: register every video as a partition and materialize what changed, in as few runs as possible."""

import os
import time
from dataclasses import dataclass, field

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from pstuts_pipeline import vectorstore
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.planning import IngestPlan, contiguous_ranges, plan_ingest
from pstuts_pipeline.resources import ChunkingResource, EmbeddingsResource, QdrantResource, TranscriptSource
from pstuts_pipeline.settings import dagster_home
from pstuts_pipeline.transcripts import Catalog, load_catalog

DEFAULT_INSTANCE_YAML = """\
# Written by `pstuts ingest` for its default instance. Local-mode Qdrant admits one writer at a time.
concurrency:
  pools:
    granularity: op
    default_limit: 1
telemetry:
  enabled: false
"""


@dataclass
class IngestReport:
    """What an ingest did, for the summary and the exit code."""

    plan: IngestPlan
    run_ids: list[str] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)
    chunks: int = 0
    points_in_collection: int = 0
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.plan.failed and not self.failed_runs


def instance_for_cli() -> dg.DagsterInstance:
    """The instance in DAGSTER_HOME, or the project's own one, created with sane defaults on first use."""
    home = dagster_home()
    if not os.environ.get("DAGSTER_HOME"):
        os.environ["DAGSTER_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DEFAULT_INSTANCE_YAML)
    return dg.DagsterInstance.get()


def register_partitions(instance: dg.DagsterInstance, keys: list[str], removed: list[str]) -> list[str]:
    """Add the videos' partitions (in id order, so a first ingest is one contiguous range) and drop removed ones."""
    known = instance.get_dynamic_partitions(video_partitions.name)
    new = [k for k in sorted(keys, key=int) if k not in known]
    if new:
        instance.add_dynamic_partitions(video_partitions.name, new)
    for key in removed:
        if key in known:
            instance.delete_dynamic_partition(video_partitions.name, key)
    return instance.get_dynamic_partitions(video_partitions.name)


def plan_against_store(
    source: TranscriptSource,
    embeddings: EmbeddingsResource,
    chunking_settings: ChunkingResource,
    qdrant: QdrantResource,
    only: list[str] | None = None,
    force: bool = False,
) -> tuple[Catalog, IngestPlan]:
    """Read the data folder and decide, from the fingerprints stored in Qdrant, what must be (re-)ingested."""
    catalog = load_catalog(source.path())
    settings = chunking_settings.settings(embeddings.window()[0])
    with qdrant.get_client() as client:
        stored = vectorstore.stored_fingerprints(client, qdrant.collection)
    plan = plan_ingest(
        catalog,
        stored,
        lambda v: vectorstore.build_fingerprint(v.content_hash, embeddings.model_id, settings),
        only=only,
        force=force,
    )
    return catalog, plan


def ingest(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    only: list[str] | None = None,
    force: bool = False,
    on_progress=lambda message: None,
) -> IngestReport:
    """Plan against what Qdrant holds, then materialize the changed videos in one run per contiguous range."""
    started = time.perf_counter()
    resources = defs.resources
    source, embeddings, chunking_settings, qdrant = (
        resources["transcript_source"],
        resources["embeddings"],
        resources["chunking_settings"],
        resources["qdrant"],
    )
    on_progress(f"checking the data folder against {qdrant.collection}")
    catalog, plan = plan_against_store(source, embeddings, chunking_settings, qdrant, only=only, force=force)
    if plan.removed:
        with qdrant.get_client() as client:
            for key in plan.removed:
                vectorstore.delete_video(client, qdrant.collection, int(key))
    order = register_partitions(instance, list(catalog.videos), plan.removed)
    report = IngestReport(plan)
    job = defs.resolve_job_def("ingest_videos")
    for first, last in contiguous_ranges(plan.to_ingest, order):
        count = order.index(last) - order.index(first) + 1
        on_progress(f"materializing {count} videos ({first}..{last})")
        result = job.execute_in_process(
            instance=instance,
            tags={
                ASSET_PARTITION_RANGE_START_TAG: first,
                ASSET_PARTITION_RANGE_END_TAG: last,
                "pstuts/trigger": "cli",
                "pstuts/reason": "forced re-ingest" if force else "new or changed videos",
            },
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            raise_on_error=False,
        )
        report.run_ids.append(result.run_id)
        if not result.success:
            report.failed_runs.append(f"{first}..{last} (run {result.run_id})")
            continue
        for stats in instance.get_run_step_stats(result.run_id):
            if stats.end_time and stats.start_time:
                report.step_seconds[stats.step_key] = round(
                    report.step_seconds.get(stats.step_key, 0) + stats.end_time - stats.start_time, 2
                )
        # Every partition of a single-run step carries the run's totals: read them once.
        events = result.asset_materializations_for_node("timestamped_chunks")
        report.chunks += int(events[0].metadata["chunks"].value) if events else 0
    with qdrant.get_client() as client:
        if client.collection_exists(qdrant.collection):
            report.points_in_collection = client.count(qdrant.collection, exact=True).count
    report.seconds = round(time.perf_counter() - started, 2)
    return report
