"""What the folder sensor's tick costs when there is nothing to do: with its cursor, and without it.

Run from the checkout:  .venv/bin/python -m benchmarks.sensor_tick [--sizes 65,1000] [--repeats 9] [--json out.json]

The corpus is built as benchmarks/store_growth.py builds it: the 65 real videos (train.json + dev.json) ingested fresh
with `pstuts ingest`; a larger size adds copies of them written by its fast path (the originals' vectors), registered
with `pstuts register`, then confirmed by a `pstuts ingest` that has nothing to do (and writes the ledger). Then, in a
fresh process, the sensor function itself (`transcript_folder_sensor`, as the daemon calls it, without the daemon's
gRPC hop) is evaluated `--repeats` times in each of three ways (the first two interleaved):
  cursor      the cursor a settled tick left: the tick compares the folder's and the store's stat signature only;
  ledger      no cursor (what every tick did before the cursor): reconcile, proven unchanged by the ingest ledger;
  no ledger   no cursor and no ledger (a store the ledger cannot vouch for): the folder read, Qdrant opened.
Each tick must ask for nothing. Medians in milliseconds, side by side; the machine is shared (load average printed).
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.store_growth import COPIES_PER_FILE, FILES, bulk_write, copies_file, templates
from pstuts_pipeline_tests.support.workspace import Workspace, pstuts_command, run_child

MODES = ("cursor", "ledger", "no ledger")


def worker(repeats: int) -> None:
    """In a fresh process over the workspace's home: `repeats` no-op ticks per mode; print milliseconds per mode."""
    import dagster as dg

    from pstuts_pipeline.defs.resources import resources_from_env
    from pstuts_pipeline.defs.sensors import build_folder_sensor
    from pstuts_pipeline.sources.ledger import LEDGER_FILE

    resources = resources_from_env()
    sensor = build_folder_sensor()
    with dg.DagsterInstance.get() as instance:
        ledger = Path(instance.root_directory) / LEDGER_FILE

        def tick(cursor: str | None) -> tuple[float, dg.SensorResult | dg.SkipReason]:
            with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as context:
                started = time.perf_counter()
                result = sensor(context)
                return (time.perf_counter() - started) * 1000, result

        _, first = tick(None)  # warms imports and caches; its cursor is the settled one the daemon would keep
        assert isinstance(first, dg.SensorResult) and not first.run_requests, first
        cursor = first.cursor
        assert json.loads(cursor).get("signature"), f"the tick did not settle: {first.skip_reason}"
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        said: dict[str, str] = {}
        # Cursor and ledger ticks open nothing; a tick without the ledger opens the store, which may touch its files
        # and so end both proofs: those ticks come last.
        for mode in [m for _ in range(repeats) for m in MODES[:2]] + [MODES[2]] * repeats:
            if mode == "no ledger":
                ledger.unlink(missing_ok=True)
            seconds, result = tick(cursor if mode == "cursor" else None)
            asked = result.run_requests if isinstance(result, dg.SensorResult) else []
            assert not asked, f"{mode}: a tick with nothing to do asked for {asked}"
            reason = result if isinstance(result, dg.SkipReason) else result.skip_reason
            said[mode] = reason.skip_message if reason else ""
            times[mode].append(seconds)
        assert isinstance(result, dg.SensorResult), "without a cursor the tick reconciles"
        assert said["cursor"].startswith("unchanged since the last look"), said
        assert said["ledger"].endswith("(files untouched)"), said
        assert not said["no ledger"].endswith("(files untouched)"), said
    print(json.dumps({"median_ms": {m: round(statistics.median(t), 1) for m, t in times.items()}, "said": said}))


def grow(space: Workspace, originals: list[dict], copies: int, size: int) -> int:
    """Add copies until the folder holds `size` videos, stored and registered as an ingest would leave them."""
    bulk = size - len(originals) - copies
    files = [
        copies_file(space.data, originals, copies + start, min(COPIES_PER_FILE, bulk - start))
        for start in range(0, bulk, COPIES_PER_FILE)
    ]
    written = bulk_write(space, files, templates(space))
    run_child(f"register-{size}", [*pstuts_command(), "register"], space.env(), space.logs)
    return copies + written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="65,1000")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pstuts-sensor-tick"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        return worker(args.repeats)

    originals = [v for f in FILES for v in json.loads(f.read_text())]
    space = Workspace(args.work, "corpus")
    space.link(FILES)
    fresh = space.ingest("fresh-real")
    assert fresh.details["videos_ingested"] == len(originals), fresh.output[-2000:]
    rows, copies = [], 0
    for size in sorted(int(s) for s in args.sizes.split(",")):
        if size > len(originals) + copies:
            copies = grow(space, originals, copies, size)
        noop = space.ingest(f"noop-{size}")  # nothing to do; leaves the ledger a tick can trust
        assert noop.details["videos_ingested"] == 0, noop.output[-2000:]
        run = run_child(
            f"ticks-{size}",
            [sys.executable, "-m", "benchmarks.sensor_tick", "--worker", "--repeats", str(args.repeats)],
            space.env(),
            space.logs,
        )
        rows.append({"videos": len(originals) + copies, **json.loads(run.output.strip().splitlines()[-1])})
        print(json.dumps(rows[-1]), flush=True)
    print(f"\nno-op sensor tick, median of {args.repeats} (ms); load average {os.getloadavg()}")
    print(f"{'videos':>7} " + " ".join(f"{m:>10}" for m in MODES))
    for row in rows:
        print(f"{row['videos']:>7} " + " ".join(f"{row['median_ms'][m]:>10}" for m in MODES))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load_average": os.getloadavg()}, indent=1))
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
