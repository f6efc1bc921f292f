"""The one reconcile policy (`sources.reconciliation`) as Dagster run requests.

`pstuts ingest`, the folder sensor and the schedule all call `reconcile` on the same inputs (the data folder,
the fingerprints stored beside the points, the model and chunk settings) and turn its answer into the same
Dagster run requests: ingest runs over bounded partition ranges, and one removal job.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
from filelock import Timeout

from pstuts_pipeline.defs.dagster_private import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pstuts_pipeline.defs.instance import REASON_TAG, TRIGGER_TAG, instance_home, reclaim_dead_runs
from pstuts_pipeline.defs.partitions import VIDEO_PARTITIONS
from pstuts_pipeline.defs.resources import (
    ChunkerResource,
    EmbeddingsResource,
    QdrantResource,
    TranscriptSource,
    fingerprint_function,
)
from pstuts_pipeline.redaction import strip_credentials
from pstuts_pipeline.search import fingerprints
from pstuts_pipeline.settings import source_limits
from pstuts_pipeline.sources import Catalog, source_files
from pstuts_pipeline.sources import ledger as ledgers
from pstuts_pipeline.sources.reconciliation import REMOVED_REASON, Reconciliation, reconcile_folder

INGEST_JOB_NAME = "ingest_videos"
REMOVE_JOB_NAME = "remove_videos"
# A tick does not wait long for a search or a CLI ingest that holds the local Qdrant folder.
TICK_LOCK_TIMEOUT_S = 10
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass(frozen=True)
class RunLimits:
    """How an ingest is cut into runs: what one run may hold, how many runs at least, and what each video weighs."""

    max_videos: int
    max_phrases: int | None = None
    min_runs: int = 1
    phrases: Mapping[str, int] = field(default_factory=dict)  # bound memory
    work: Mapping[str, int] = field(default_factory=dict)  # balanced between runs


def cut_ranges(selected: set[str], order: list[str], limits: RunLimits, most_work: int | None) -> list[tuple[str, str]]:
    """The fewest [first, last] ranges of consecutive selected keys within the limits, each filled before the next."""
    ranges: list[tuple[str, str]] = []
    current: list[str] = []
    phrases = work = 0
    for key in order:
        if key not in selected:
            if current:
                ranges.append((current[0], current[-1]))
            current, phrases, work = [], 0, 0
            continue
        weight, effort = limits.phrases.get(key, 0), limits.work.get(key, 0)
        fits = (
            len(current) < limits.max_videos
            and (limits.max_phrases is None or phrases + weight <= limits.max_phrases)
            and (most_work is None or work + effort <= most_work)
        )
        if current and not fits:
            ranges.append((current[0], current[-1]))
            current, phrases, work = [], 0, 0
        current.append(key)
        phrases, work = phrases + weight, work + effort
    if current:
        ranges.append((current[0], current[-1]))
    return ranges


def ingest_ranges(selected: list[str], order: list[str], limits: RunLimits) -> list[tuple[str, str]]:
    """Cover `selected` with [first, last] runs of consecutive keys in partition order: at most `max_videos` videos
    and `max_phrases` phrases each (a bigger video runs alone), as few runs as that allows but at least `min_runs`,
    cut where the heaviest run's work is least.

    One range is one Dagster run (the assets' single-run backfill policy), so the model loads once per range; the
    limits bound a run's memory, which grows with its phrases (their vectors are held until written). Runs of equal
    work end together when each has a worker of its own.
    """
    wanted = set(selected)
    fewest = cut_ranges(wanted, order, limits, None)
    runs = max(len(fewest), min(limits.min_runs, len(wanted)))
    if runs < 2 or not limits.work:
        return fewest
    low = max(limits.work.get(k, 0) for k in wanted)  # the least cap at which every video fits a run
    high = sum(limits.work.get(k, 0) for k in wanted)
    while low < high:  # the least cap that needs no more than `runs` runs
        middle = (low + high) // 2
        if len(cut_ranges(wanted, order, limits, middle)) <= runs:
            high = middle
        else:
            low = middle + 1
    return cut_ranges(wanted, order, limits, low)


@dataclass
class StoreView:
    """What Qdrant held at one moment (fingerprints per video, points), with its files' stamps if it was quiet."""

    stored: dict[int, set[str]]
    points: int
    stamps: dict[str, ledgers.Stamp] | None


def read_store(qdrant: QdrantResource, lock_timeout_s: float | None = None) -> tuple[dict[int, set[str]], int]:
    """The fingerprints stored per video, and the collection's point count."""
    from pstuts_pipeline.search import vectorstore

    with qdrant.get_store(lock_timeout_s=lock_timeout_s) as store:
        stored = vectorstore.stored_fingerprints(store)
        points = store.count()
    return stored, points


def observe_store(qdrant: QdrantResource, home: Path | None, lock_timeout_s: float | None = None) -> StoreView:
    """The stored fingerprints from a current ledger, else read from Qdrant (and stamped if nobody wrote meanwhile)."""
    watched = None
    if not qdrant.server_url and home is not None:
        ledger = ledgers.read_ledger(qdrant.local_path, qdrant.collection, home)
        if ledger is not None:  # spares loading the whole local collection once more
            return StoreView(ledger.stored(), ledger.points, ledger.stamps)
        watched = ledgers.qdrant_local_files(qdrant.local_path, qdrant.collection)
    before = ledgers.stamps(watched) if watched else None
    stored, points = read_store(qdrant, lock_timeout_s)
    after = ledgers.stamps(watched) if watched else None
    # Someone wrote while we read: what we read may be neither the old nor the new state, so stamp nothing.
    return StoreView(stored, points, after if after == before else None)


def keep_in_ledger(
    qdrant: QdrantResource,
    home: Path,
    view: StoreView,
    partitions: list[str] | None = None,
    partition_stamps: dict[str, ledgers.Stamp] | None = None,
    sources: dict[str, ledgers.Stamp] | None = None,
    settings: str = "",
) -> None:
    """Write what was observed to the ledger, so the next reconcile with nothing to do can skip Qdrant."""
    if view.stamps is None or qdrant.server_url:
        return
    ledgers.write_ledger(
        home,
        ledgers.Ledger(
            key=ledgers.ledger_key(qdrant.local_path, qdrant.collection, home),
            stamps=view.stamps,
            fingerprints={str(video): sorted(prints) for video, prints in view.stored.items()},
            points=view.points,
            partitions=partitions,
            partition_stamps=partition_stamps,
            sources=sources,
            settings=settings,
        ),
    )


def partition_order(known: Sequence[str], catalog: Catalog) -> tuple[list[str], list[str]]:
    """(partition keys after registering the catalog's new videos, the new ones), new ones in id order."""
    new = [k for k in sorted(catalog.videos, key=int) if k not in set(known)]
    return [*known, *new], new


RunKey = Callable[[str, list[str]], str]


def run_limits(result: Reconciliation) -> RunLimits:
    """The settings' limits on a run, with the weights of the videos this reconciliation ingests."""
    limits = source_limits()
    return RunLimits(
        limits.max_videos_per_run,
        limits.max_phrases_per_run,
        limits.min_runs_per_ingest,
        result.phrases,
        result.characters,
    )


def ingest_run_requests(
    result: Reconciliation, order: list[str], trigger: str, run_key: RunKey | None
) -> list[dg.RunRequest]:
    """One ingest run per bounded range of consecutive partitions, tagged with who asked and why."""
    requests = []
    for first, last in ingest_ranges(result.to_ingest, order, run_limits(result)):
        keys = order[order.index(first) : order.index(last) + 1]
        reasons = sorted({result.reasons[k] for k in keys})
        requests.append(
            dg.RunRequest(
                run_key=run_key("ingest", keys) if run_key else None,
                job_name=INGEST_JOB_NAME,
                tags={
                    ASSET_PARTITION_RANGE_START_TAG: first,
                    ASSET_PARTITION_RANGE_END_TAG: last,
                    TRIGGER_TAG: trigger,
                    REASON_TAG: "; ".join(reasons)[:200],
                    "pstuts/videos": str(len(keys)),
                },
            )
        )
    return requests


def removal_run_request(result: Reconciliation, trigger: str, run_key: RunKey | None) -> dg.RunRequest | None:
    """The removal job for videos that left the data folder, or None when none did."""
    if not result.removed:
        return None
    return dg.RunRequest(
        run_key=run_key("remove", result.removed) if run_key else None,
        job_name=REMOVE_JOB_NAME,
        run_config={"ops": {"delete_video_points": {"config": {"video_ids": [int(k) for k in result.removed]}}}},
        tags={TRIGGER_TAG: trigger, REASON_TAG: REMOVED_REASON},
    )


def run_requests(
    result: Reconciliation, order: list[str], trigger: str, run_key: RunKey | None = None
) -> list[dg.RunRequest]:
    """Everything a reconciliation asks of Dagster: the removal first, then the ingest ranges."""
    removal = removal_run_request(result, trigger, run_key)
    return [*([removal] if removal else []), *ingest_run_requests(result, order, trigger, run_key)]


def state_run_key(stored: dict[int, set[str]], wanted: dict[str, str], salt: str = "") -> RunKey:
    """Run keys from what a run would change (each video's stored and wanted fingerprints).

    The same request is launched once: a run that failed is not retried on every tick (fix the file, or
    re-materialize in the UI), while a video edited back to an earlier version is a new change and runs again.
    """

    def key(kind: str, videos: list[str]) -> str:
        state = [(v, sorted(stored.get(int(v), ())), wanted.get(v, "")) for v in videos]
        digest = hashlib.sha256(repr((salt, kind, state)).encode()).hexdigest()[:16]
        return f"{kind}:{videos[0]}..{videos[-1]}:{digest}"

    return key


@dataclass
class TickPlan:
    """What one sensor or schedule tick asks of Dagster, or why it asks nothing."""

    run_requests: list[dg.RunRequest] = field(default_factory=list)
    new_partitions: list[str] = field(default_factory=list)
    skip_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    # Nothing to do, and nothing left for a later tick (no file still being written or unreadable): the same folder,
    # store and settings will give the same answer, so the sensor may skip the next tick while they stay the same.
    settled: bool = False
    # The data folder's errors (`summarize_errors`) when this tick read the folder; None when it did not get that far.
    refused: list[str] | None = None


def summarize_errors(catalog: Catalog, most: int = 5) -> list[str]:
    """The data folder's errors, at most `most` lines and a count of the rest."""
    lines = [f"not ingested: {e}" for e in catalog.errors[:most]]
    if len(catalog.errors) > most:
        lines.append(f"... and {len(catalog.errors) - most} more errors in the data folder")
    return lines


def unchanged_folder(
    instance: dg.DagsterInstance,
    home: Path,
    source: TranscriptSource,
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
    qdrant: QdrantResource,
) -> int:
    """How many videos the ledger proves unchanged without reading the data folder (0: no proof).

    The proof: the store untouched since an ingest found every video of the folder stored as it is, the folder's
    files untouched since, the same settings, and every one of its videos still registered as a partition.
    """
    ledger = None if qdrant.server_url else ledgers.read_ledger(qdrant.local_path, qdrant.collection, home)
    if ledger is None:
        return 0
    settings = fingerprints.settings_key(source.path(), fingerprint_function(embeddings, chunker))
    if not ledger.sources_unchanged(source_files(source.path()), settings):
        return 0
    if not set(ledger.fingerprints) <= set(instance.get_dynamic_partitions(VIDEO_PARTITIONS)):
        return 0
    return len(ledger.fingerprints)


def plan_tick(
    instance: dg.DagsterInstance,
    source: TranscriptSource,
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
    qdrant: QdrantResource,
    trigger: str,
    force: bool = False,
    salt: str = "",
    busy_jobs: set[str] | None = None,
) -> TickPlan:
    """The sensor's and the schedules' tick: reconcile unless a run that writes the collection is still going.

    Waiting for those runs is what keeps a tick from requesting a video again while it is being ingested.
    """
    plan = TickPlan(warnings=reclaim_dead_runs(instance))
    busy = [f"run {r.run_id[:8]}" for r in runs_touching_the_collection(instance, busy_jobs)]
    busy += [f"backfill {b}" for b in backfills_in_progress(instance)]
    if busy:
        plan.skip_reason = f"waiting for {', '.join(busy[:5])} to finish before comparing the folder with Qdrant"
        return plan
    home = instance_home(instance)
    if (
        not force
        and home is not None
        and (unchanged := unchanged_folder(instance, home, source, embeddings, chunker, qdrant))
    ):
        plan.skip_reason = f"{unchanged} videos match what Qdrant holds; nothing to ingest or remove (files untouched)"
        plan.settled = True
        return plan
    try:
        view = observe_store(qdrant, home, lock_timeout_s=TICK_LOCK_TIMEOUT_S)
    except Timeout:
        plan.skip_reason = f"Qdrant folder {qdrant.local_path} is in use by another process; trying next tick"
        return plan
    if home is not None:
        keep_in_ledger(qdrant, home, view)
    fingerprint_of = fingerprint_function(embeddings, chunker)
    catalog, result = reconcile_folder(source.path(), home, view.stored, fingerprint_of, force=force)
    plan.refused = summarize_errors(catalog)
    plan.warnings += plan.refused
    if result.removal_refused:
        plan.warnings.append(result.removal_refused)
    order, plan.new_partitions = partition_order(instance.get_dynamic_partitions(VIDEO_PARTITIONS), catalog)
    wanted = {k: fingerprint_of(catalog.videos[k]) for k in result.to_ingest}
    plan.run_requests = run_requests(result, order, trigger, state_run_key(view.stored, wanted, salt))
    if not plan.run_requests:
        plan.settled = not plan.new_partitions and not catalog.unsure_files
        plan.skip_reason = f"{len(result.unchanged)} videos match what Qdrant holds; nothing to ingest or remove"
        if result.removal_refused:
            plan.skip_reason += "; " + result.removal_refused
        if catalog.errors:  # the tick's skip reason is what the UI shows first
            plan.skip_reason += "; " + "; ".join(summarize_errors(catalog))
    return plan


def tick_signature(
    instance: dg.DagsterInstance,
    source: TranscriptSource,
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
    qdrant: QdrantResource,
) -> str:
    """What a tick's answer depends on, read without opening Qdrant or any file: the data folder's entries (names,
    sizes, times), the latest write to the collection through Dagster, the local store's files, the settings.

    Stat calls only: for 10,000 files a few tens of milliseconds, where a full tick reads and validates every file.
    """
    from pstuts_pipeline.defs.assets.collection import qdrant_collection

    folder = source.path()
    try:
        entries = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns, e.inode()) for e in os.scandir(folder))
    except OSError:
        entries = []  # a missing folder: the full tick says so
    latest = instance.get_latest_materialization_event(qdrant_collection.key)
    removals = instance.get_runs(filters=dg.RunsFilter(job_name=REMOVE_JOB_NAME), limit=1)
    store = (
        None if qdrant.server_url else ledgers.stamps(ledgers.qdrant_local_files(qdrant.local_path, qdrant.collection))
    )
    state = [
        str(folder.resolve()),
        entries,
        [latest.run_id, latest.timestamp] if latest else None,
        [r.run_id for r in removals],
        store,
        fingerprint_function(embeddings, chunker)(fingerprints.PROBE_VIDEO),
        qdrant.server_url and strip_credentials(qdrant.server_url),
        qdrant.collection,
    ]
    return hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()


def runs_touching_the_collection(instance: dg.DagsterInstance, jobs: set[str] | None = None) -> list[dg.DagsterRun]:
    """Runs queued or in progress that write the collection (ingest and removal jobs, UI materializations)."""
    from pstuts_pipeline.defs.assets.collection import qdrant_collection

    jobs = jobs or {INGEST_JOB_NAME, REMOVE_JOB_NAME}
    runs = instance.get_runs(filters=dg.RunsFilter(statuses=IN_PROGRESS), limit=200)
    return [
        run
        for run in runs
        if run.job_name in jobs or (run.asset_selection and qdrant_collection.key in run.asset_selection)
    ]


def backfills_in_progress(instance: dg.DagsterInstance) -> list[str]:
    """Ids of backfills the daemon has not finished (a range materialized from the UI is one)."""
    from pstuts_pipeline.defs.dagster_private import BulkActionsFilter, BulkActionStatus

    requested = instance.get_backfills(filters=BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED]), limit=50)
    return [b.backfill_id for b in requested]
