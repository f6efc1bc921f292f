"""`pstuts ingest` against the bare reference script, side by side on the same data, alternating, medians.

Run from the checkout:  .venv/bin/python -m benchmarks.ingest_speed [--rounds 3] [--scale 10] [--json out.json]

Each round, in alternating order, as subprocesses with their own fresh folders:
  (a) benchmarks/reference_ingest.py on the files (a fresh local Qdrant folder);
  (b) `pstuts ingest` with a fresh DAGSTER_HOME and PSTUTS_STORAGE_DIR (so a fresh Qdrant and embedding
      cache), PSTUTS_DATA_DIR holding symlinks to the files;
  (c) `pstuts ingest` again, nothing changed;
  (d) one phrase of one video edited (in a copy of its file), then `pstuts ingest`.
Then, once, (e) the same on a synthetic corpus of `--scale` times the videos: copies with new video ids whose
every phrase has a letter or two switched in case. The model's tokenizer is uncased, so each copy costs the
model exactly what the original costs, while the embedding cache (keyed by text) knows none of it: the run
shows whether the cost per video stays flat when the corpus grows.

Wall time, CPU time and peak RSS are the child process's own (wait4). The code is copied at the start, so
edits to the checkout while it runs do not leak into later rounds. The machine is shared: the load average
is printed with the results; compare the medians of one run, not runs made at different times.
"""

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from pstuts_pipeline_tests.support import REPO
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.workspace import (
    Run,
    Workspace,
    load,
    machine,
    run_child,
)

REFERENCE = REPO / "benchmarks" / "reference_ingest.py"
SCALE_ID_OFFSET = 1_000_000


def snapshot_code(root: Path) -> tuple[Path, dict[str, str]]:
    """Copy the package and the reference script, so every round runs the same code; say which code it is."""
    code = root / "code"
    shutil.copytree(REPO / "pstuts_pipeline", code / "pstuts_pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REFERENCE, code / REFERENCE.name)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])
    git = lambda *a: subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True).stdout.strip()
    changed = git("status", "--porcelain", "--", "pstuts_pipeline", str(REFERENCE.relative_to(REPO)))
    return code, {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted_files": str(len(changed.splitlines()))}


def reference(script: Path, files: list[Path], root: Path, name: str, extra_env: dict[str, str] | None = None) -> Run:
    space = Workspace(root, name)
    command = [sys.executable, str(script), *map(str, files), "--qdrant-path", str(space.storage / "qdrant")]
    run = run_child(name, command, {**space.env(), **(extra_env or {})}, space.logs)
    run.details = json.loads(run.output.strip().splitlines()[-1])
    return run


def edit_one_phrase(space: Workspace, files: list[Path]) -> dict:
    """Replace the last file's symlink by a copy in which one phrase of one video reads differently."""
    target = files[-1]
    videos = json.loads(target.read_text())
    video = videos[len(videos) // 2]
    phrase = video["transcripts"][len(video["transcripts"]) // 2]
    before = phrase["sent"]
    phrase["sent"] = before.rstrip(".") + ", as you can see here."
    (space.data / target.name).unlink()
    (space.data / target.name).write_text(json.dumps(videos))
    return {"video_id": video["video_id"], "sent_id": phrase["sent_id"], "before": before, "after": phrase["sent"]}


def switch_case(text: str, copy_number: int) -> str:
    """The text with the case of some of its first four letters switched, a different set for each copy."""
    letters = [i for i, ch in enumerate(text) if ch.isalpha()][:4]
    chars = list(text)
    for bit, index in enumerate(letters):
        if copy_number >> bit & 1:
            chars[index] = chars[index].swapcase()
    return "".join(chars)


def write_scaled_corpus(files: list[Path], scale: int, folder: Path) -> int:
    """`scale` times the videos: the originals, and copies with new ids whose phrases differ in case only."""
    originals = [v for f in files for v in json.loads(f.read_text())]
    count = 0
    for number in range(scale):
        videos = []
        for video in originals:
            twin = copy.deepcopy(video)
            if number:
                twin["video_id"] = video["video_id"] + number * SCALE_ID_OFFSET
                for phrase in twin["transcripts"]:
                    phrase["sent"] = switch_case(phrase["sent"], number)
            videos.append(twin)
        (folder / f"copy_{number:02d}.json").write_text(json.dumps(videos))
        count += len(videos)
    return count


def median(runs: list[Run]) -> float:
    return round(statistics.median(r.seconds for r in runs), 2)


def median_cpu(runs: list[Run]) -> float:
    return round(statistics.median(r.cpu_seconds for r in runs), 2)


def peak(runs: list[Run]) -> float:
    return max(r.peak_rss_mb for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", nargs="+", type=Path, default=[PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=int, default=10, help="Corpus multiple for the growth run (0 skips it).")
    parser.add_argument("--workdir", type=Path, default=None, help="Where the fresh folders go (default: a temp dir).")
    parser.add_argument("--keep", action="store_true", help="Keep the folders (logs, stores) afterwards.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the results here.")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="A setting for the pstuts runs only, e.g. PSTUTS_EMBEDDING_PRECISION=bfloat16 (repeatable).",
    )
    parser.add_argument(
        "--passive-reference",
        action="store_true",
        help="Also run the reference with OMP_WAIT_POLICY=PASSIVE, as `pstuts ingest` runs torch, to tell the "
        "thread policy's share of the difference from the rest on a busy machine.",
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="ingest_speed_", dir=args.workdir))
    settings = dict(item.split("=", 1) for item in args.set)
    code, code_info = snapshot_code(root)
    results: dict = {
        "machine": machine(),
        "files": [str(f) for f in args.files],
        "code": code_info,
        "settings": settings,
    }
    results["load_before"] = load()
    runs: dict[str, list[Run]] = {"reference": [], "fresh": [], "unchanged": [], "edited": []}
    if args.passive_reference:
        runs["reference_passive"] = []
    edits: list[dict] = []
    try:
        for number in range(args.rounds):
            order = ["reference", "ours"] + (["reference_passive"] if args.passive_reference else [])
            for which in order if number % 2 == 0 else order[::-1]:
                if which.startswith("reference"):
                    extra = {"OMP_WAIT_POLICY": "PASSIVE"} if which == "reference_passive" else None
                    runs[which].append(reference(code / REFERENCE.name, args.files, root, f"r{number}_{which}", extra))
                    print(f"round {number + 1}: {which} {runs[which][-1].seconds:.1f}s", flush=True)
                    continue
                space = Workspace(root, f"r{number}_ours", settings)
                space.link(args.files)
                runs["fresh"].append(space.ingest("fresh"))
                runs["unchanged"].append(space.ingest("unchanged"))
                edit = edit_one_phrase(space, args.files)
                runs["edited"].append(space.ingest("edited"))
                edit.update(texts_embedded=space.texts_embedded(), **runs["edited"][-1].details)
                edits.append(edit)
                print(
                    f"round {number + 1}: pstuts fresh {runs['fresh'][-1].seconds:.1f}s, unchanged "
                    f"{runs['unchanged'][-1].seconds:.1f}s, edited {runs['edited'][-1].seconds:.1f}s",
                    flush=True,
                )
        results["load_after_rounds"] = load()
        fresh, ref = median(runs["fresh"]), median(runs["reference"])
        results["medians_s"] = {name: median(r) for name, r in runs.items()}
        results["medians_cpu_s"] = {name: median_cpu(r) for name, r in runs.items()}
        results["peak_rss_mb"] = {name: peak(r) for name, r in runs.items()}
        results["ratio_fresh_to_reference"] = round(fresh / ref, 3)
        results["ratio_unchanged_to_fresh"] = round(median(runs["unchanged"]) / fresh, 4)
        results["ratio_edited_to_fresh"] = round(median(runs["edited"]) / fresh, 4)
        results["edits"] = edits
        results["runs"] = {name: [asdict(r) | {"output": None} for r in rs] for name, rs in runs.items()}
        results["reference_summary"] = runs["reference"][0].details
        results["fresh_points"] = runs["fresh"][0].details["points"]

        if args.scale > 1:
            space = Workspace(root, f"scale_{args.scale}x", settings)
            videos = write_scaled_corpus(args.files, args.scale, space.data)
            scaled = space.ingest("fresh")
            scaled_texts = space.texts_embedded()
            scaled_unchanged = space.ingest("unchanged")
            base_videos = runs["fresh"][0].details["videos_ingested"]
            results["scale"] = {
                "videos": videos,
                "fresh_s": scaled.seconds,
                "fresh_cpu_s": scaled.cpu_seconds,
                "unchanged_s": scaled_unchanged.seconds,
                "peak_rss_mb": scaled.peak_rss_mb,
                "texts_embedded": scaled_texts,
                "points": scaled.details["points"],
                "seconds_per_video": round(scaled.seconds / videos, 3),
                "base_seconds_per_video": round(fresh / base_videos, 3),
                "growth_vs_linear": round((scaled.seconds / videos) / (fresh / base_videos), 3),
                "load_after": load(),
            }
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def report(results: dict) -> None:
    """The figures, as a small plain-text table."""
    m, cpu, rss = results["medians_s"], results["medians_cpu_s"], results["peak_rss_mb"]
    print(
        f"\nmachine: {results['machine']}  load avg before {results['load_before']}, after {results['load_after_rounds']}"
    )
    print(
        f"data: {', '.join(Path(f).name for f in results['files'])}; medians of {len(results['runs']['fresh'])} rounds; "
        f"code: {results['code']}; pstuts settings: {results['settings'] or 'defaults'}"
    )
    rows = [
        ("(a) reference script", "reference", ""),
        ("(b) pstuts ingest, fresh", "fresh", f"{results['ratio_fresh_to_reference']:.2f}x reference"),
        ("(c) pstuts ingest, unchanged", "unchanged", f"{results['ratio_unchanged_to_fresh']:.1%} of fresh"),
        ("(d) one phrase edited", "edited", f"{results['ratio_edited_to_fresh']:.1%} of fresh"),
    ]
    if "reference_passive" in m:
        note = f"ours {m['fresh'] / m['reference_passive']:.2f}x this"
        rows.insert(1, ("(a') reference, OMP_WAIT_POLICY=PASSIVE", "reference_passive", note))
    print(f"{'':40} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12}")
    for name, key, note in rows:
        print(f"{name:40} {m[key]:8.1f} {cpu[key]:8.1f} {rss[key]:12.0f}  {note}")
    edit = results["edits"][0]
    print(
        f"edited video {edit['video_id']} phrase {edit['sent_id']}: {edit['videos_ingested']} video re-ingested, "
        f"texts embedded {edit['texts_embedded']}"
    )
    if "scale" in results:
        s = results["scale"]
        print(
            f"(e) {s['videos']} videos: fresh {s['fresh_s']:.1f}s, CPU {s['fresh_cpu_s']:.1f}s "
            f"({s['seconds_per_video']:.3f} s/video vs "
            f"{s['base_seconds_per_video']:.3f} at 1x: {s['growth_vs_linear']:.2f}x linear), unchanged "
            f"{s['unchanged_s']:.1f}s, peak RSS {s['peak_rss_mb']:.0f} MB, texts embedded {s['texts_embedded']}, "
            f"load avg after {s['load_after']}"
        )


if __name__ == "__main__":
    main()
