"""Chunk quality, reference approach vs ours: lost and doubled phrases, missing times, window overflows, sizes.

Usage: .venv/bin/python -m benchmarks.chunk_quality /work/shared/pstuts/train.json /work/shared/pstuts/dev.json
Prints a markdown table (and `--json` a JSON line) of what each approach does to the same transcripts.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.reference_ingest import load_videos, make_embeddings, reference_chunks
from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.chunking.time_repair import TimeRepairs, repair_times
from pstuts_pipeline.embedding import EmbeddingSpec, load_embeddings, token_counter, window_tokens
from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline_tests.support.chunk_quality import ChunkRow, Quality, measure


def reference_rows(videos: list[dict[str, Any]]) -> tuple[list[ChunkRow], float]:
    """SemanticChunker with its defaults, phrases linked by `phrase in chunk`, as benchmarks/reference_ingest.py."""
    embeddings = make_embeddings()
    started = time.perf_counter()
    chunks = reference_chunks(videos, embeddings)
    rows = [ChunkRow(c["video_id"], c["text"], c["start"], c["stop"], c["sent_ids"]) for c in chunks]
    return rows, time.perf_counter() - started


def our_rows(files: list[Path]) -> tuple[list[ChunkRow], int, dict[str, int], float]:
    """Our path: repaired times, one phrase per chunker sentence, offset linking, capping at the window."""
    spec = EmbeddingSpec()
    window, special = window_tokens(spec)
    settings = chunking.ChunkerSettings(max_tokens=window)
    count_tokens = token_counter(spec)
    chunker = chunking.make_chunker(load_embeddings(spec), settings)
    catalog = load_catalog(files)
    if catalog.errors:
        raise SystemExit("\n".join(str(e) for e in catalog.errors))
    started = time.perf_counter()
    rows: list[ChunkRow] = []
    kamradt = 0
    repairs = Counter[str]()
    for video in catalog.videos.values():
        phrases, repaired = repair_times(video.phrases)
        repairs.update(repaired.as_dict())
        texts = chunking.semantic_chunks(chunker, chunking.full_transcript(phrases))
        kamradt += len(texts)
        for chunk in chunking.timed_chunks(texts, phrases, count_tokens, settings, special):
            rows.append(ChunkRow(video.video_id, chunk.text, chunk.start, chunk.stop, chunk.sent_ids))
    return rows, kamradt, {name: repairs[name] for name in TimeRepairs().as_dict()}, time.perf_counter() - started


def markdown_table(reference: Quality, ours: Quality, videos: int, phrases: int, null_times: int) -> str:
    """The comparison as a markdown table, one row per measure."""

    def tokens(q: Quality) -> str:
        t = q.tokens
        return f"{t['min']} / {t['median']:.0f} / {t['p90']:.0f} / {t['max']}"

    def share(n: int, q: Quality) -> str:
        return f"{n} ({100 * n / q.chunks:.0f}%)" if q.chunks else str(n)

    rows = [
        ("chunks", reference.chunks, ours.chunks),
        ("&nbsp;&nbsp;Kamradt chunks before capping and folding", reference.chunks, ours.kamradt_chunks),
        ("phrases lost (in no chunk)", reference.phrases_lost, ours.phrases_lost),
        ("phrases in more than one chunk", reference.phrases_in_several_chunks, ours.phrases_in_several_chunks),
        ("chunks without start or stop", reference.chunks_without_times, ours.chunks_without_times),
        (
            "chunks over the 256-token window",
            share(reference.chunks_over_window, reference),
            share(ours.chunks_over_window, ours),
        ),
        ("chunks starting before the previous chunk", reference.chunk_starts_going_back, ours.chunk_starts_going_back),
        (
            "videos with a chunk start going backwards",
            reference.videos_with_starts_going_back,
            ours.videos_with_starts_going_back,
        ),
        (
            "chunks starting before the previous chunk's stop",
            reference.chunks_overlapping_previous,
            ours.chunks_overlapping_previous,
        ),
        ("chunk tokens min / median / p90 / max", tokens(reference), tokens(ours)),
        (
            f"phrase times repaired (of {null_times} null)",
            f"none ({null_times} null times kept)",
            sum(ours.repairs.values()),
        ),
        *((f"&nbsp;&nbsp;repairs: {name}", "-", count) for name, count in ours.repairs.items()),
    ]
    lines = [
        f"Train + dev: {videos} videos, {phrases} phrases. Tokens counted with all-MiniLM-L6-v2's tokenizer, "
        "including its 2 special tokens.",
        "",
        "| | reference (SemanticChunker defaults, `phrase in chunk`) | ours |",
        "|---|---:|---:|",
        *(f"| {name} | {ref} | {our} |" for name, ref, our in rows),
    ]
    return "\n".join(lines)


def main() -> None:
    """Run both approaches over the given files and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="Also print both columns as one JSON line.")
    args = parser.parse_args()
    videos = load_videos([str(f) for f in args.files])
    spec = EmbeddingSpec()
    count_tokens = token_counter(spec)
    window, special = window_tokens(spec)

    rows, seconds = reference_rows(videos)
    reference = measure(rows, videos, count_tokens, window, special)
    reference.seconds = seconds
    rows, kamradt, repairs, seconds = our_rows(args.files)
    ours = measure(rows, videos, count_tokens, window, special)
    ours.kamradt_chunks, ours.repairs, ours.seconds = kamradt, repairs, seconds

    phrases = sum(len(v["transcripts"]) for v in videos)
    nulls = sum(p[k] is None for v in videos for p in v["transcripts"] for k in ("begin", "end"))
    print(markdown_table(reference, ours, len(videos), phrases, nulls))
    if args.json:
        # Chunking seconds are here only: on a shared machine they are too noisy for the table.
        print(json.dumps({"reference": reference.__dict__, "ours": ours.__dict__}))


if __name__ == "__main__":
    main()
