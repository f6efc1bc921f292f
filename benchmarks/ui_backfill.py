"""A backfill of every partition, launched as the UI launches it, is cut into runs of at most PSTUTS_MAX_VIDEOS_PER_RUN.

Run from the checkout:  .venv/bin/python -m benchmarks.ui_backfill [--videos-per-run 10] [--json out.json]

`pstuts dev` (webserver, daemon, code server) over a fresh home, with PSTUTS_MAX_VIDEOS_PER_RUN in its environment and
a sensor interval of an hour, so that the sensor's first tick (on an empty folder) is its only one. train.json and
dev.json (65 videos) are then linked into the data folder, `pstuts register` registers their partitions in the
instance, and the webserver's GraphQL `launchPartitionBackfill` (what "Materialize all" sends) asks for every
partition of the six ingestion assets. The daemon alone splits it (BackfillPolicy.multi_run): each run's partition
range is read back from the instance with its status and seconds, and every video must be stored at the end.
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import dagster as dg

from benchmarks.store_growth import FILES
from pstuts_pipeline_tests.support.dagster_dev import DagsterDev, launch_all_partitions
from pstuts_pipeline_tests.support.workspace import Workspace, pstuts_command, run_child

FINISHED = {"SUCCESS", "FAILURE", "CANCELED"}


def backfill_runs(dev: DagsterDev, backfill: str, order: list[str]) -> list[dict]:
    """The backfill's runs in partition order: first and last partition, videos, status, tags that say why."""
    runs = []
    for run in dev.runs():
        tags = run["tags"]
        if tags.get("dagster/backfill") != backfill:
            continue
        first, last = tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"]
        runs.append(
            {
                "first": first,
                "last": last,
                "videos": order.index(last) - order.index(first) + 1,
                "status": run["status"],
                "seconds": round((run["endTime"] or time.time()) - (run["startTime"] or time.time()), 1),
                "reason": tags.get("pstuts/reason"),
            }
        )
    return sorted(runs, key=lambda r: order.index(r["first"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos-per-run", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pstuts-ui-backfill"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = {"PSTUTS_MAX_VIDEOS_PER_RUN": str(args.videos_per_run), "PSTUTS_SENSOR_INTERVAL_S": "3600"}
    space = Workspace(args.work, "backfill", settings)
    started = time.perf_counter()
    with DagsterDev(space.env(), space.logs / "dagster_dev.log") as dev:
        dev.wait_until(lambda: dev.ticks(), 300, "the sensor's first tick, on the empty folder")
        space.link(FILES)
        run_child("register", [*pstuts_command(), "register"], space.env(), space.logs)
        with dg.DagsterInstance.from_config(str(space.home)) as instance:
            order = instance.get_dynamic_partitions("videos")
        backfill = launch_all_partitions(dev)
        done = lambda: (runs := backfill_runs(dev, backfill, order)) and all(r["status"] in FINISHED for r in runs)
        dev.wait_until(lambda: done() and set(dev.materialized()) >= set(order), 3600, f"backfill {backfill}")
        runs = backfill_runs(dev, backfill, order)
        sensor_runs = sum(r["tags"].get("pstuts/trigger") == "sensor" for r in dev.runs())
    covered = [k for r in runs for k in order[order.index(r["first"]) : order.index(r["last"]) + 1]]
    result = {
        "partitions": len(order),
        "videos_per_run": args.videos_per_run,
        "runs": runs,
        "largest_run": max(r["videos"] for r in runs),
        "every_partition_once": sorted(covered) == sorted(order),
        "sensor_runs": sensor_runs,
        "seconds": round(time.perf_counter() - started),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=1))
    assert result["largest_run"] <= args.videos_per_run and result["every_partition_once"], result
    assert all(r["status"] == "SUCCESS" for r in runs), runs
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
