"""Does a bigger input cost in proportion to its size? Phrase length, phrases per video, caption cues, junk records, nesting.

Run from the checkout:  .venv/bin/python -m benchmarks.input_growth [--json out.json]

Each point runs in a fresh subprocess on a generated data folder: reading and validating the folder
(`load_catalog`), time repair, and linking one chunk per ten phrases to its phrases, cut to the bundled model's
256-token window with its real tokenizer (`timed_chunks`). Embedding is left out: the model truncates every text
to its window, so its cost per text is flat by construction. Inputs over a documented limit (e.g.
PSTUTS_MAX_PHRASES_PER_VIDEO) are expected to be refused, quickly and by name.

Seconds and the growth of peak RSS over the process's own baseline (after imports) are divided by the input's
units (MB of phrase text, thousands of phrases or cues); flat within 2x across a range is the target. The machine
is shared: the load average is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANGES = {
    "phrase_length": [10_000, 100_000, 1_000_000],  # characters of one phrase
    "phrases_per_video": [1_000, 10_000, 100_000],  # phrases, half of them without times
    "caption_cues": [1_000, 10_000, 100_000, 200_000],  # cues of one SRT file
    "junk_records": [10_000, 100_000, 500_000],  # records of one file that are not objects (refused)
    "nesting_levels": [1_000, 10_000, 100_000],  # brackets of one file nested this deep (refused)
}
UNITS = {
    "phrase_length": ("MB", 1_000_000),
    "phrases_per_video": ("1k phrases", 1_000),
    "caption_cues": ("1k cues", 1_000),
    "junk_records": ("100k records", 100_000),
    "nesting_levels": ("100k levels", 100_000),
}
WORDS = "open the layers panel then choose free transform and drag a corner handle to scale".split()


def _words(chars: int, seed: int = 0) -> str:
    out, size, i = [], 0, seed
    while size < chars:
        word = WORDS[i % len(WORDS)]
        out.append(word)
        size += len(word) + 1
        i += 7
    return " ".join(out)[:chars]


def generate(kind: str, size: int, folder: Path) -> None:
    """The input of one point, written into `folder`."""
    if kind == "caption_cues":
        with open(folder / "9001 - Growth.srt", "w") as out:
            for i in range(size):
                begin = i * 2
                out.write(
                    f"{i + 1}\n{begin // 3600:02}:{begin // 60 % 60:02}:{begin % 60:02},000 --> "
                    f"{(begin + 1) // 3600:02}:{(begin + 1) // 60 % 60:02}:{(begin + 1) % 60:02},500\n"
                    f"{_words(60, i)}\n\n"
                )
        return
    if kind == "junk_records":
        (folder / "junk.json").write_text("[" + ",".join(["0"] * size) + "]")
        return
    if kind == "nesting_levels":
        (folder / "deep.json").write_text("[" * size + "]" * size)
        return
    if kind == "phrase_length":
        phrases = [{"sent_id": 1, "sent": _words(size), "begin": 0.0, "end": 60.0}]
    else:
        phrases = [
            {
                "sent_id": i,
                "sent": _words(60, i),
                "begin": None if i % 2 else i * 2.0,
                "end": None if i % 2 else i * 2.0 + 1,
            }
            for i in range(size)
        ]
    record = {"video_id": 9001, "title": "Growth", "url": "https://example.com/v", "transcripts": phrases}
    (folder / "growth.json").write_text(json.dumps([record]))


def work(folder: Path) -> dict[str, object]:
    """What one worker measures: the domain steps of an ingest before embedding."""
    from pstuts_pipeline.chunking.chunker import ChunkerSettings, timed_chunks
    from pstuts_pipeline.chunking.time_repair import repair_times
    from pstuts_pipeline.embedding import EmbeddingSpec, bundled_model_path, token_counter
    from pstuts_pipeline.sources import load_catalog

    count = token_counter(EmbeddingSpec(model=str(bundled_model_path())))
    count("warm up")
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    catalog = load_catalog(folder)
    if catalog.errors:
        return {"refused": str(catalog.errors[0])[:300], "seconds": time.perf_counter() - started}
    (video,) = catalog.videos.values()
    phrases, _ = repair_times(video.phrases)
    chunks = [" ".join(p.text for p in phrases[i : i + 10]) for i in range(0, len(phrases), 10)]
    timed = timed_chunks(chunks, phrases, count, ChunkerSettings())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": time.perf_counter() - started,
        "rss_growth_mb": (peak - baseline) / 1024,
        "chunks": len(timed),
    }


def run_point(kind: str, size: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="pstuts-growth-") as folder:
        generate(kind, size, Path(folder))
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.input_growth", "--worker", folder],
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        )
    if done.returncode:
        return {"kind": kind, "size": size, "failed": done.stderr[-500:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    unit_name, unit = UNITS[kind]
    units = size / unit
    result.update(kind=kind, size=size, unit=unit_name, seconds_per_unit=result["seconds"] / units)
    if "refused" not in result:
        result["rss_mb_per_unit"] = result["rss_growth_mb"] / units
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=sorted(RANGES), help="Measure one range only.")
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(work(Path(args.worker))), flush=True)
        return
    results = []
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    for kind, sizes in RANGES.items():
        if args.only and kind != args.only:
            continue
        for size in sizes:
            r = run_point(kind, size)
            results.append(r)
            if "failed" in r:
                print(f"{kind:18} {size:>9,}  FAILED {r['failed']}")
            elif "refused" in r:
                print(
                    f"{kind:18} {size:>9,}  refused in {r['seconds']:.2f} s ({r['seconds_per_unit']:.3f} s/{r['unit']}): "
                    f"{r['refused'][:120]}",
                    flush=True,
                )
            else:
                print(
                    f"{kind:18} {size:>9,}  {r['seconds']:8.2f} s  {r['seconds_per_unit']:8.3f} s/{r['unit']}  "
                    f"peak RSS +{r['rss_growth_mb']:7.1f} MB  {r['rss_mb_per_unit']:7.2f} MB/{r['unit']}",
                    flush=True,
                )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
