"""The Dagster instance the project runs in: its settings, and runs whose process died without finishing."""

import fcntl
import os
import socket
from pathlib import Path

import dagster as dg
from pydantic import Field

from pstuts_pipeline.settings import paths

# The settings `pstuts ingest` and `pstuts dev` (`make dev`) write to a DAGSTER_HOME that has no dagster.yaml yet.
DEFAULT_INSTANCE_YAML = (Path(__file__).with_name("dagster.yaml")).read_text()
PID_TAG = "pstuts/pid"
HOST_TAG = "pstuts/host"
STARTED_TAG = "pstuts/process_started"
# Who asked for a run (sensor, schedule, cli, manual) and why, shown with the run in the UI.
TRIGGER_TAG = "pstuts/trigger"
REASON_TAG = "pstuts/reason"
MANUAL_TRIGGER = "manual"
MANUAL_REASON = "launched by hand (the UI, a backfill or Dagster's CLI)"
UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def prepare_home(home: Path | None = None) -> Path:
    """A DAGSTER_HOME with the project's instance settings, written only where no dagster.yaml exists yet."""
    home = home or paths().dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DEFAULT_INSTANCE_YAML)
    return home


def instance_home(instance: dg.DagsterInstance) -> Path | None:
    """The instance's folder, where the ledger and the source holdings live; None for an ephemeral instance."""
    return None if instance.is_ephemeral else Path(instance.root_directory)


def instance_for_cli() -> dg.DagsterInstance:
    """The instance in DAGSTER_HOME, or the project's own one, created with the project's settings on first use."""
    home = prepare_home()
    os.environ.setdefault("DAGSTER_HOME", str(home))
    # Two commands opening a new home at once would both create its SQLite schema, and one would fail on it.
    with open(home / ".pstuts-instance.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return dg.DagsterInstance.get()


def process_start_time(pid: int) -> str | None:
    """When a process started (clock ticks since boot), so a recycled pid is not taken for the original."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def this_process_tags() -> dict[str, str]:
    """Tags that let a later run tell whether the process running this one is still alive."""
    pid = os.getpid()
    return {PID_TAG: str(pid), HOST_TAG: socket.gethostname(), STARTED_TAG: process_start_time(pid) or ""}


class RunTags(dg.ConfigurableResource):
    """Tags a run as it sets up its resources: with the process executing it, so that a later tick can tell the run's
    process was killed (`reclaim_dead_runs`), and with why it runs when nobody said (a run launched by hand). The
    assets and ops that start a run's work require it.

    Only a process that runs the run's steps itself can say it is the run's process: a step on a Celery worker would
    tag the worker, and the run would be failed as dead when that worker stops while the run waits on another.
    `definitions.py` sets `tag_process` from the code location's executor.
    """

    tag_process: bool = Field(
        default=True, description="Tag runs with this process (false when steps run on other processes, e.g. Celery)."
    )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.dagster_run  # None when an asset is invoked directly (unit tests): no run to tag
        if run is None or context.instance is None:
            return
        tags: dict[str, str] = {}
        # The sensor, the schedules and `pstuts ingest` say why; a run without a reason was launched by hand.
        if REASON_TAG not in run.tags:
            tags |= {TRIGGER_TAG: MANUAL_TRIGGER, REASON_TAG: MANUAL_REASON}
        # `pstuts ingest` tags its runs with its own process when it creates them: nothing to add then.
        if self.tag_process and run.tags.get(PID_TAG) != str(os.getpid()):
            tags |= this_process_tags()
        if tags:
            context.instance.add_run_tags(run.run_id, tags)


def process_is_gone(tags: dict[str, str]) -> bool:
    """Whether the process a run was tagged with has ended (only decidable on the same host)."""
    if not tags.get(PID_TAG) or tags.get(HOST_TAG) != socket.gethostname():
        return False
    pid = int(tags[PID_TAG])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    started = process_start_time(pid)
    return bool(tags.get(STARTED_TAG)) and started is not None and started != tags[STARTED_TAG]


def reclaim_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Fail runs whose process died mid-run (kill -9, power loss) and free the pool slots they held.

    Without this a killed ingest stays STARTED for ever, holding the one `qdrant_writes` slot, and every later
    run waits on it. Returns one line per reclaimed run.
    """
    reclaimed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED), limit=200):
        if not process_is_gone(dict(run.tags)):
            continue
        message = (
            f"run {run.run_id} ({run.job_name}) was left {run.status.value} by process {run.tags[PID_TAG]}, which "
            "has ended; marked failed and its pool slots freed (its videos are re-ingested as needed)"
        )
        instance.report_run_failed(run, message)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reclaimed.append(message)
    return reclaimed
