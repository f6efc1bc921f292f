"""How good a set of chunks is against the transcripts it came from: lost and doubled phrases, missing times,
window overflows, sizes (benchmarks/chunk_quality.py's table; its counting is tested on its own)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class ChunkRow:
    """What the table needs of one chunk, whichever approach made it."""

    video_id: int
    text: str
    start: float | None
    stop: float | None
    sent_ids: list[int]


@dataclass
class Quality:
    """One approach's column of the table."""

    chunks: int = 0
    kamradt_chunks: int = 0
    phrases_lost: int = 0
    phrases_in_several_chunks: int = 0
    chunks_without_times: int = 0
    chunks_over_window: int = 0
    chunk_starts_going_back: int = 0
    chunks_overlapping_previous: int = 0
    videos_with_starts_going_back: int = 0
    tokens: dict[str, float] = field(default_factory=dict)
    repairs: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def measure(
    rows: Sequence[ChunkRow],
    videos: Sequence[dict[str, Any]],
    count_tokens: Callable[[str], int],
    window: int,
    special: int,
) -> Quality:
    """Score chunks against the transcripts they came from; token counts include the model's special tokens."""
    quality = Quality(chunks=len(rows), kamradt_chunks=len(rows))
    by_video: dict[int, list[ChunkRow]] = {}
    for row in rows:
        by_video.setdefault(row.video_id, []).append(row)
    for video in videos:
        chunks = by_video.get(video["video_id"], [])
        # A phrase cut into pieces (longer than the window) counts once per chunk holding a piece.
        holders = Counter(s for c in chunks for s in set(c.sent_ids))
        phrase_ids = [p["sent_id"] for p in video["transcripts"]]
        quality.phrases_lost += sum(1 for s in phrase_ids if holders[s] == 0)
        quality.phrases_in_several_chunks += sum(1 for s in phrase_ids if holders[s] > 1)
        previous_start, previous_stop, went_back = None, None, 0
        for chunk in chunks:
            if chunk.start is not None and previous_start is not None and chunk.start < previous_start:
                went_back += 1
            if chunk.start is not None and previous_stop is not None and chunk.start < previous_stop:
                quality.chunks_overlapping_previous += 1
            previous_start = chunk.start if chunk.start is not None else previous_start
            previous_stop = chunk.stop if chunk.stop is not None else previous_stop
        quality.chunk_starts_going_back += went_back
        quality.videos_with_starts_going_back += went_back > 0
    quality.chunks_without_times = sum(1 for r in rows if r.start is None or r.stop is None)
    tokens = np.array([count_tokens(r.text) + special for r in rows])
    quality.chunks_over_window = int((tokens > window).sum())
    quality.tokens = {
        "min": int(tokens.min()),
        "median": float(np.median(tokens)),
        "p90": float(np.percentile(tokens, 90)),
        "max": int(tokens.max()),
    }
    return quality
