"""`pstuts ingest`: reconcile the data folder with Qdrant and execute the resulting runs from this process."""

import functools
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg

from pstuts_pipeline.cli.report import IngestReport
from pstuts_pipeline.cli.runs_elsewhere import (
    RunOutcome,
    Submission,
    execute_elsewhere,
    execute_together,
    run_slots,
    stop_children,
)
from pstuts_pipeline.cli.sqlite_sync import batched_sqlite_syncs
from pstuts_pipeline.defs.executors import steps_run_in_run_process
from pstuts_pipeline.defs.instance import PID_TAG, instance_home, reclaim_dead_runs, this_process_tags
from pstuts_pipeline.defs.partitions import VIDEO_PARTITIONS
from pstuts_pipeline.defs.reconcile import (
    INGEST_JOB_NAME,
    fingerprint_function,
    keep_in_ledger,
    observe_store,
    partition_order,
    run_requests,
)
from pstuts_pipeline.redaction import redact
from pstuts_pipeline.search import fingerprints
from pstuts_pipeline.sources import Catalog, source_files
from pstuts_pipeline.sources import ledger as ledgers
from pstuts_pipeline.sources.reconciliation import reconcile, reconcile_folder

# What a run returns: executed in this process, or orchestrated from it with its steps elsewhere (Celery).
RunResult = dg.ExecuteInProcessResult | dg.JobExecutionResult | RunOutcome
Outcome = TypeVar("Outcome")
# Where an ingest stands: steps ended, steps in all (None until the runs are planned), and what is happening.
OnProgress = Callable[[int, int | None, str], None]
# The summary says why a run failed in one line; tracebacks go to a log file (and the instance's event log).
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
INTERRUPTED_EXIT_CODE = 130
INTERRUPTED_STATE = (
    "run canceled. Each video's points are its old ones, its new ones, or both until the next ingest (new points are "
    "written before stale ones go, so none is ever empty); every file write is whole. `pstuts ingest` makes it exact"
)


def register_partitions(instance: dg.DagsterInstance, catalog: Catalog) -> list[str]:
    """Add the catalog's new videos as partitions (in id order, so a first ingest is one range); the key order."""
    order, new = partition_order(instance.get_dynamic_partitions(VIDEO_PARTITIONS), catalog)
    if new:
        try:
            instance.add_dynamic_partitions(VIDEO_PARTITIONS, new)
        except Exception:  # another ingest registered them first (a UNIQUE constraint): fine if they are all there
            if set(new) - set(instance.get_dynamic_partitions(VIDEO_PARTITIONS)):
                raise
    return order


def step_errors(result: RunResult) -> list[str]:
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


def failure_log(instance: dg.DagsterInstance, result: RunResult) -> Path | None:
    """Write a failed run's step errors with their tracebacks to a file in the Dagster home; its path, or None."""
    if instance.is_ephemeral:
        return None
    blocks = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            blocks.append(f"== {event.step_key}\n{event.step_failure_data.error.to_string()}")
    if not blocks:
        return None
    path = Path(instance.root_directory) / "logs" / f"pstuts-ingest-{result.run_id}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact("\n".join(blocks)))
    return path


def cancel_this_process_runs(instance: dg.DagsterInstance, signal_name: str) -> None:
    """Mark the runs this process is executing as canceled and free their pool slots (we are about to exit)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            tags={PID_TAG: str(os.getpid())}, statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
        )
    )
    for run in runs:
        instance.report_run_canceled(run, f"`pstuts ingest` received {signal_name} and stopped")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)


def interruptible(
    instance: dg.DagsterInstance, work: Callable[[], Outcome], on_tick: Callable[[], None] | None = None
) -> Outcome:
    """Run `work` in a worker thread so Ctrl-C or SIGTERM stops the ingest now, not when the run ends.

    Dagster holds SIGINT until a run finishes when it executes on the main thread. Here the main thread
    cancels the run in the instance and exits 130; every write on the way is atomic (a file rename, a SQLite
    transaction, a video's new points upserted before its stale ones go), so the next ingest finds each
    video either as it was or as it is now, and re-ingests what does not match. While it waits, the main thread
    calls `on_tick` about once a second.
    """
    outcome: Future[Outcome] = Future()

    def target() -> None:
        try:
            outcome.set_result(work())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the main thread
            outcome.set_exception(exc)

    def stop(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        stop_children()
        cancel_this_process_runs(instance, name)
        os.write(2, f"\ninterrupted ({name}): {INTERRUPTED_STATE}\n".encode())
        os._exit(INTERRUPTED_EXIT_CODE)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    worker = threading.Thread(target=target, name="pstuts-run", daemon=True)
    try:
        worker.start()
        ticked = time.monotonic()
        while worker.is_alive():
            worker.join(0.2)
            if on_tick is not None and time.monotonic() - ticked >= 1.0:
                on_tick()
                ticked = time.monotonic()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return outcome.result()  # the worker has ended: its result, or its exception raised here


def job_name_of(request: dg.RunRequest) -> str:
    """The job a reconcile run request names (every one of ours names its job)."""
    if request.job_name is None:
        raise ValueError(f"run request {request.run_key!r} names no job")
    return request.job_name


def submission(request: dg.RunRequest) -> Submission:
    """A reconcile run request as this process submits it: tagged with this process, logging quietly."""
    return Submission(
        job_name_of(request), {**request.tags, **this_process_tags()}, {**request.run_config, **QUIET_LOGS}
    )


def execute_request(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    request: dg.RunRequest,
    on_steps: Callable[[list[str] | None], None] | None = None,
) -> RunResult:
    """Execute a reconcile run request from this process, exactly as the daemon would launch it.

    With the in-process executor every step runs here, and `on_steps` hears the steps that have ended as they end.
    `execute_in_process` always runs steps in-process, whatever executor the job has, so a job whose steps run
    elsewhere (Celery) is executed through its code pointer instead (its steps are not followed).
    """
    job = defs.resolve_job_def(job_name_of(request))
    run = submission(request)
    if not steps_run_in_run_process(job.executor_def):
        return interruptible(instance, lambda: execute_elsewhere(instance, run))
    run_id = str(uuid.uuid4())
    ended = EndedSteps(instance, run_id)
    with batched_sqlite_syncs():
        return interruptible(
            instance,
            lambda: job.execute_in_process(
                instance=instance, tags=run.tags, run_config=run.run_config, raise_on_error=False, run_id=run_id
            ),
            on_tick=None if on_steps is None else lambda: on_steps(ended()),
        )


def execute_requests_together(
    instance: dg.DagsterInstance, requests: list[dg.RunRequest], on_progress: OnProgress, steps: list[int]
) -> Iterator[RunResult]:
    """Runs whose steps execute on workers: the removal first and alone (it writes to the store outside the writers'
    pool), then every ingest run at once, up to the instance's run queue limit, so each worker takes a run's steps."""
    removals = [r for r in requests if r.job_name != INGEST_JOB_NAME]
    ingests = [r for r in requests if r.job_name == INGEST_JOB_NAME]
    ended: list[int] = []
    for removal in removals:
        on_progress(0, sum(steps), "removing videos that left the data folder")
        yield interruptible(instance, functools.partial(execute_elsewhere, instance, submission(removal)))
    slots = min(run_slots(instance), len(ingests))

    def tick() -> None:
        running = min(slots, len(ingests) - len(ended))
        done = len(removals) + len(ended)
        on_progress(sum(steps[:done]), sum(steps), f"{len(ended)}/{len(ingests)} runs done, {running} running")

    yield from interruptible(
        instance,
        lambda: execute_together(instance, [submission(r) for r in ingests], slots, lambda: ended.append(1)),
        on_tick=tick,
    )


ENDED_STEP_EVENTS = {
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.STEP_SKIPPED,
}


class EndedSteps:
    """The steps of a run that have ended so far (succeeded, failed or skipped), in the order they ended.

    Each call reads only the step-end events after the last call's cursor: reading the whole event log every tick
    (`get_run_step_stats`) grew with the run and took 14 s of the ingest's CPU for train + dev.
    """

    def __init__(self, instance: dg.DagsterInstance, run_id: str):
        self.instance, self.run_id = instance, run_id
        self.cursor: str | None = None
        self.ended: list[str] = []

    def __call__(self) -> list[str] | None:
        """None when the instance cannot say right now: progress is best effort and never fails the run."""
        try:
            if not self.instance.has_run(self.run_id):  # not created yet: asking its log now would create that log
                return []
            found = self.instance.get_records_for_run(self.run_id, cursor=self.cursor, of_type=ENDED_STEP_EVENTS)
        except Exception:  # noqa: BLE001 - e.g. a store busy beyond its timeout; the next tick asks again
            return None
        self.ended += [r.event_log_entry.step_key for r in found.records if r.event_log_entry.step_key]
        self.cursor = found.cursor
        return list(self.ended)


def step_count(job: dg.JobDefinition) -> int:
    """How many steps a run of `job` has: one per asset, and one per asset check not computed with its asset."""
    return len(job.graph.nodes)


def follow_run(
    on_progress: OnProgress, steps_before: int, steps: int, label: str
) -> Callable[[list[str] | None], None]:
    """What `execute_request` calls with a run's ended steps: the ingest's progress, in steps of all its runs."""

    def on_steps(ended: list[str] | None) -> None:
        if ended is None:
            return
        on_progress(steps_before + len(ended), steps, f"{label}, {ended[-1]} done" if ended else f"{label}, starting")

    return on_steps


def add_run_figures(report: IngestReport, instance: dg.DagsterInstance, result: RunResult, job_name: str) -> None:
    """Step seconds and chunk counts of a finished run, for the summary."""
    for stats in instance.get_run_step_stats(result.run_id):
        if stats.end_time and stats.start_time:
            report.step_seconds[stats.step_key] = round(
                report.step_seconds.get(stats.step_key, 0) + stats.end_time - stats.start_time, 2
            )
    if job_name == INGEST_JOB_NAME:
        # Each partition of the range carries its own video's count.
        events = result.asset_materializations_for_node("timestamped_chunks")
        counts = (e.metadata["chunks"].value for e in events if "chunks" in e.metadata)
        report.chunks += sum(count for count in counts if isinstance(count, int))


def observe_partitions(instance: dg.DagsterInstance) -> tuple[list[str], dict[str, ledgers.Stamp] | None]:
    """The registered partitions, with the stamps of the instance files they came from if nobody wrote meanwhile."""
    watched = None if instance.is_ephemeral else ledgers.dagster_partition_files(Path(instance.root_directory))
    before = ledgers.stamps(watched) if watched else None
    partitions = list(instance.get_dynamic_partitions(VIDEO_PARTITIONS))
    after = ledgers.stamps(watched) if watched else None
    return partitions, after if after == before else None


def ingest(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    only: list[str] | None = None,
    force: bool = False,
    on_progress: OnProgress = lambda done, total, what: None,
    allow_removal: bool = False,
) -> IngestReport:
    """Reconcile the data folder with Qdrant, then execute the removal run and the ingest runs it asks for."""
    started = time.perf_counter()
    resources: Mapping[str, Any] = defs.resources or {}
    source, embeddings, chunker, qdrant = (
        resources["transcript_source"],
        resources["embeddings"],
        resources["chunker"],
        resources["qdrant"],
    )
    home = instance_home(instance)
    reclaimed = reclaim_dead_runs(instance)
    on_progress(0, None, f"checking the data folder against {qdrant.collection}")
    view = observe_store(qdrant, home)
    sources = ledgers.stamps(source_files(source.path()))
    fingerprint_of = fingerprint_function(embeddings, chunker)
    catalog, result = reconcile_folder(
        source.path(), home, view.stored, fingerprint_of, only, force, allow_removal=allow_removal, wait=True
    )
    order = register_partitions(instance, catalog)
    report = IngestReport(result, reclaimed=reclaimed, dagster_home=str(instance.root_directory))
    # Steps on workers: this process only orchestrates, and submits the runs together (see runs_elsewhere).
    together = not steps_run_in_run_process(defs.resolve_job_def(INGEST_JOB_NAME).executor_def)
    if result.to_ingest and not together:
        embeddings.preload()  # overlaps the run's start and first steps (which run here)
    requests = list(run_requests(result, order, trigger="cli"))
    steps = [step_count(defs.resolve_job_def(job_name_of(r))) for r in requests]
    videos = [int(r.tags.get("pstuts/videos", 0)) for r in requests]

    def one_at_a_time() -> Iterator[RunResult]:
        for number, request in enumerate(requests):
            done = f"{sum(videos[:number])}/{sum(videos)} videos done"
            what = f"{videos[number]} videos" if videos[number] else "removing videos that left the data folder"
            label = f"{done}; run {number + 1}/{len(requests)}: {what}"
            follow = follow_run(on_progress, sum(steps[:number]), sum(steps), label)
            follow([])
            yield execute_request(defs, instance, request, on_steps=follow)

    runs = execute_requests_together(instance, requests, on_progress, steps) if together else one_at_a_time()
    for request, run in zip(requests, runs, strict=True):
        report.run_ids.append(run.run_id)
        if not run.success:
            errors = "; ".join(step_errors(run)) or "no step failed: see the run's logs"
            span = request.partition_key_range
            keys = order[order.index(span.start) : order.index(span.end) + 1] if span else []
            unfinished = [k for k in keys if k in set(result.to_ingest)]
            count = f"{len(unfinished)} video{'s' if len(unfinished) != 1 else ''}"
            what = f"for {count} ({span.start}..{span.end})" if span else "for the removal"
            log = failure_log(instance, run)
            where = f"tracebacks in {log}" if log else f"run {run.run_id} in `pstuts dev`"
            report.failed_runs.append(f"{what}: {errors} ({where})")
            report.unfinished |= dict.fromkeys(unfinished, errors)
            continue
        add_run_figures(report, instance, run, job_name_of(request))
    if requests:
        on_progress(sum(steps), sum(steps), f"{sum(videos)}/{sum(videos)} videos done")
    if result.has_work:
        view = observe_store(qdrant, home)
    if home is not None:
        # Every video of an untouched data folder stored as it is: the next no-op need not read the folder.
        fingerprint_of = fingerprint_function(embeddings, chunker)
        clean = not only and not catalog.errors and not reconcile(catalog, view.stored, fingerprint_of).has_work
        clean = clean and ledgers.stamps(source_files(source.path())) == sources
        settings = fingerprints.settings_key(source.path(), fingerprint_of) if clean else ""
        keep_in_ledger(qdrant, home, view, *observe_partitions(instance), clean and sources or None, settings)
    report.points_in_collection = view.points
    report.seconds = round(time.perf_counter() - started, 2)
    return report
