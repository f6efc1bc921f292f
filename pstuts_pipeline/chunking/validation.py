"""Invariants of timestamped chunks and stored points, as lists of problems (empty = all good)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase


def _compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


def linking_problems(phrases: Sequence[Phrase], chunks: Sequence[TimedChunk]) -> list[str]:
    """Every phrase in exactly one chunk, in order, and chunk text made of exactly its phrases' text."""
    problems = []
    # A phrase longer than the window is cut into pieces in consecutive chunks: gather each run of pieces.
    runs: list[tuple[int, list[str]]] = []
    for chunk in chunks:
        for unit in chunk.phrases:
            if runs and runs[-1][0] == unit.sent_id:
                runs[-1][1].append(unit.text)
            else:
                runs.append((unit.sent_id, [unit.text]))
    linked = [sent_id for sent_id, _ in runs]
    expected = [p.sent_id for p in phrases]
    if linked != expected:
        counts = Counter(linked)
        lost = [s for s in expected if s not in counts]
        doubled = sorted(s for s, n in counts.items() if n > 1)
        problems.append(f"phrases lost {lost[:10]}, in more than one chunk {doubled[:10]}, or out of order")
        return problems
    for phrase, (sent_id, pieces) in zip(phrases, runs):
        # Pieces rebuild the phrase exactly once; a phrase repeated across a chunk boundary does not.
        if _compact("".join(pieces)) != _compact(phrase.text) or (not phrase.text and len(pieces) > 1):
            problems.append(f"phrase {sent_id}: its chunks hold {' | '.join(pieces)[:80]!r}, not its text once")
    return problems


def timing_problems(chunks: Sequence[TimedChunk]) -> list[str]:
    """start <= stop, every phrase inside [start, stop], chunk starts never going backwards."""
    problems = []
    previous_start = float("-inf")
    for chunk in chunks:
        if chunk.start is None or chunk.stop is None or chunk.start > chunk.stop:
            problems.append(f"chunk {chunk.index}: start {chunk.start} after stop {chunk.stop}")
            continue
        outside = [p.sent_id for p in chunk.phrases if not (chunk.start <= p.begin <= p.end <= chunk.stop)]
        if outside:
            problems.append(f"chunk {chunk.index}: phrases {outside} lie outside [{chunk.start}, {chunk.stop}]")
        if chunk.start < previous_start:
            problems.append(f"chunk {chunk.index}: starts at {chunk.start}, before the previous chunk")
        previous_start = chunk.start
    return problems


def window_problems(
    chunks: Sequence[TimedChunk], count_tokens: Callable[[str], int], window: int, special: int
) -> list[str]:
    """No chunk longer than the embedder's input window."""
    return [
        f"chunk {c.index}: {count_tokens(c.text) + special} tokens over the {window}-token window"
        for c in chunks
        if count_tokens(c.text) + special > window
    ]
