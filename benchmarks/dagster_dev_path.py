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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pstuts_pipeline_tests.support.dagster_dev import DagsterDev
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR, link_into
from pstuts_pipeline_tests.support.workspace import Workspace, load, machine


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
