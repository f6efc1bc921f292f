"""Faults injected as users meet them: `pstuts ingest` killed (-9) at each asset step, interrupted (Ctrl-C and
SIGTERM), two ingests at once, a search during an ingest, a full disk. After each, the next ingest finishes with
exactly the points a clean ingest writes, and no duplicates."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline_tests.support.helpers import REPO, SAMPLE_DIR, local_points

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
COLLECTION = "pstuts_transcripts"


def env_for(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PSTUTS_DATA_DIR": str(root / "data"),
        "PSTUTS_STORAGE_DIR": str(root / "storage"),
        "DAGSTER_HOME": str(root / "storage" / "dagster_home"),
    }


def new_state(root: Path) -> dict[str, str]:
    """A data folder with the sample videos, and no storage yet."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "videos.json").write_text((SAMPLE_DIR / "sample_videos.json").read_text())
    return env_for(root)


def pstuts(env: dict[str, str], *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "pstuts"), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def points(env: dict[str, str]) -> list[tuple[str, str, int, str]]:
    """Every stored point as (id, fingerprint, video, text), sorted: what an exact comparison needs."""
    found = local_points(Path(env["PSTUTS_STORAGE_DIR"]) / "qdrant", COLLECTION)
    return sorted(
        (str(p.id), p.payload["metadata"]["fingerprint"], p.payload["metadata"]["video_id"], p.payload["page_content"])
        for p in found
    )


@pytest.fixture(scope="module")
def clean_points(tmp_path_factory) -> list[tuple[str, str, int, str]]:
    """What a clean ingest of the sample stores, to compare every recovery with."""
    env = new_state(tmp_path_factory.mktemp("clean"))
    done = pstuts(env, "ingest")
    assert done.returncode == 0, done.stderr
    return points(env)


def step_in_progress(home: str) -> str | None:
    """The step the newest run is executing now, read from the instance's event log (None if none yet)."""
    if not (Path(home) / "history").exists():
        return None
    with dg.DagsterInstance.from_config(home) as instance:
        runs = instance.get_runs(limit=1)
        if not runs:
            return None
        started, finished = [], set()
        for record in instance.all_logs(runs[0].run_id):
            event = record.dagster_event
            if event is None:
                continue
            if event.event_type == dg.DagsterEventType.STEP_START:
                started.append(event.step_key)
            elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
                finished.add(event.step_key)
        running = [s for s in started if s not in finished]
        return running[-1] if running else None


def run_created(home: str) -> bool:
    """Whether the instance holds a run yet, read straight from its SQLite file (an instance is too slow to poll)."""
    database = Path(home) / "history" / "runs.db"
    if not database.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.1)) as connection:
            return connection.execute("select count(*) from runs").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def start_ingest(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "pstuts"), "ingest", *args],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_step(process: subprocess.Popen, env: dict[str, str], step: str, timeout: float = 300) -> None:
    """Return as soon as `step` runs: the first step once the run exists, a later one once every video's output of
    the step before it is on disk (steps run one after another in the run's process, so the next starts at once)."""
    order = INGESTION_ASSET_NAMES
    videos = len(json.loads((Path(env["PSTUTS_DATA_DIR"]) / "videos.json").read_text()))
    previous = Path(env["PSTUTS_STORAGE_DIR"]) / "io" / order[order.index(step) - 1] if order.index(step) else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the ingest ended before {step}: {process.communicate()[1][-2000:]}"
        if previous is not None:
            if len(list(previous.glob("*.json"))) >= videos:
                return
        elif run_created(env["DAGSTER_HOME"]):
            return
        time.sleep(0.01)
    raise AssertionError(f"{step} did not start within {timeout} s")


@pytest.mark.parametrize("step", INGESTION_ASSET_NAMES)
def test_kill_9_at_each_step_then_the_next_ingest_recovers_exactly(step, tmp_path, clean_points):
    env = new_state(tmp_path)
    process = start_ingest(env)
    wait_for_step(process, env, step)
    process.kill()
    process.wait(timeout=60)
    killed_in = step_in_progress(env["DAGSTER_HOME"])

    again = pstuts(env, "ingest", timeout=300)
    assert again.returncode == 0, again.stderr
    assert "reclaimed run" in again.stderr and f"process {process.pid}" in again.stderr.replace("\n", " ")
    # The kill lands as the step starts: for a later step, between the step before writing its outputs and
    # recording its success, or in the step itself; for the first, as the run starts.
    order = INGESTION_ASSET_NAMES
    assert killed_in in order[max(order.index(step) - 1, 0) : order.index(step) + 1] or (
        step == "raw_transcripts" and killed_in is None
    ), killed_in
    assert points(env) == clean_points, f"killed in {killed_in}"
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        statuses = [r.status for r in instance.get_runs()]
    assert statuses.count(dg.DagsterRunStatus.FAILURE) == 1 and dg.DagsterRunStatus.STARTED not in statuses


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_stops_the_run_at_once_with_exit_130(signum, tmp_path, clean_points):
    env = new_state(tmp_path)
    process = start_ingest(env)
    wait_for_step(process, env, "kamradt_chunks")
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and time.monotonic() - sent < 10, stderr[-2000:]
    assert "run canceled" in stderr
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.CANCELED
    again = pstuts(env, "ingest")
    assert again.returncode == 0 and "reclaimed" not in again.stderr, again.stderr
    assert points(env) == clean_points


def test_two_ingests_at_once_and_a_search_during_one(tmp_path, clean_points):
    env = new_state(tmp_path)
    first, second = start_ingest(env), start_ingest(env)
    wait_for_step(first, env, "kamradt_chunks")
    search = pstuts(env, "search", "How do I open Free Transform?", "--json", timeout=600)
    for process in (first, second):
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[-2000:]
    assert points(env) == clean_points
    # The search waited for the writer's lock, then answered from a complete collection, or found none yet.
    if search.returncode == 0:
        assert json.loads(search.stdout)["results"]
    else:
        assert "does not exist yet" in search.stderr


def test_a_full_disk_keeps_what_was_stored_and_the_next_ingest_with_room_recovers(tmp_path, clean_points):
    env = new_state(tmp_path)
    assert pstuts(env, "ingest").returncode == 0
    storage = Path(env["PSTUTS_STORAGE_DIR"])
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip()}): the full-disk case needs one")
    try:
        full_env = {**env, "PSTUTS_IO_PATH": str(small / "io"), "PSTUTS_EMBEDDING_CACHE_DIR": str(small / "cache")}
        with (small / "filler").open("wb", buffering=0) as filler:  # leave no room at all
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError:
                pass
        failed = pstuts(full_env, "ingest", "--force")
        assert failed.returncode != 0
        assert f"cannot write {small / 'io'}" in failed.stderr and "No space left on device" in failed.stderr
        assert points(env) == clean_points
    finally:
        subprocess.run(["umount", str(small)], check=False)
    assert storage.exists() and points(env) == clean_points
    assert pstuts(env, "ingest", "--force").returncode == 0 and points(env) == clean_points
