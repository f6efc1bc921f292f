"""A local Celery cluster for trying the distributed path by hand: Redis, PostgreSQL and N dagster-celery workers.

    .venv/bin/python scripts/celery_cluster.py up [--workers 2] &   # prints the settings to export, then waits
    eval "$(.venv/bin/python scripts/celery_cluster.py env)"         # this shell now talks to the cluster
    pstuts ingest                                                     # steps run on the workers
    dagster-daemon run -f deploy/celery/definitions.py                # the sensor launches runs onto them
    .venv/bin/python scripts/celery_cluster.py down                  # stops everything, removes its folder

Each service runs on a free port in one temporary folder (pstuts_pipeline_tests/support/cluster.py, which the tests
use, imported from the installed project: `make setup` installs it editable);
`up` holds them until `down` (or Ctrl-C, or SIGTERM) and then stops every process group it started.
"""

import argparse
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

STATE = Path(tempfile.gettempdir()) / "pstuts-celery-cluster.json"
EXPORTED = ("DAGSTER_HOME", "DAGSTER_PG_", "PSTUTS_", "PATH")


def up(workers: int) -> None:
    """Start the cluster, write where it is to STATE, and hold it until SIGTERM or Ctrl-C."""
    from pstuts_pipeline_tests.support.cluster import celery_cluster

    if STATE.exists():
        raise SystemExit(f"a cluster is already up ({STATE}); `{sys.argv[0]} down` first")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with celery_cluster(workers) as cluster:
            env = {k: v for k, v in cluster.env.items() if k.startswith(EXPORTED)}
            STATE.write_text(json.dumps({"pid": os.getpid(), "root": str(cluster.root), "env": env}))
            print(
                f"cluster up in {cluster.root}: {workers} workers; `{sys.argv[0]} env` prints its settings", flush=True
            )
            try:
                while not stop.wait(1):
                    pass
            except KeyboardInterrupt:
                pass
    finally:  # removed once everything has stopped: `down` waits for it
        STATE.unlink(missing_ok=True)
    print("cluster down", flush=True)


def down() -> None:
    """Ask the `up` process to stop the cluster, and wait until it has."""
    if not STATE.exists():
        print("no cluster is up")
        return
    pid = json.loads(STATE.read_text())["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        STATE.unlink(missing_ok=True)
        return
    deadline = time.monotonic() + 120
    while STATE.exists() and time.monotonic() < deadline:
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "env"])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.command == "up":
        up(args.workers)
    elif args.command == "down":
        down()
    else:
        if not STATE.exists():
            raise SystemExit("no cluster is up")
        for name, value in json.loads(STATE.read_text())["env"].items():
            print(f"export {name}={shlex.quote(value)}")


if __name__ == "__main__":
    main()
