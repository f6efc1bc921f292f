"""What one range run's `raw_transcripts` reads at a grown corpus: the whole data folder vs its own videos' files.

    python -m benchmarks.range_run_reads --videos 10000

Builds a folder of copies of the PsTuts videos (100 per file, as benchmarks.store_growth does), reconciles it once
(which records the holdings a run reads by), then times reading a run's 100 videos both ways, medians of 3.
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.store_growth import COPIES_PER_FILE, copies_file
from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline.sources.reconciliation import own_videos_catalog, reconcile_folder
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR


def timed(work) -> float:  # noqa: ANN001 - a callable
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    originals = [v for name in ("train.json", "dev.json") for v in json.loads((PSTUTS_DIR / name).read_text())]
    with tempfile.TemporaryDirectory(prefix="pstuts-range-reads-") as scratch:
        data, home = Path(scratch) / "data", Path(scratch) / "home"
        data.mkdir(), home.mkdir()
        for start in range(0, args.videos, COPIES_PER_FILE):
            copies_file(data, originals, start, min(COPIES_PER_FILE, args.videos - start))
        past = time.time() - 60
        for path in data.iterdir():
            os.utime(path, (past, past))
        catalog, _ = reconcile_folder(data, home, {}, lambda video: video.content_hash)
        run = {v.video_id for v in sorted(catalog.videos.values(), key=lambda v: v.video_id)[:COPIES_PER_FILE]}
        whole = [timed(lambda: load_catalog(data)) for _ in range(args.rounds)]
        own = [timed(lambda: own_videos_catalog(data, home, run)) for _ in range(args.rounds)]
    print(f"{args.videos:,} videos in {len(list(range(0, args.videos, COPIES_PER_FILE)))} files, a run of {len(run)}:")
    print(f"  whole folder (before)      {statistics.median(whole):7.2f} s")
    print(f"  its own videos' files      {statistics.median(own):7.2f} s")
    print(f"  ratio                      {statistics.median(whole) / statistics.median(own):7.1f}x")
    print(f"  load average               {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
