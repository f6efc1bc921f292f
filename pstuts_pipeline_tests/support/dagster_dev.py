"""`pstuts dev` as a user starts it (webserver, daemon, code server), driven through GraphQL, and what the tests and
benchmarks read back from it: the sensor's runs, their partition ranges and the stored videos."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import urllib.error
from pathlib import Path

import psutil

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline_tests.support import REPO
from pstuts_pipeline_tests.support.servers import free_port, http_json
from pstuts_pipeline_tests.support.workspace import Workspace, pstuts_command

LOCATION = "pstuts_pipeline"
REPOSITORY = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
SENSOR = {**REPOSITORY, "sensorName": "transcript_folder_sensor"}
RUNS_QUERY = """{ runsOrError(limit: 200) { ... on Runs { results { runId jobName status startTime endTime
  tags { key value } } } } }"""
TICKS_QUERY = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { __typename ... on Sensor {
  sensorState { ticks(limit: 10) { status timestamp skipReason runIds error { message } } } } } }"""
PARTITIONS_QUERY = """{ assetNodes(assetKeys: [{path: ["qdrant_collection"]}]) { assetPartitionStatuses {
  ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } } } }"""
LOCATION_QUERY = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


class DagsterDev:
    """`pstuts dev` (dagster dev: webserver, daemon, code server) as a user starts it, driven through GraphQL."""

    def __init__(self, env: dict[str, str], log: Path):
        self.env, self.log = env, log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.peak_rss_mb = 0.0
        self._sampling = False

    def start(self, timeout: float = 300) -> None:
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                [*pstuts_command(), "dev", "-h", "127.0.0.1", "-p", str(self.port)],
                env=self.env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._sampling = True
        threading.Thread(target=self._sample_rss, daemon=True).start()
        self.wait_until(self.location_loaded, timeout, "the code location to load in dagster dev")

    def stop(self) -> None:
        self._sampling = False
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)  # a backgrounded dagster dev ignores SIGINT
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def __enter__(self) -> DagsterDev:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def tree_rss_mb(self) -> float:
        """The resident memory of dagster dev and every process below it."""
        try:
            root = psutil.Process(self.process.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        total = 0
        for process in processes:
            try:
                total += process.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total / 2**20

    def _sample_rss(self) -> None:
        while self._sampling and self.process.poll() is None:
            self.peak_rss_mb = max(self.peak_rss_mb, self.tree_rss_mb())
            time.sleep(0.5)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_until(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if not self.alive():
                raise AssertionError(f"waiting for {what}: dagster dev exited; log {self.log}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"waiting for {what}: not done after {timeout:.0f} s; log {self.log}:\n{self.tail()}"
                )
            time.sleep(1)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def gql(self, query: str, **variables: object) -> dict:
        answer = http_json(f"{self.url}/graphql", {"query": query, "variables": variables}, timeout=120)
        if answer.get("errors"):
            raise AssertionError(answer["errors"])
        return answer["data"]

    def location_loaded(self) -> bool:
        entries = self.gql(LOCATION_QUERY)["workspaceOrError"]["locationEntries"]
        error = entries[0]["locationOrLoadError"] or {}
        if error.get("__typename") == "PythonError":
            raise AssertionError(error["message"])
        return entries[0]["loadStatus"] == "LOADED" and error.get("__typename") == "RepositoryLocation"

    def runs(self) -> list[dict]:
        runs = self.gql(RUNS_QUERY)["runsOrError"]["results"]
        for run in runs:
            run["tags"] = {t["key"]: t["value"] for t in run["tags"]}
        return runs

    def ticks(self) -> list[dict]:
        return self.gql(TICKS_QUERY, s=SENSOR)["sensorOrError"]["sensorState"]["ticks"]

    def materialized(self) -> set[str]:
        [node] = self.gql(PARTITIONS_QUERY)["assetNodes"]
        return set(node["assetPartitionStatuses"]["materializedPartitions"])

    def settled(self) -> bool:
        """Every run finished and a later sensor tick asked for nothing more."""
        runs = self.runs()
        if any(r["status"] not in FINISHED for r in runs):
            return False
        last_end = max((r["endTime"] or 0 for r in runs), default=0)
        return any(t["timestamp"] > last_end and t["status"] == "SKIPPED" for t in self.ticks())

    def wait_settled(self, timeout: float = 900) -> None:
        self.wait_until(self.settled, timeout, "every run to finish and the sensor to have nothing more to do")


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


BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""


def launch_all_partitions(dev: DagsterDev) -> str:
    """The backfill of every partition of the ingestion assets, as the UI's "Materialize all" launches it; its id."""
    params = {
        "allPartitions": True,
        "fromFailure": False,
        "assetSelection": [{"path": [name]} for name in INGESTION_ASSET_NAMES],
    }
    answer = dev.gql(BACKFILL, params=params)["launchPartitionBackfill"]
    assert answer["__typename"] == "LaunchBackfillSuccess", answer
    return answer["backfillId"]
