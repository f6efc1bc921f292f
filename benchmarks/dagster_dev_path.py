"""The path users run, measured as they run it: `dagster dev` + files dropped into the watched folder, vs `pstuts ingest`.

Run from the checkout:  .venv/bin/python -m benchmarks.dagster_dev_path [--rounds 3] [--train-videos 11] [--json out.json]

Each round, in alternating order, with fresh folders (fresh DAGSTER_HOME, Qdrant folder and embedding cache):
  (a) `pstuts ingest` of dev.json plus `--train-videos` videos of train.json (two files), timed as a child process
      (wall time and its peak RSS by wait4);
  (b) `pstuts dev` (`make dev`: `dg dev`, webserver + daemon + code server) on an empty data
      folder; once the code location is loaded, the same two files are dropped in together and the clock runs
      until every partition of `qdrant_collection` is materialized. The RSS of the whole `dagster dev` process
      tree (webserver, daemon, code server, run workers) is sampled every 0.5 s; its peak is reported.
Then the two paths must agree: (c) `pstuts ingest` right after (b), over (b)'s home and store, ingests nothing;
(d) `dagster dev` started over the home and store (a) filled requests no ingest run within two sensor ticks.
Goals (issue 13): (b) <= 2 x (a) + 90 s, peak RSS of the tree <= 4 GB. The machine is shared: the load average
is printed; compare medians of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
from pathlib import Path

import psutil

from benchmarks.ingest_speed import PSTUTS_DIR, REPO, Workspace, load, machine, pstuts_command
from benchmarks.pstuts_vqa import link_into

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


def http_json(url: str, payload: dict | None = None, timeout: float = 60) -> dict:
    import urllib.request

    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.load(answer)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def write_files(folder: Path, train_videos: int) -> list[Path]:
    """dev.json and the first `train_videos` videos of train.json, as two files to drop in together."""
    folder.mkdir(parents=True, exist_ok=True)
    dev = folder / "dev.json"
    dev.write_text((PSTUTS_DIR / "dev.json").read_text())
    train = folder / "train_part.json"
    train.write_text(json.dumps(json.loads((PSTUTS_DIR / "train.json").read_text())[:train_videos]))
    return [dev, train]


def video_keys(files: list[Path]) -> set[str]:
    return {str(v["video_id"]) for f in files for v in json.loads(f.read_text())}


def drop_caches() -> bool:
    """Ask the kernel to drop the page cache (root only), so model weights and imports start cold."""
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def cli_round(root: Path, files: list[Path], name: str) -> dict:
    space = Workspace(root, name)
    space.link(files)
    cold = drop_caches()
    run = space.ingest(name)
    assert run.details["videos_ingested"] == len(video_keys(files)), run.output[-2000:]
    return {"seconds": run.seconds, "peak_rss_mb": run.peak_rss_mb, "cold": cold, "space": space}


def dev_round(root: Path, files: list[Path], name: str) -> dict:
    space = Workspace(root, name)
    drop_caches()
    with DagsterDev(space.env(), space.logs / "dagster_dev.log") as dev:
        started_at = time.perf_counter()
        link_into(space.data, files)  # dropped in together, as a user copies two files
        wanted = video_keys(files)
        dev.wait_until(lambda: wanted <= dev.materialized(), 3600, f"all {len(wanted)} partitions of qdrant_collection")
        seconds = time.perf_counter() - started_at
        dev.wait_settled()
        runs = dev.runs()
        peak = dev.peak_rss_mb
    again = space.ingest(f"{name}-cli-after")
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peak, 1),
        "ingest_runs": sum(r["jobName"] == "ingest_videos" for r in runs),
        "runs": len(runs),
        "cli_after_ingested": again.details["videos_ingested"],
    }


def restart_over_cli_home(space: Workspace) -> int:
    """Start dagster dev over a home `pstuts ingest` filled; the ingest runs it launches in two sensor ticks."""
    with DagsterDev(space.env(), space.logs / "dagster_dev_over_cli.log") as dev:
        dev.wait_until(lambda: len(dev.ticks()) >= 2, 300, "two sensor ticks")
        dev.wait_settled()
        return sum(r["jobName"] == "ingest_videos" and r["tags"].get("pstuts/trigger") != "cli" for r in dev.runs())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train-videos", type=int, default=11)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pstuts-dev-bench-"))
    files = write_files(root / "files", args.train_videos)
    cli, dev = [], []
    for number in range(args.rounds):
        order = ("cli", "dev") if number % 2 == 0 else ("dev", "cli")
        for path in order:
            if path == "cli":
                cli.append(cli_round(root, files, f"cli-{number}"))
            else:
                dev.append(dev_round(root, files, f"dev-{number}"))
            print(f"round {number + 1} {path}: {(cli if path == 'cli' else dev)[-1] | {'space': None}}", flush=True)
    over_cli = restart_over_cli_home(cli[-1]["space"])
    cli_s = statistics.median(r["seconds"] for r in cli)
    dev_s = statistics.median(r["seconds"] for r in dev)
    results = {
        "machine": machine(),
        "load_after": load(),
        "videos": len(video_keys(files)),
        "rounds": args.rounds,
        "cli_seconds_median": cli_s,
        "cli_peak_rss_mb": max(r["peak_rss_mb"] for r in cli),
        "dev_seconds_median": dev_s,
        "dev_tree_peak_rss_mb": max(r["peak_rss_mb"] for r in dev),
        "dev_vs_cli": round(dev_s / cli_s, 2),
        "goal_seconds": round(2 * cli_s + 90, 1),
        "dev_ingest_runs": [r["ingest_runs"] for r in dev],
        "cli_after_dev_ingested": [r["cli_after_ingested"] for r in dev],
        "dev_over_cli_home_ingest_runs": over_cli,
        "page_cache_dropped": all(r["cold"] for r in cli),
    }
    print(f"\n| {results['videos']} videos, {args.rounds} rounds, medians | seconds | peak RSS MB |")
    print("| --- | ---: | ---: |")
    print(f"| `pstuts ingest` | {cli_s:.1f} | {results['cli_peak_rss_mb']:,.0f} (process) |")
    print(f"| `dagster dev` + files dropped in | {dev_s:.1f} | {results['dev_tree_peak_rss_mb']:,.0f} (whole tree) |")
    print(f"\ndagster dev / CLI: {results['dev_vs_cli']}x (goal: <= {results['goal_seconds']} s = 2 x CLI + 90 s)")
    print(
        f"ingest runs per dagster dev round: {results['dev_ingest_runs']}; `pstuts ingest` right after ingested "
        f"{results['cli_after_dev_ingested']} videos; dagster dev over the CLI's home launched {over_cli} ingest runs"
    )
    print(f"load average after: {results['load_after']}; machine: {results['machine']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
