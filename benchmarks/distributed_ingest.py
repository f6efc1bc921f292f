"""`pstuts ingest` of train + dev (65 videos) in-process against Celery with 1 and 2 workers, in one run.

Run from the checkout:  .venv/bin/python -m benchmarks.distributed_ingest [--json out.json]

Each mode starts from nothing (a fresh storage folder: an empty Qdrant and embedding cache). In-process: `pstuts
ingest` as a child process. Celery: a fresh cluster (pstuts_pipeline_tests/support/cluster.py: Redis, PostgreSQL, N
`dagster-celery worker` with one pool process each (`-c 1`)), then `pstuts ingest` with PSTUTS_EXECUTOR=celery. For
every process: wall seconds of the ingest, CPU seconds spent during it (the ingest child by wait4; workers, Redis
and PostgreSQL with their reaped children by psutil, after minus before), and peak RSS (wait4's ru_maxrss; VmHWM of
each server process since it started, so a worker's includes its model load). The machine is shared: the load
average is printed with the results.
"""

import argparse
import json
import os
import time
from pathlib import Path

import psutil

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR, link_into
from pstuts_pipeline_tests.support.workspace import Run, Workspace, load, pstuts_command, run_child


def tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(process: psutil.Process) -> float:
    """CPU of a process, its live children (a worker's pool process) and the children it reaped (PostgreSQL's)."""
    total = 0.0
    for member in tree(process):
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def peak_rss_mb(process: psutil.Process) -> float:
    """The largest VmHWM (most resident memory since it started) of the process and its live children."""
    peaks = [0.0]
    for member in tree(process):
        try:
            status = Path(f"/proc/{member.pid}/status").read_text()
        except OSError:
            continue
        peaks += [int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")]
    return max(peaks)


def cluster_processes(cluster) -> dict[str, psutil.Process]:  # noqa: ANN001 - cluster.CeleryCluster, imported late
    """The cluster's long-lived processes by role: each worker (with its pool process), redis-server, the postmaster."""
    found = {w.name: psutil.Process(w.pid) for w in cluster.workers}
    redis_port = cluster.env["PSTUTS_CELERY_BROKER"].rsplit(":", 1)[1].split("/")[0]
    pg_port = cluster.env["DAGSTER_PG_PORT"]
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "redis-server" in line and f":{redis_port}" in line:
            found["redis-server"] = process
        elif line.split(" ")[0].endswith("/postgres") and f"-p {pg_port}" in line:
            found["postgres"] = process
    return found


def measure_celery(files: list[Path], root: Path, workers: int) -> list[dict]:
    """A fresh cluster with `workers` workers, then `pstuts ingest` on it: one row per process."""
    from pstuts_pipeline_tests.support.cluster import celery_cluster

    with celery_cluster(workers) as cluster:
        link_into(cluster.root / "data", files)
        processes = cluster_processes(cluster)
        before = {name: cpu_seconds(p) for name, p in processes.items()}
        run = run_child(f"celery_{workers}", [*pstuts_command(), "ingest"], cluster.env, root)
        rows = [row(run.name, "pstuts ingest (the executor loop)", run)]
        for name, process in processes.items():
            cpu = round(cpu_seconds(process) - before[name], 2)
            rows.append(
                {
                    "mode": run.name,
                    "process": name,
                    "wall_s": "",
                    "cpu_s": cpu,
                    "peak_rss_mb": round(peak_rss_mb(process), 1),
                }
            )
    return rows


def row(mode: str, process: str, run: Run) -> dict:
    return {
        "mode": mode,
        "process": process,
        "wall_s": run.seconds,
        "cpu_s": run.cpu_seconds,
        "peak_rss_mb": run.peak_rss_mb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--root", type=Path, default=Path("/tmp/pstuts-distributed-bench"))
    args = parser.parse_args()
    files = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"PsTuts-VQA files missing: {missing} (PSTUTS_VQA_DIR)")
    args.root.mkdir(parents=True, exist_ok=True)
    results: dict = {
        "load_before": load(),
        "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }

    print("| mode | process | wall s | CPU s | peak RSS MB |\n| --- | --- | ---: | ---: | ---: |", flush=True)
    rows: list[dict] = []

    def done(new: list[dict]) -> None:
        """Print and save each mode as it ends: on a busy machine the run is long."""
        rows.extend(new)
        for r in new:
            print(f"| {r['mode']} | {r['process']} | {r['wall_s']} | {r['cpu_s']} | {r['peak_rss_mb']} |", flush=True)
        if args.json:
            args.json.write_text(json.dumps({**results, "rows": rows, "load_now": load()}, indent=2))

    space = Workspace(args.root, "in_process")
    space.link(files)
    done(
        [
            row(
                "in_process",
                "pstuts ingest (every step)",
                run_child("in_process", [*pstuts_command(), "ingest"], space.env(), space.logs),
            )
        ]
    )
    for workers in (1, 2):
        done(measure_celery(files, args.root, workers))
    print(f"started {results['started']}, {results['cpus']} CPUs, load before {results['load_before']}, after {load()}")


if __name__ == "__main__":
    main()
