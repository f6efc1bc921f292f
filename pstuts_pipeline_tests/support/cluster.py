"""A local Celery cluster for pstuts_pipeline: a Redis broker, a throwaway PostgreSQL instance and N dagster-celery
workers, each on a free port in one temporary folder, everything stopped (process groups) when the block ends.

Used by defs/test_distributed.py, benchmarks/distributed_ingest.py and `scripts/celery_cluster.py up|down`.
"""

import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from pstuts_pipeline.defs.executors import worker_config_yaml
from pstuts_pipeline_tests.support.servers import (
    QUICK_SENSOR,
    REPO,
    free_port,
    postgres_server,
    skip_or_fail,
    stop_group,
    wait_until,
)

BIN = Path(sys.executable).parent
DATABASE = "dagster"


def redis_ready(port: int) -> bool:
    """True once Redis answers PING on the port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """A server in its own session (stopped with its whole group), logging to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Redis on a free loopback port, nothing persisted; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip_or_fail("redis-server is not installed (Debian: apt-get install redis-server)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", ""]
    process = start([*command, "--appendonly", "no"], folder / "redis.log", dict(os.environ), folder)
    try:
        wait_until(lambda: redis_ready(port), 60, f"redis-server on port {port}", lambda: process.poll() is None)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_group(process)


def create_database(pg: dict[str, str], name: str) -> None:
    import psycopg2

    connection = psycopg2.connect(dbname="postgres", **pg)
    connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE DATABASE "{name}"')
    finally:
        connection.close()


@dataclass
class Worker:
    """One `dagster-celery worker start` process; `pid` is the celery worker it starts, which runs the steps."""

    name: str
    process: subprocess.Popen
    log: Path

    @functools.cached_property
    def pid(self) -> int:
        """The celery process (`dagster-celery worker start` runs it as a child), known once the worker is ready."""
        return psutil.Process(self.process.pid).children()[0].pid

    def pool_pids(self) -> set[int]:
        """The pool processes that run steps now (a killed one is replaced by a new one)."""
        try:
            return {child.pid for child in psutil.Process(self.pid).children()}
        except psutil.NoSuchProcess:
            return set()

    def ready(self) -> bool:
        return " ready." in self.log.read_text(errors="replace")


@dataclass
class CeleryCluster:
    """The running cluster: the environment every process of it shares, and its workers."""

    root: Path
    env: dict[str, str]
    workers: list[Worker] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return Path(self.env["DAGSTER_HOME"])

    def start_worker(self, name: str, stack: ExitStack) -> Worker:
        """A worker with one pool process: it runs one step at a time and keeps the model loaded between steps; the
        worker replaces it, and gives its step back to the broker, if it dies."""
        config = self.root / "celery.yaml"
        command = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(config)]
        command += ["-n", f"{name}@%h", "--", "-c", "1", "--without-gossip", "--without-mingle"]
        log = self.root / f"{name}.log"
        worker = Worker(name, start(command, log, self.env, REPO), log)
        stack.callback(stop_group, worker.process)
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, timeout: float = 180) -> None:
        for worker in self.workers:
            alive = lambda w=worker: w.process.poll() is None
            try:
                wait_until(worker.ready, timeout, f"celery worker {worker.name}", alive)
            except AssertionError as error:  # the folder goes with the cluster: keep what the log said
                raise AssertionError(f"{error}; its log ends:\n{worker.log.read_text()[-3000:]}") from None
            assert worker.pid != worker.process.pid


def cluster_env(root: Path, broker: str, pg: dict[str, str], settings: dict[str, str]) -> dict[str, str]:
    """One environment for the CLI, the daemon and every worker: the same instance, broker, storage and data."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PSTUTS_", "DAGSTER_", "QDRANT_"))}
    env.update(
        DAGSTER_HOME=str(root / "dagster_home"),
        DAGSTER_PG_HOST=pg["host"],
        DAGSTER_PG_PORT=pg["port"],
        DAGSTER_PG_DB=DATABASE,
        DAGSTER_PG_USERNAME=pg["user"],
        DAGSTER_PG_PASSWORD=pg["password"],
        # dagster-celery starts `celery` by name.
        PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        PSTUTS_EXECUTOR="celery",
        PSTUTS_CELERY_BROKER=broker,
        # A path every worker sees (on several machines: a shared volume or an object store URL).
        PSTUTS_STORAGE_DIR=str(root / "storage"),
        PSTUTS_DATA_DIR=str(root / "data"),
        **QUICK_SENSOR,
    )
    return {**env, **settings}


@contextmanager
def celery_cluster(
    workers: int = 2, settings: dict[str, str] | None = None, visibility_timeout_s: int | None = None
) -> Iterator[CeleryCluster]:
    """Redis, PostgreSQL (deploy/dagster.yaml) and `workers` dagster-celery workers in one temporary folder."""
    if shutil.which("redis-server") is None:
        skip_or_fail("redis-server is not installed (Debian: apt-get install redis-server)")
    if not (BIN / "dagster-celery").exists():
        skip_or_fail("dagster-celery is not installed: it is the `celery` extra (pip install -e '.[celery]')")
    root = Path(tempfile.mkdtemp(prefix="pstuts-celery-"))
    try:
        with ExitStack() as stack:
            broker = stack.enter_context(redis_server(root / "redis"))
            pg = stack.enter_context(postgres_server())
            create_database(pg, DATABASE)
            cluster = CeleryCluster(root, cluster_env(root, broker, pg, settings or {}))
            cluster.home.mkdir(parents=True)
            (root / "data").mkdir()
            shutil.copy(REPO / "deploy" / "dagster.yaml", cluster.home / "dagster.yaml")
            (root / "celery.yaml").write_text(worker_config_yaml(visibility_timeout_s))
            # The schema once, before processes that would each create it at once (and collide) start.
            subprocess.run(
                [str(BIN / "dagster"), "instance", "migrate"], env=cluster.env, check=True, capture_output=True
            )
            for number in range(1, workers + 1):
                cluster.start_worker(f"worker{number}", stack)
            cluster.wait_for_workers()
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)
