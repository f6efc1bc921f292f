"""Does bad input ever cost a stored point? The real `pstuts ingest` after each cut, break and emptying.

Run from the checkout:  .venv/bin/python -m benchmarks.removal_sweep [--cuts 25]

dev.json (11 videos) and the sample's WebVTT video with its sidecar are ingested from nothing; then, one at a time:
dev.json cut at `--cuts` points from 0 bytes to its size, the sidecar broken five ways, the data folder emptied.
After each, `pstuts ingest` runs as a user runs it (its own process, the project's instance) and every stored point
(id, video) is compared with the first ingest's. Printed: each case's exit code, videos stored, points lost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pstuts_pipeline_tests.support import REPO
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR

PSTUTS = Path(sys.executable).with_name("pstuts")
CAPTION = "9004-sharpen-with-unsharp-mask"
SIDECAR_BREAKS = {
    "sidecar: a quote missing": lambda text: text.replace('"', "", 1),
    "sidecar: an unknown key": lambda text: text + 'titel = "typo"\n',
    "sidecar: video_id as a string": lambda text: text.replace("video_id = 9004", 'video_id = "9004"'),
    "sidecar: 100,000 levels of nesting": lambda text: text + "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "sidecar: a 5,000-digit integer": lambda text: text + "x = " + "9" * 5000 + "\n",
}


def stored_points() -> dict[str, int]:
    """Every stored point id and its video, read through the project's store (the environment names it)."""
    from pstuts_pipeline.defs.resources import resources_from_env

    found: dict[str, int] = {}
    with resources_from_env()["qdrant"].get_store(read_only=True) as store:
        offset = None
        while True:
            points, offset = store.scroll(offset=offset, with_payload=["metadata.video_id"], limit=4096)
            found |= {str(p.id): p.payload["metadata"]["video_id"] for p in points}
            if offset is None:
                return found


def ingest() -> int:
    return subprocess.run([str(PSTUTS), "ingest"], env=os.environ.copy(), capture_output=True, text=True).returncode


def settle(path: Path) -> None:
    past = time.time() - 60
    os.utime(path, (past, past))


def check(name: str, baseline: dict[str, int], rows: list[tuple[str, int, int, int]]) -> None:
    code = ingest()
    now = stored_points()
    lost = sum(1 for point in baseline if point not in now)
    rows.append((name, code, len(set(now.values())), lost))
    print(f"{name:48} exit {code}  videos {len(set(now.values())):>3}  points lost {lost}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuts", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pstuts-removal-sweep-") as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        os.environ |= {
            "PSTUTS_DATA_DIR": str(data),
            "PSTUTS_STORAGE_DIR": str(root / "storage"),
            "DAGSTER_HOME": str(root / "storage" / "dagster_home"),
        }
        dev = (PSTUTS_DIR / "dev.json").read_bytes()
        (data / "dev.json").write_bytes(dev)
        for suffix in (".vtt", ".toml"):
            shutil.copy(REPO / "data" / f"{CAPTION}{suffix}", data / f"{CAPTION}{suffix}")
        for path in data.iterdir():
            settle(path)
        started = time.perf_counter()
        assert ingest() == 0, "the first ingest failed"
        baseline = stored_points()
        print(
            f"ingested {len(set(baseline.values()))} videos, {len(baseline)} points in {time.perf_counter() - started:.0f} s"
        )
        rows: list[tuple[str, int, int, int]] = []
        for i in range(args.cuts):
            cut = round(len(dev) * i / args.cuts)
            (data / "dev.json").write_bytes(dev[:cut])
            settle(data / "dev.json")
            check(f"dev.json cut at {cut:,} of {len(dev):,} bytes", baseline, rows)
        (data / "dev.json").write_bytes(dev)
        settle(data / "dev.json")
        check("dev.json whole again", baseline, rows)
        sidecar = data / f"{CAPTION}.toml"
        good = sidecar.read_text()
        for name, broken in SIDECAR_BREAKS.items():
            sidecar.write_text(broken(good))
            settle(sidecar)
            check(name, baseline, rows)
        sidecar.write_text(good)
        settle(sidecar)
        aside = root / "aside"
        shutil.move(data, aside)
        data.mkdir()
        check("data folder emptied", baseline, rows)
        data.rmdir()
        shutil.move(aside, data)
        check("data folder back", baseline, rows)
    print(
        json.dumps(
            {
                "cases": len(rows),
                "cases that lost points": sum(1 for r in rows if r[3]),
                "points lost": sum(r[3] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
