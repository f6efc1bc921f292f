"""Is an ingest's memory bounded by a run, whatever the videos? Huge valid videos through the real `pstuts ingest`.

Run from the checkout:  .venv/bin/python -m benchmarks.run_memory [--videos 3] [--phrases 100000]

The input is the audit's (issue 33): videos of 100,000 one-character phrases, each within every documented limit.
The same folder is ingested from nothing twice, side by side in one run: with every video in one run (the phrase
budget off, as before it existed) and with the default PSTUTS_MAX_PHRASES_PER_RUN. Printed: wall seconds, the
command's peak RSS (its process and children, from the kernel's accounting), runs, and the ratio of the peaks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pstuts_pipeline.settings import max_phrases_per_run

REPO = Path(__file__).resolve().parents[1]
PSTUTS = Path(sys.executable).with_name("pstuts")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def huge_videos(folder: Path, videos: int, phrases: int) -> None:
    """`videos` videos of `phrases` one-character phrases, one second each, in one PsTuts JSON file."""
    records = [
        {
            "video_id": 7000 + v,
            "title": f"Huge video {v}",
            "url": f"https://example.com/{v}.mp4",
            "transcripts": [
                {"sent_id": i, "sent": LETTERS[(i * 7 + v) % 26], "begin": float(i), "end": i + 0.9}
                for i in range(phrases)
            ],
            "qa": [],
        }
        for v in range(videos)
    ]
    (folder / "huge.json").write_text(json.dumps(records))


def measured_ingest(data: Path, budget: int) -> dict[str, float]:
    """One `pstuts ingest` from nothing in its own process; its peak RSS as the kernel counted it."""
    with tempfile.TemporaryDirectory(prefix="pstuts-run-memory-") as storage:
        env = {
            **os.environ,
            "PSTUTS_DATA_DIR": str(data),
            "PSTUTS_STORAGE_DIR": storage,
            "DAGSTER_HOME": str(Path(storage) / "dagster_home"),
            "PSTUTS_MAX_PHRASES_PER_RUN": str(budget),
            "PSTUTS_SETTLE_S": "0",
        }
        script = (
            "import resource, subprocess, sys, json, time;"
            "t = time.perf_counter();"
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024;"
            "print(json.dumps({'code': done.returncode, 'seconds': time.perf_counter() - t, 'peak_mb': peak,"
            " 'tail': done.stderr[-600:]}))"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(PSTUTS), "ingest"], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=3)
    parser.add_argument("--phrases", type=int, default=100_000)
    args = parser.parse_args()
    print(f"{args.videos} videos of {args.phrases:,} one-character phrases; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="pstuts-run-memory-data-") as folder:
        data = Path(folder)
        huge_videos(data, args.videos, args.phrases)
        past = time.time() - 60
        os.utime(data / "huge.json", (past, past))
        rows = {
            "one run (no phrase budget)": measured_ingest(data, 10**9),
            "default budget": measured_ingest(data, max_phrases_per_run()),
        }
    print(f"{'':28} {'exit':>4} {'seconds':>8} {'peak RSS MB':>12}")
    for name, row in rows.items():
        print(f"{name:28} {row['code']:>4} {row['seconds']:>8.1f} {row['peak_mb']:>12,.0f}")
        if row["code"]:
            print("   ", row["tail"].replace("\n", "\n    "))
    before, after = rows["one run (no phrase budget)"], rows["default budget"]
    print(f"peak with the budget / without: {after['peak_mb'] / before['peak_mb']:.2f}x")


if __name__ == "__main__":
    main()
