"""Steps on Celery workers, end to end: a real Redis broker, a throwaway PostgreSQL instance (deploy/dagster.yaml) and
two `dagster-celery worker` processes; runs submitted together by `pstuts ingest` and launched by the daemon's sensor,
a worker's pool process killed with kill -9 mid-step, a whole worker killed (the broker's visibility timeout), a
removal; every time the points must be exactly those of an in-process ingest."""

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline.defs.assets.collection import QDRANT_POOL
from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline_tests.support.cluster import BIN, CeleryCluster, celery_cluster, start
from pstuts_pipeline_tests.support.helpers import COLLECTION, run_observations
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.servers import REPO, stop_group, wait_until

# slow: `make test` runs the slow tier (pytest -m slow); distributed: `pytest -m distributed` runs this module alone.
pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.server]
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
Points = dict[str, tuple[int, str, str]]


def videos() -> list[dict]:
    """dev's 11 videos, or the repository's sample where PsTuts-VQA is not beside the checkout."""
    dev = PSTUTS_DIR / "dev.json"
    return json.loads(dev.read_text() if dev.exists() else (REPO / "data" / "sample_videos.json").read_text())


def points(storage: Path) -> Points:
    """Every point of a local collection: id -> (video id, fingerprint, text)."""
    with QdrantResource(path=str(storage / "qdrant"), collection=COLLECTION).get_store() as store:
        found, _ = store.scroll(limit=100_000, with_payload=True)
    return {
        str(p.id): (p.payload["metadata"]["video_id"], p.payload["metadata"]["fingerprint"], p.payload["page_content"])
        for p in found
    }


def pstuts(env: dict[str, str], *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(BIN / "pstuts"), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"pstuts {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


@contextmanager
def environ(env: dict[str, str]) -> Iterator[None]:
    """The cluster's instance settings in this process too, so it can open the same PostgreSQL instance."""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("DAGSTER_", "PSTUTS_"))})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[CeleryCluster, dg.DagsterInstance]]:
    """The cluster with dev's videos in its data folder, and its instance opened in this process."""
    with ExitStack() as stack:
        cluster = stack.enter_context(celery_cluster(2))
        (cluster.root / "data" / "dev.json").write_text(json.dumps(videos()))
        stack.enter_context(environ(cluster.env))
        yield cluster, stack.enter_context(dg.DagsterInstance.from_config(str(cluster.home)))


@pytest.fixture(scope="module")
def expected(stack, cli_phase) -> Points:
    """The points `pstuts ingest` writes in-process (its own instance and Qdrant folder) from the same file.

    It reads the vectors the workers computed from the embedding cache (keyed by model and text): what is compared
    is what the orchestration decides (which chunks, ids, fingerprints, texts), and the CI budget has no room to
    embed everything twice.
    """
    cluster, _ = stack
    reference = cluster.root / "in_process"
    (reference / "data").mkdir(parents=True)
    shutil.copy(cluster.root / "data" / "dev.json", reference / "data" / "dev.json")
    env = {k: v for k, v in cluster.env.items() if not k.startswith(("DAGSTER_", "PSTUTS_"))}
    env.update(
        PSTUTS_DATA_DIR=str(reference / "data"),
        PSTUTS_STORAGE_DIR=str(reference / "storage"),
        PSTUTS_EMBEDDING_CACHE_DIR=str(cluster.root / "storage" / "embedding_cache"),
    )
    pstuts(env, "ingest")
    return points(reference / "storage")


def pool_pids(cluster: CeleryCluster) -> set[int]:
    return set().union(*(w.pool_pids() for w in cluster.workers))


def step_pids(instance: dg.DagsterInstance, run_id: str) -> dict[str, set[int]]:
    """The processes each step of a run started in, from the run's event log."""
    found: dict[str, set[int]] = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START):
        found.setdefault(entry.dagster_event.step_key, set()).add(entry.dagster_event.pid)
    return found


def runs(instance: dg.DagsterInstance, job: str, trigger: str) -> list[dg.DagsterRun]:
    found = instance.get_runs(filters=dg.RunsFilter(job_name=job, tags={"pstuts/trigger": trigger}))
    return sorted(found, key=lambda r: instance.get_run_record_by_id(r.run_id).create_timestamp)


def model_loads(instance: dg.DagsterInstance) -> dict[int, dict[tuple[str, str], int]]:
    """Per process that ran an embedding step: each such step (run, asset) and the model loads made by its end.

    From each run's totals (the observation every embedding step logs), one run at a time.
    """
    loads: dict[int, dict[tuple[str, str], int]] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(job_name="ingest_videos")):
        for name in ("kamradt_chunks", "qdrant_collection"):
            for totals in run_observations(instance, run.run_id, name):
                loads.setdefault(totals["process_id"], {})[(run.run_id, name)] = totals["model_loads_in_process"]
    return loads


def step_spans(instance: dg.DagsterInstance, run_id: str) -> list[tuple[float, float, int]]:
    """Each step of a run that succeeded: (started, ended, process), from the run's event log."""
    started: dict[str, tuple[float, int]] = {}
    spans = []
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is not None and event.event_type == dg.DagsterEventType.STEP_START:
            started[entry.step_key] = (entry.timestamp, event.pid)
        elif event is not None and event.event_type == dg.DagsterEventType.STEP_SUCCESS:
            begun, pid = started[entry.step_key]
            spans.append((begun, entry.timestamp, pid))
    return spans


@dataclass
class CliPhase:
    pid: int
    runs: list[dg.DagsterRun]
    points: Points
    worker_pids: list[set[int]]


@pytest.fixture(scope="module")
def cli_phase(stack) -> CliPhase:
    """`pstuts ingest` on the cluster, its videos cut into three runs of about equal work: the runs, the points."""
    cluster, instance = stack
    env = {**cluster.env, "PSTUTS_MIN_RUNS_PER_INGEST": "3"}
    ingest = subprocess.Popen([str(BIN / "pstuts"), "ingest"], env=env, cwd=REPO, stdout=subprocess.PIPE)
    output = ingest.communicate(timeout=600)[0].decode()
    assert ingest.returncode == 0, output
    found = runs(instance, "ingest_videos", "cli")
    return CliPhase(ingest.pid, found, points(cluster.root / "storage"), [w.pool_pids() for w in cluster.workers])


@dataclass
class KillPhase:
    victim: int
    worker_pids: set[int]
    run: dg.DagsterRun
    slots_after_run: int
    points_after_reconcile: Points
    slots_after_reconcile: int


@pytest.fixture(scope="module")
def kill_phase(stack, cli_phase, expected) -> KillPhase:
    """`pstuts ingest --force`, its qdrant_collection step's worker killed with kill -9, then `pstuts ingest`."""
    cluster, instance = stack
    ingest = start([str(BIN / "pstuts"), "ingest", "--force"], cluster.root / "forced.log", cluster.env, REPO)
    try:

        def writer() -> int | None:
            forced = runs(instance, "ingest_videos", "cli")[len(cli_phase.runs) :]
            return (
                next(iter(step_pids(instance, forced[0].run_id).get("qdrant_collection", ())), None) if forced else None
            )

        deadline = time.monotonic() + 300
        while (victim := writer()) is None:  # the step writes for a second or two: poll fast
            assert time.monotonic() < deadline and ingest.poll() is None, "the forced run's qdrant_collection step"
            time.sleep(0.05)
        worker_pids = pool_pids(cluster)
        os.kill(victim, signal.SIGKILL)
        ingest.wait(timeout=400)
    finally:
        stop_group(ingest)
    forced = runs(instance, "ingest_videos", "cli")[len(cli_phase.runs)]
    slots = instance.event_log_storage.get_concurrency_info(QDRANT_POOL).active_slot_count
    pstuts(cluster.env, "ingest")
    return KillPhase(
        victim,
        worker_pids,
        forced,
        slots,
        points(cluster.root / "storage"),
        instance.event_log_storage.get_concurrency_info(QDRANT_POOL).active_slot_count,
    )


@dataclass
class DaemonPhase:
    removal: dg.DagsterRun
    points_after_removal: Points
    partitions_after_removal: set[str]
    ingest: dg.DagsterRun
    points: Points
    worker_pids: set[int]


@pytest.fixture(scope="module")
def daemon_phase(stack, kill_phase) -> DaemonPhase:
    """dagster-daemon on the cluster's instance: all videos but the first leave the folder (a removal the operator
    allowed), then come back."""
    cluster, instance = stack
    everything = videos()
    data = cluster.root / "data" / "dev.json"
    data.write_text(json.dumps(everything[:1]))
    # The daemon loads deploy/celery's code location, as the README tells users to.
    command = [str(BIN / "dagster-daemon"), "run", "-f", str(REPO / "deploy" / "celery" / "definitions.py")]
    # Removing 10 of 11 stored videos is over PSTUTS_MAX_REMOVAL_SHARE: the sensor refuses it unless told it is meant.
    env = {**cluster.env, "PSTUTS_ALLOW_MASS_REMOVAL": "1"}
    daemon = start(command, cluster.root / "daemon.log", env, REPO)
    alive = lambda: daemon.poll() is None
    done = lambda job: [r for r in runs(instance, job, "sensor") if r.status in FINISHED]
    try:
        wait_until(lambda: done("remove_videos"), 300, "the sensor's removal run", alive)
        removal = done("remove_videos")[0]
        after_removal = points(cluster.root / "storage")
        partitions = set(instance.get_dynamic_partitions("videos"))
        data.write_text(json.dumps(everything))
        wait_until(lambda: done("ingest_videos"), 300, "the sensor's ingest run", alive)
        ingest = done("ingest_videos")[0]
    finally:
        stop_group(daemon)
    worker_pids = pool_pids(cluster)
    return DaemonPhase(removal, after_removal, partitions, ingest, points(cluster.root / "storage"), worker_pids)


def test_pstuts_ingest_runs_every_step_on_the_workers_and_writes_the_in_process_points(stack, cli_phase, expected):
    cluster, instance = stack
    assert len(expected) > 0 and cli_phase.points == expected
    assert len(cli_phase.runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in cli_phase.runs)
    workers = set().union(*cli_phase.worker_pids)
    for run in cli_phase.runs:
        pids = step_pids(instance, run.run_id)
        assert set(INGESTION_ASSET_NAMES) <= set(pids)  # and the asset checks, each its own step
        ran_in = set().union(*pids.values())
        assert ran_in <= workers and cli_phase.pid not in ran_in
        assert run.tags["pstuts/pid"] == str(cli_phase.pid), "tagged with the submitting process, not a worker's"


def test_pstuts_ingest_runs_its_runs_at_once_on_both_workers(stack, cli_phase):
    """The runs were executed together: steps of two different runs ran at the same time, one on each worker."""
    _, instance = stack
    spans = {run.run_id: step_spans(instance, run.run_id) for run in cli_phase.runs}
    first, second = cli_phase.worker_pids
    overlapping = [
        (a, b)
        for run_a, spans_a in spans.items()
        for run_b, spans_b in spans.items()
        if run_a < run_b
        for a in spans_a
        for b in spans_b
        if a[0] < b[1] and b[0] < a[1] and {a[2], b[2]} & first and {a[2], b[2]} & second
    ]
    assert overlapping, spans


def test_a_worker_killed_mid_step_ends_the_run_frees_its_pool_slot_and_the_next_reconcile_heals(
    stack, kill_phase, expected
):
    cluster, instance = stack
    assert kill_phase.victim in kill_phase.worker_pids
    assert kill_phase.run.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
    assert kill_phase.slots_after_run == 0 and kill_phase.slots_after_reconcile == 0
    assert kill_phase.points_after_reconcile == expected
    # The step was cut short in the killed worker, and the broker handed it to the other one.
    starts = step_pids(instance, kill_phase.run.run_id)["qdrant_collection"]
    assert kill_phase.victim in starts and len(starts) == 2, starts


def test_the_daemons_sensor_removes_and_ingests_on_the_workers(stack, daemon_phase, expected):
    cluster, instance = stack
    first = videos()[0]["video_id"]
    assert daemon_phase.removal.status == dg.DagsterRunStatus.SUCCESS
    assert daemon_phase.points_after_removal == {k: v for k, v in expected.items() if v[0] == first}
    assert daemon_phase.partitions_after_removal == {str(first)}
    assert daemon_phase.ingest.status == dg.DagsterRunStatus.SUCCESS
    assert int(daemon_phase.ingest.tags["pstuts/videos"]) == len(videos()) - 1
    assert daemon_phase.points == expected
    for run in (daemon_phase.removal, daemon_phase.ingest):
        assert set().union(*step_pids(instance, run.run_id).values()) <= daemon_phase.worker_pids


def test_each_worker_loaded_the_model_once_however_many_steps_it_ran(stack, daemon_phase):
    _, instance = stack
    loads = model_loads(instance)
    # 0: every text it embedded came from the shared embedding cache, so it never needed the model.
    assert loads and all(set(steps.values()) <= {0, 1} for steps in loads.values()), loads
    served = [len(steps) for steps in loads.values() if 1 in steps.values()]
    assert served and max(served) >= 2, loads


# A whole worker lost: Redis hands its unacknowledged step to another worker once this many seconds have passed.
VISIBILITY_TIMEOUT_S = 20


@dataclass
class WorkerLostPhase:
    victim: int
    survivor_pids: set[int]
    run: dg.DagsterRun
    killed_at: float
    writer_starts: list[tuple[float, int]]
    points: Points
    wanted: set[int]


@pytest.fixture(scope="module")
def worker_lost_phase(stack, expected) -> WorkerLostPhase:
    """A second cluster whose workers' visibility timeout is 20 s (PSTUTS_CELERY_VISIBILITY_TIMEOUT_S, which their app
    reads): `pstuts ingest` of two videos, and the worker running qdrant_collection killed whole (its celery process
    and its pool process, as when a machine is lost). The first cluster's embedding cache keeps every step short."""
    main, _ = stack
    settings = {
        "PSTUTS_CELERY_VISIBILITY_TIMEOUT_S": str(VISIBILITY_TIMEOUT_S),
        "PSTUTS_EMBEDDING_CACHE_DIR": str(main.root / "storage" / "embedding_cache"),
    }
    chosen = videos()[:2]
    with celery_cluster(2, settings=settings) as cluster, environ(cluster.env):
        (cluster.root / "data" / "two.json").write_text(json.dumps(chosen))
        with dg.DagsterInstance.from_config(str(cluster.home)) as instance:
            ingest = start([str(BIN / "pstuts"), "ingest"], cluster.root / "ingest.log", cluster.env, REPO)
            try:

                def writer() -> int | None:
                    found = runs(instance, "ingest_videos", "cli")
                    starts = step_pids(instance, found[0].run_id).get("qdrant_collection", ()) if found else ()
                    return next(iter(starts), None)

                deadline = time.monotonic() + 300
                while (victim := writer()) is None:
                    assert time.monotonic() < deadline and ingest.poll() is None, "the run's qdrant_collection step"
                    time.sleep(0.05)
                [lost] = [w for w in cluster.workers if victim in w.pool_pids()]
                survivor_pids = set().union(*(w.pool_pids() for w in cluster.workers if w is not lost))
                os.killpg(lost.process.pid, signal.SIGKILL)  # dagster-celery, its celery worker, the pool process
                killed_at = time.time()
                ingest.wait(timeout=300)
            finally:
                stop_group(ingest)
            [run] = runs(instance, "ingest_videos", "cli")
            writer_starts = [
                (e.timestamp, e.dagster_event.pid)
                for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)
                if e.step_key == "qdrant_collection"
            ]
            wanted = {v["video_id"] for v in chosen}
            stored = points(cluster.root / "storage")
    return WorkerLostPhase(victim, survivor_pids, run, killed_at, writer_starts, stored, wanted)


def test_a_whole_worker_lost_mid_step_has_its_step_run_by_another_after_the_visibility_timeout(
    worker_lost_phase, expected
):
    phase = worker_lost_phase
    assert phase.run.status == dg.DagsterRunStatus.SUCCESS
    assert phase.points == {k: v for k, v in expected.items() if v[0] in phase.wanted}
    (first, killed), (second, survivor) = phase.writer_starts
    assert killed == phase.victim and survivor in phase.survivor_pids
    # Nobody was left to give the step back: Redis restored it once the timeout had passed since its delivery.
    waited = second - phase.killed_at
    assert VISIBILITY_TIMEOUT_S - (phase.killed_at - first) - 1 <= waited <= VISIBILITY_TIMEOUT_S + 60, waited
