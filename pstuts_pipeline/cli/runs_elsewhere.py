"""Runs whose steps execute on other processes (Celery workers): submitted together, so workers share the ingest.

A run is one task per asset over its range of videos, so one run keeps one worker busy at a time; several runs of
at most PSTUTS_MAX_VIDEOS_PER_RUN videos, executed at the same time, keep every worker busy. Each run's executor
loop (it only orchestrates) runs in a process of its own, forked from this one: Dagster configures Python logging
(`logging.config.dictConfig`, which closes every handler of the process) each time a run starts, and a run starting
in one thread while another thread's run writes an event deadlocked the two (seen with three runs in one process).
"""

import multiprocessing
import os
import signal
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import dagster as dg

from pstuts_pipeline.defs.executors import reconstructable_job

# Finds the run a child process created: execute_job chooses the run id itself.
SUBMISSION_TAG = "pstuts/submission"
_children: set[multiprocessing.process.BaseProcess] = set()
_children_lock = threading.Lock()


@dataclass(frozen=True)
class Submission:
    """One run to execute: its job, tags and run config."""

    job_name: str
    tags: dict[str, str]
    run_config: dict
    key: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass
class RunOutcome:
    """A run executed by another process, read back from the instance: what the ingest's summary reads of a result."""

    run_id: str
    success: bool
    all_events: list[dg.DagsterEvent]

    def asset_materializations_for_node(self, node: str) -> list[dg.AssetMaterialization]:
        return [
            e.step_materialization_data.materialization
            for e in self.all_events
            if e.is_step_materialization and e.step_key == node
        ]


def execute_elsewhere(instance: dg.DagsterInstance, submission: Submission) -> dg.JobExecutionResult:
    """Run a job whose executor sends its steps to other processes; this process only orchestrates them."""
    with dg.execute_job(
        reconstructable_job(submission.job_name),
        instance,
        tags={**submission.tags, SUBMISSION_TAG: submission.key},
        run_config=submission.run_config,
        raise_on_error=False,
    ) as result:
        return result


def _orchestrate(submission: Submission) -> None:
    """The child process: its own instance (no connection shared with the parent), one run, then exit."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the parent's handlers came with the fork
        signal.signal(signum, signal.SIG_DFL)
    code = 1
    try:
        with dg.DagsterInstance.get() as instance:
            code = 0 if execute_elsewhere(instance, submission).success else 1
    finally:
        os._exit(code)  # nothing of the parent's (atexit, open connections) runs here


def execute_in_child(instance: dg.DagsterInstance, submission: Submission) -> RunOutcome:
    """Execute one run from a forked process and read its outcome back from the instance."""
    child = multiprocessing.get_context("fork").Process(target=_orchestrate, args=(submission,), daemon=True)
    with _children_lock:
        child.start()
        _children.add(child)
    try:
        child.join()
    finally:
        with _children_lock:
            _children.discard(child)
    runs = instance.get_runs(filters=dg.RunsFilter(tags={SUBMISSION_TAG: submission.key}), limit=1)
    run = runs[0] if runs else None
    if run is None:
        raise RuntimeError(f"the process orchestrating a {submission.job_name} run exited ({child.exitcode}) first")
    events = [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event is not None]
    finished = instance.get_run_by_id(run.run_id)
    return RunOutcome(run.run_id, finished is not None and finished.is_success, events)


def stop_children() -> None:
    """Stop every run's orchestrating process (this process is about to exit; their runs are marked canceled)."""
    with _children_lock:
        for child in _children:
            child.terminate()


def run_slots(instance: dg.DagsterInstance) -> int:
    """How many runs may execute at once: the instance's run queue limit (`concurrency: runs: max_concurrent_runs`).

    The same limit the daemon's queue applies to the sensor's and the UI's runs, so `pstuts ingest` loads the workers
    and the database no more than they do. -1 (no limit) is taken as no limit.
    """
    queue = instance.get_concurrency_config().run_queue_config
    limit = queue.max_concurrent_runs if queue is not None else -1
    return limit if limit > 0 else 1_000_000


def execute_together(
    instance: dg.DagsterInstance,
    submissions: Sequence[Submission],
    slots: int,
    on_run_end: Callable[[], None] = lambda: None,
) -> list[RunOutcome]:
    """Execute the runs at most `slots` at a time; their outcomes in the order given, whichever ends first."""

    def execute(submission: Submission) -> RunOutcome:
        try:
            return execute_in_child(instance, submission)
        finally:
            on_run_end()

    if not submissions:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(slots, len(submissions))), thread_name_prefix="pstuts-run") as pool:
        return list(pool.map(execute, submissions))
