"""Is an ingest's memory bounded by a run, whatever the videos? Huge valid videos through the real `pstuts ingest`.

Run from the checkout:  .venv/bin/python -m benchmarks.run_memory [--videos 3] [--phrases 100000]

The input is the audit's (issue 33): videos of many one-character phrases (100,000 there), each within every
documented limit. Each row ingests from nothing, side by side in one run: one such video alone; all of them in one
run (the phrase budget off, as before it existed); all of them with PSTUTS_MAX_PHRASES_PER_RUN at one video's
phrases (one video per run). Bounded means the last row's peak is the first row's, not the second's. Printed: wall
seconds and the command's peak RSS (its process and children, from the kernel's accounting).
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


def measured_ingest(data: Path, budget: int, models: Path) -> dict:
    """One `pstuts ingest` from nothing in its own process; its peak RSS as the kernel counted it."""
    with tempfile.TemporaryDirectory(prefix="pstuts-run-memory-") as storage:
        env = {
            **os.environ,
            "PSTUTS_DATA_DIR": str(data),
            "PSTUTS_STORAGE_DIR": storage,
            "DAGSTER_HOME": str(Path(storage) / "dagster_home"),
            "PSTUTS_MAX_PHRASES_PER_RUN": str(budget),
            "PSTUTS_SETTLE_S": "0",
            # Shared and made before the rows: a first use exports the ONNX model, which costs more than any run.
            "PSTUTS_ONNX_MODELS_DIR": str(models),
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
    rows = {}
    with tempfile.TemporaryDirectory(prefix="pstuts-run-memory-data-") as folder:
        models = Path(folder) / "onnx_models"
        warm = Path(folder) / "warm"
        warm.mkdir()
        huge_videos(warm, 1, 10)
        measured_ingest(warm, 10**9, models)
        for name, videos, budget in (
            ("1 video", 1, 10**9),
            (f"{args.videos} videos, one run", args.videos, 10**9),
            (f"{args.videos} videos, one per run", args.videos, args.phrases),
        ):
            data = Path(folder) / name.replace(" ", "_").replace(",", "")
            data.mkdir()
            huge_videos(data, videos, args.phrases)
            past = time.time() - 60
            os.utime(data / "huge.json", (past, past))
            rows[name] = measured_ingest(data, budget, models)
    print(f"{'':28} {'exit':>4} {'seconds':>8} {'peak RSS MB':>12}")
    for name, row in rows.items():
        print(f"{name:28} {row['code']:>4} {row['seconds']:>8.1f} {row['peak_mb']:>12,.0f}")
        if row["code"]:
            print("   ", row["tail"].replace("\n", "\n    "))
    alone, together, apart = rows.values()
    print(f"peak one per run / one video alone: {apart['peak_mb'] / alone['peak_mb']:.2f}x")
    print(f"peak all in one run / one video alone: {together['peak_mb'] / alone['peak_mb']:.2f}x")


if __name__ == "__main__":
    main()
