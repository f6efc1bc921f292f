"""`pstuts ingest` of train + dev (65 videos) from nothing: in-process on one core, Celery on 1 and 2 pinned workers.

Each worker is pinned to a core of its own, so two workers stand for two machines.

Run from the checkout:  .venv/bin/python -m benchmarks.distributed_ingest [--rounds 3] [--json out.json]

Each round runs the three modes one after another, each from nothing (a fresh storage folder: an empty Qdrant and
embedding cache). The model's one-time ONNX export is outside every mode's time: Celery workers make it when they start,
before they take steps (pstuts_pipeline/defs/celery_app.py), and the in-process mode's folder gets it the same way,
by importing the workers' app before the timed ingest. In-process: `pstuts ingest` under `taskset -c <first core>` with one thread
(OMP/MKL/OpenBLAS at 1; ONNX Runtime takes the process's affinity), the project's default run size (one run).
Celery: a fresh cluster (pstuts_pipeline_tests/support/cluster.py: Redis, PostgreSQL, N `dagster-celery worker` with one
pool process each, worker i under `taskset -c <core i>` with one thread), then `pstuts ingest` with
PSTUTS_EXECUTOR=celery and PSTUTS_MIN_RUNS_PER_INGEST=--runs, so the ingest is that many runs of about equal work,
executed at once.
The CLI, Redis and PostgreSQL are not pinned: on this 2-core machine they share the workers' cores (on real machines
they would have their own).

Printed: one row per process and round (wall s of the ingest; CPU s spent during it: the ingest child by wait4,
workers, Redis and PostgreSQL with their reaped children by psutil; peak RSS), where each Celery ingest's time went
(from its runs' event logs), then the medians over the rounds with the ratios the goal is about, and the load
average beside each figure. The Qdrant-server variant runs when QDRANT_URL is set, and is skipped with the reason
otherwise.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.workspace import Run, Workspace, load, pstuts_command, run_child

VIDEOS = 65
# A server no process here can start: Qdrant is not on PyPI, npm or Debian (docs/operations-distributed.md).
NO_SERVER = "skipped: no Qdrant server is reachable (QDRANT_URL unset; none can be installed on this machine)"


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


def where_time_went(home: Path, env: dict[str, str]) -> dict[str, float]:
    """From the ingest's runs' event logs: steps, step seconds (the worker's own time in steps), queue wait (a step
    submitted until a worker starts it), run start (created until its first step is submitted), events stored."""
    import dagster as dg

    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("DAGSTER_", "PSTUTS_"))})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            steps = step_s = wait_s = start_s = events = 0.0
            for run in instance.get_runs(filters=dg.RunsFilter(job_name="ingest_videos")):
                logs = instance.all_logs(run.run_id)
                events += len(logs)
                created = instance.get_run_record_by_id(run.run_id).create_timestamp.timestamp()
                submitted: dict[str, float] = {}
                for entry in logs:
                    event, key = entry.dagster_event, entry.step_key
                    if event is None:
                        continue
                    if event.event_type == dg.DagsterEventType.ENGINE_EVENT and entry.message.startswith("Submitting"):
                        start_s += 0 if submitted else entry.timestamp - created
                        submitted[key] = entry.timestamp
                    elif event.event_type == dg.DagsterEventType.STEP_START and key in submitted:
                        wait_s += entry.timestamp - submitted[key]
                        steps += 1
                    elif event.event_type == dg.DagsterEventType.STEP_SUCCESS:
                        step_s += event.event_specific_data.duration_ms / 1000
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {
        "steps": steps,
        "step_s": round(step_s, 1),
        "queue_wait_s": round(wait_s, 1),
        "run_start_s": round(start_s, 1),
        "events": events,
    }


def measure_celery(files: list[Path], workers: int, runs: int, settings: dict[str, str]) -> dict:
    """A fresh cluster with `workers` pinned workers, then `pstuts ingest` on it: one row per process."""
    from pstuts_pipeline_tests.support.cluster import celery_cluster

    name = f"celery_{workers}w" + ("_server" if "QDRANT_URL" in settings else "")
    settings = {"PSTUTS_MIN_RUNS_PER_INGEST": str(runs), "PSTUTS_ALLOW_LINKS_OUTSIDE": "1", **settings}
    with celery_cluster(workers, settings=settings, pinned=True) as cluster:
        (cluster.root / "data").mkdir(exist_ok=True)
        for f in files:
            (cluster.root / "data" / f.name).symlink_to(f.resolve())
        processes = cluster_processes(cluster)
        before = {role: cpu_seconds(p) for role, p in processes.items()}
        load_before = load()
        run = run_child(name, [*pstuts_command(), "ingest"], cluster.env, cluster.root)
        rows = [row(name, "pstuts ingest (the executor loops)", run)]
        for role, process in processes.items():
            cpu = round(cpu_seconds(process) - before[role], 2)
            rows.append(
                {"mode": name, "process": role, "wall_s": "", "cpu_s": cpu, "peak_rss_mb": round(peak_rss_mb(process))}
            )
        breakdown = where_time_went(cluster.home, cluster.env)
    return {"mode": name, "wall_s": run.seconds, "load": load_before, "rows": rows, "breakdown": breakdown}


def measure_in_process(files: list[Path], root: Path) -> dict:
    """`pstuts ingest` in one process on one core, one thread."""
    from pstuts_pipeline_tests.support.cluster import ONE_THREAD

    space = Workspace(root, "in_process")
    space.link(files)
    core = str(sorted(os.sched_getaffinity(0))[0])
    # The ONNX export, made as a worker makes it at start: a one-time cost that no Celery mode's time includes.
    prepare = ["taskset", "-c", core, sys.executable, "-c", "import pstuts_pipeline.defs.celery_app"]
    subprocess.run(prepare, env=space.env() | ONE_THREAD, check=True, capture_output=True)
    load_before = load()
    run = run_child("in_process", ["taskset", "-c", core, *pstuts_command(), "ingest"], space.env() | ONE_THREAD, root)
    return {
        "mode": "in_process",
        "wall_s": run.seconds,
        "load": load_before,
        "rows": [row("in_process", "pstuts ingest (every step, 1 core)", run)],
    }


def row(mode: str, process: str, run: Run) -> dict:
    return {
        "mode": mode,
        "process": process,
        "wall_s": run.seconds,
        "cpu_s": run.cpu_seconds,
        "peak_rss_mb": run.peak_rss_mb,
    }


def summary(results: list[dict]) -> dict:
    """Medians per mode, throughput (videos/s) and the two ratios of the goal."""
    walls: dict[str, list[float]] = {}
    for r in results:
        walls.setdefault(r["mode"], []).append(r["wall_s"])
    medians = {mode: statistics.median(values) for mode, values in walls.items()}
    ratios = {}
    if {"celery_1w", "celery_2w"} <= set(medians):
        ratios["2 workers / 1 worker throughput (goal >= 1.7)"] = round(medians["celery_1w"] / medians["celery_2w"], 2)
    if {"celery_1w", "in_process"} <= set(medians):
        ratios["1 worker / in-process wall (goal <= 1.3)"] = round(medians["celery_1w"] / medians["in_process"], 2)
    return {
        "walls": walls,
        "medians": medians,
        "videos_per_s": {m: round(VIDEOS / s, 2) for m, s in medians.items()},
        "ratios": ratios,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2, help="PSTUTS_MIN_RUNS_PER_INGEST of the Celery modes")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--root", type=Path, default=Path("/tmp/pstuts-distributed-bench"))
    args = parser.parse_args()
    files = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"PsTuts-VQA files missing: {missing} (PSTUTS_VQA_DIR)")
    args.root.mkdir(parents=True, exist_ok=True)
    server = os.environ.get("QDRANT_URL")
    info = {
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_before": load(),
    }
    info |= {"runs": args.runs, "qdrant_server": server or NO_SERVER}
    results: list[dict] = []

    def done(result: dict) -> None:
        """Print and save each mode as it ends: on a busy machine the run is long."""
        results.append(result)
        for r in result["rows"]:
            print(f"| {r['mode']} | {r['process']} | {r['wall_s']} | {r['cpu_s']} | {r['peak_rss_mb']} |", flush=True)
        print(f"  load before {result['load']}; {result.get('breakdown', '')}", flush=True)
        if args.json:
            args.json.write_text(json.dumps({**info, "results": results, "summary": summary(results)}, indent=2))

    print("| mode | process | wall s | CPU s | peak RSS MB |\n| --- | --- | ---: | ---: | ---: |", flush=True)
    for number in range(1, args.rounds + 1):
        print(f"round {number}/{args.rounds}, load {load()}", flush=True)
        done(measure_in_process(files, args.root))
        for workers in (1, 2):
            done(measure_celery(files, workers, args.runs, {}))
            if server:  # a collection of its own each time: from nothing, on a server that outlives the cluster
                fresh = {"QDRANT_URL": server, "PSTUTS_COLLECTION": f"bench_{time.time_ns()}"}
                done(measure_celery(files, workers, args.runs, fresh))
    if not server:
        print(f"Qdrant server variant {NO_SERVER}")
    result = summary(results)
    print("\n| mode | median wall s | videos/s | rounds (wall s) |\n| --- | ---: | ---: | --- |")
    for mode, median in result["medians"].items():
        walls = ", ".join(f"{w:.1f}" for w in result["walls"][mode])
        print(f"| {mode} | {median:.1f} | {result['videos_per_s'][mode]} | {walls} |")
    for name, ratio in result["ratios"].items():
        print(f"{name}: {ratio}")
    print(f"started {info['started']}, {info['cpus']} CPUs, load before {info['load_before']}, after {load()}")


if __name__ == "__main__":
    main()
