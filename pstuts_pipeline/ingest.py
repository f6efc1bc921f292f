"""`pstuts ingest`: register every video as a partition and materialize what changed, in as few runs as possible."""

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from pstuts_pipeline import ledger as ledgers
from pstuts_pipeline.fingerprints import build_fingerprint
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.planning import IngestPlan, contiguous_ranges, plan_ingest
from pstuts_pipeline.resources import ChunkingResource, EmbeddingsResource, QdrantResource, TranscriptSource
from pstuts_pipeline.settings import dagster_home, max_videos_per_run
from pstuts_pipeline.sqlite_sync import batched_sqlite_syncs
from pstuts_pipeline.transcripts import Catalog, SourceVideo, load_catalog

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
    dagster_home: str = ""
    # True when the ledger showed nothing to do, so neither Qdrant nor the Dagster instance was opened.
    from_ledger: bool = False

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


def run_ranges(ranges: list[tuple[str, str]], order: list[str], limit: int) -> list[tuple[str, str]]:
    """The ranges cut into runs of at most `limit` partitions, so a run's memory does not grow with the corpus."""
    runs = []
    for first, last in ranges:
        keys = order[order.index(first) : order.index(last) + 1]
        runs += [(part[0], part[-1]) for part in (keys[i : i + limit] for i in range(0, len(keys), limit))]
    return runs


def fingerprint_function(
    embeddings: EmbeddingsResource, chunking_settings: ChunkingResource
) -> Callable[[SourceVideo], str]:
    """How a video's fingerprint is computed now, to compare with the one stored beside its points."""
    settings = chunking_settings.settings(embeddings.window()[0])
    model_id = embeddings.model_id
    return lambda video: build_fingerprint(video.content_hash, model_id, settings)


def read_store(qdrant: QdrantResource) -> tuple[dict[int, set[str]], int]:
    """The fingerprints stored per video, and the collection's point count."""
    from pstuts_pipeline import vectorstore

    with qdrant.get_client() as client:
        stored = vectorstore.stored_fingerprints(client, qdrant.collection)
        points = client.count(qdrant.collection, exact=True).count if client.collection_exists(qdrant.collection) else 0
    return stored, points


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
    stored, _ = read_store(qdrant)
    fingerprint_of = fingerprint_function(embeddings, chunking_settings)
    return catalog, plan_ingest(catalog, stored, fingerprint_of, only=only, force=force)


@dataclass
class StoreView:
    """What Qdrant and the instance held at one moment, with the stamps of their files if it was a quiet one."""

    stored: dict[int, set[str]]
    points: int
    partitions: list[str]
    stamps: dict[str, ledgers.Stamp] | None


def observe(instance: dg.DagsterInstance, qdrant: QdrantResource) -> StoreView:
    """The stored fingerprints and the registered partitions: from a current ledger, else read with stamps."""
    watched = None
    if not qdrant.url and not instance.is_ephemeral:
        home = Path(instance.root_directory)
        ledger = ledgers.read_ledger(qdrant.local_path, qdrant.collection, home)
        if ledger is not None:  # spares loading the whole local collection once more
            return StoreView(ledger.stored(), ledger.points, ledger.partitions, ledger.stamps)
        watched = ledgers.watched_files(qdrant.local_path, qdrant.collection, home)
    before = ledgers.stamps(watched) if watched else None
    stored, points = read_store(qdrant)
    partitions = instance.get_dynamic_partitions(video_partitions.name)
    after = ledgers.stamps(watched) if watched else None
    # Someone wrote while we read: what we read may be neither the old nor the new state, so stamp nothing.
    return StoreView(stored, points, list(partitions), after if after == before else None)


def keep_in_ledger(instance: dg.DagsterInstance, qdrant: QdrantResource, view: StoreView) -> None:
    """Write what was observed to the ledger, so the next ingest with nothing to do can skip both stores."""
    if view.stamps is None:
        return
    home = Path(instance.root_directory)
    ledgers.write_ledger(
        home,
        ledgers.Ledger(
            key=ledgers.ledger_key(qdrant.local_path, qdrant.collection, home),
            stamps=view.stamps,
            partitions=view.partitions,
            fingerprints={str(video): sorted(prints) for video, prints in view.stored.items()},
            points=view.points,
        ),
    )


def unchanged_report(resources: Mapping[str, object], only: list[str] | None = None) -> IngestReport | None:
    """The report of an ingest with nothing to do, decided from the ledger; None when there is work or no proof.

    Needs neither Qdrant nor the Dagster instance (nor their imports), which is most of a no-op ingest's time.
    """
    started = time.perf_counter()
    source, embeddings, chunking_settings, qdrant = (
        resources["transcript_source"],
        resources["embeddings"],
        resources["chunking_settings"],
        resources["qdrant"],
    )
    if qdrant.url:
        return None
    home = dagster_home()
    ledger = ledgers.read_ledger(qdrant.local_path, qdrant.collection, home)
    if ledger is None:
        return None
    catalog = load_catalog(source.path())
    plan = plan_ingest(catalog, ledger.stored(), fingerprint_function(embeddings, chunking_settings), only=only)
    if plan.to_ingest or plan.removed or not set(catalog.videos) <= set(ledger.partitions):
        return None
    return IngestReport(
        plan,
        points_in_collection=ledger.points,
        seconds=round(time.perf_counter() - started, 2),
        dagster_home=str(home),
        from_ledger=True,
    )


def step_errors(result: dg.ExecuteInProcessResult) -> list[str]:
    """Each failed step with the innermost error's first line, so the summary says why without opening the UI."""
    errors = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            message = error.message.strip().splitlines()[0] if error.message.strip() else error.cls_name
            errors.append(f"{event.step_key}: {message}")
    return errors


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
    view = observe(instance, qdrant)
    catalog = load_catalog(source.path())
    fingerprint_of = fingerprint_function(embeddings, chunking_settings)
    plan = plan_ingest(catalog, view.stored, fingerprint_of, only=only, force=force)
    if plan.removed:
        from pstuts_pipeline import vectorstore

        with qdrant.get_client() as client:
            for key in plan.removed:
                vectorstore.delete_video(client, qdrant.collection, int(key))
    order = register_partitions(instance, list(catalog.videos), plan.removed)
    report = IngestReport(plan, dagster_home=str(instance.root_directory))
    job = defs.resolve_job_def("ingest_videos")
    for first, last in run_ranges(contiguous_ranges(plan.to_ingest, order), order, max_videos_per_run()):
        count = order.index(last) - order.index(first) + 1
        on_progress(f"materializing {count} videos ({first}..{last})")
        with batched_sqlite_syncs():
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
            errors = "; ".join(step_errors(result)) or "no step failed: see the run's logs"
            report.failed_runs.append(f"{first}..{last} (run {result.run_id}): {errors}")
            continue
        for stats in instance.get_run_step_stats(result.run_id):
            if stats.end_time and stats.start_time:
                report.step_seconds[stats.step_key] = round(
                    report.step_seconds.get(stats.step_key, 0) + stats.end_time - stats.start_time, 2
                )
        # Every partition of a single-run step carries the run's totals: read them once.
        events = result.asset_materializations_for_node("timestamped_chunks")
        report.chunks += int(events[0].metadata["chunks"].value) if events else 0
    if plan.removed or report.run_ids or order != view.partitions:
        view = observe(instance, qdrant)
    keep_in_ledger(instance, qdrant, view)
    report.points_in_collection = view.points
    report.seconds = round(time.perf_counter() - started, 2)
    return report
