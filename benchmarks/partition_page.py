"""The Dagster UI's partition page of qdrant_collection at 65, 1,000 and 10,000 videos, in a real browser.

Run from the checkout:  .venv/bin/python -m benchmarks.partition_page [--sizes 65,1000,10000] [--rounds 3]

For each size, a fresh DAGSTER_HOME with the project's instance settings gets that many video partitions and one
materialization of qdrant_collection per partition (runless events: what the UI reads is the same as after runs);
`dagster-webserver` then serves the project's code location, and headless chromium (Debian's, through Playwright)
opens `/assets/qdrant_collection?view=partitions` in a fresh page each round and waits until the page shows every
partition as materialized ("Materialized (N)"). Reported per size: the median seconds until then, the webserver's peak RSS, and the time to fill
the instance. Sizes run one after the other in one run, so their figures compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.ask_page import child
from pstuts_pipeline_tests.support.browser import CHROMIUM_FLAGS
from pstuts_pipeline_tests.support.servers import free_port
from pstuts_pipeline_tests.support.workspace import load, machine

PAGE = "/assets/qdrant_collection?view=partitions"


def fill_home(home: Path, videos: int) -> float:
    """A Dagster home holding `videos` video partitions, each materialized once; the seconds it took."""
    started = time.perf_counter()
    code = f"""
import dagster as dg
from pstuts_pipeline.defs.instance import prepare_home
from pathlib import Path
prepare_home(Path({str(home)!r}))
with dg.DagsterInstance.from_config({str(home)!r}) as instance:
    keys = [str(1_000_000 + n) for n in range({videos})]
    instance.add_dynamic_partitions("videos", keys)
    for key in keys:
        instance.report_runless_asset_event(dg.AssetMaterialization("qdrant_collection", partition=key))
"""
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "DAGSTER_HOME": str(home)})
    return time.perf_counter() - started


def page_seconds(browser, url: str, videos: int, timeout_s: float = 300) -> float:  # noqa: ANN001
    """Seconds from opening the partition page until it counts every partition as materialized."""
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    try:
        started = time.perf_counter()
        page.goto(url + PAGE)
        shown = (f"Materialized ({videos:,})", f"Materialized ({videos})")  # the status filter, once counted
        deadline = started + timeout_s
        while not any(text in page.inner_text("body") for text in shown):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{url}{PAGE} did not show {shown} within {timeout_s} s")
            time.sleep(0.1)
        return time.perf_counter() - started
    finally:
        page.close()


def measure(root: Path, videos: int, rounds: int, browser) -> dict:  # noqa: ANN001
    home = root / f"home_{videos}"
    fill_s = fill_home(home, videos)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PSTUTS_STORAGE_DIR": str(root / f"storage_{videos}"),
        "PSTUTS_DATA_DIR": str(root / "data"),
    }
    command = [str(Path(sys.executable).parent / "dagster-webserver"), "-m", "pstuts_pipeline.definitions"]
    command += ["-h", "127.0.0.1", "-p", str(port)]
    log = root / f"webserver_{videos}.log"
    with child(command, env, log, f"{url}/server_info", "dagster-webserver") as server:
        seconds = [page_seconds(browser, url, videos) for _ in range(rounds)]
        rss = psutil.Process(server.pid).memory_info().rss / 2**20
    return {
        "videos": videos,
        "page_s_median": round(statistics.median(seconds), 2),
        "page_s": [round(s, 2) for s in seconds],
        "webserver_rss_mb": round(rss),
        "fill_s": round(fill_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="65,1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Debian's chromium is needed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="partition_page_"))
    (root / "data").mkdir()
    results: dict = {"machine": machine(), "load_before": load(), "sizes": []}
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
            try:
                for videos in (int(s) for s in args.sizes.split(",")):
                    row = measure(root, videos, args.rounds, browser)
                    results["sizes"].append(row)
                    print(json.dumps(row), flush=True)
            finally:
                browser.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results["load_after"] = load()
    print(f"{'videos':>8} {'page s (median)':>16} {'webserver MB':>13} {'fill s':>7}")
    for row in results["sizes"]:
        print(f"{row['videos']:>8,} {row['page_s_median']:>16} {row['webserver_rss_mb']:>13,} {row['fill_s']:>7}")
    print(f"load average before / after: {results['load_before']} / {results['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
