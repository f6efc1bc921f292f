"""Invariants of timestamped chunks and stored points, as lists of problems (empty = all good)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from pstuts_pipeline.chunking import TimedChunk
from pstuts_pipeline.transcripts import Phrase


def linking_problems(phrases: Sequence[Phrase], chunks: Sequence[TimedChunk]) -> list[str]:
    """Every phrase in exactly one chunk, in order, and chunk text made of exactly its phrases."""
    problems = []
    linked = [p.sent_id for c in chunks for p in c.phrases]
    # A phrase longer than the window is cut into pieces that share its id in consecutive chunks.
    collapsed = [s for i, s in enumerate(linked) if i == 0 or linked[i - 1] != s]
    expected = [p.sent_id for p in phrases]
    if collapsed != expected:
        counts = Counter(collapsed)
        lost = [s for s in expected if s not in counts]
        doubled = sorted(s for s, n in counts.items() if n > 1)
        problems.append(f"phrases lost {lost[:10]}, in more than one chunk {doubled[:10]}, or out of order")
    texts = {p.sent_id: p.text for p in phrases}
    for chunk in chunks:
        for phrase in chunk.phrases:
            if phrase.text and phrase.text not in texts.get(phrase.sent_id, ""):
                problems.append(f"chunk {chunk.index}: phrase {phrase.sent_id} text differs from the transcript")
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


def window_problems(chunks: Sequence[TimedChunk], count_tokens: Callable[[str], int], window: int, special: int) -> list[str]:
    """No chunk longer than the embedder's input window."""
    return [
        f"chunk {c.index}: {count_tokens(c.text) + special} tokens over the {window}-token window"
        for c in chunks
        if count_tokens(c.text) + special > window
    ]
