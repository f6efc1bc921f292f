"""Time repair and the timed phrase the chunker works on (pure domain code, no Dagster)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pstuts_pipeline.sources import RawPhrase, normalize_text


@dataclass(frozen=True)
class Phrase:
    """One timed transcript phrase, as spoken, with repaired times."""

    sent_id: int
    text: str
    begin: float
    end: float


@dataclass(frozen=True)
class TimeRepairs:
    """How many phrase times were repaired, by rule, so the repairs are visible."""

    begin_filled: int = 0
    end_filled: int = 0
    end_before_begin: int = 0
    begin_moved_forward: int = 0

    @property
    def total(self) -> int:
        return self.begin_filled + self.end_filled + self.end_before_begin + self.begin_moved_forward

    def as_dict(self) -> dict[str, int]:
        return {
            "begin_filled": self.begin_filled,
            "end_filled": self.end_filled,
            "end_before_begin": self.end_before_begin,
            "begin_moved_forward": self.begin_moved_forward,
        }


class _KnownTimes:
    """The next known time at or after a threshold, for thresholds that never go down: linear in all.

    Repaired begins never go backwards, so a known time found too early for one phrase is too early for every
    later one too, and the cursor never moves back.
    """

    def __init__(self, raw: Sequence[RawPhrase]):
        self.times = [(i, float(v)) for i, p in enumerate(raw) for v in (p.begin, p.end) if v is not None]
        self.cursor = 0

    def next_at_least(self, start: int, at_least: float) -> float | None:
        while self.cursor < len(self.times) and (
            self.times[self.cursor][0] < start or self.times[self.cursor][1] < at_least
        ):
            self.cursor += 1
        return self.times[self.cursor][1] if self.cursor < len(self.times) else None


def repair_times(raw_phrases: Sequence[RawPhrase]) -> tuple[list[Phrase], TimeRepairs]:
    """Give every phrase a time span so that spans never overlap and never go backwards.

    Rules, applied in order to each phrase:
    1. a missing `begin` takes the previous phrase's (repaired) end, or 0 for the first phrase;
    2. a `begin` before the previous phrase's end moves forward to that end;
    3. a missing `end` takes the next known time at or after `begin`, or `begin` if none is known;
    4. an `end` before `begin` is treated the same way as a missing one.
    """
    repaired: list[Phrase] = []
    counts = Counter[str]()
    previous_end = 0.0
    known = _KnownTimes(raw_phrases)
    for i, phrase in enumerate(raw_phrases):
        begin = phrase.begin
        if begin is None:
            begin = previous_end
            counts["begin_filled"] += 1
        elif begin < previous_end:
            begin = previous_end
            counts["begin_moved_forward"] += 1
        end = phrase.end
        if end is None or end < begin:
            counts["end_filled" if end is None else "end_before_begin"] += 1
            end = known.next_at_least(i + 1, begin)
            end = begin if end is None else end
        repaired.append(Phrase(phrase.sent_id, normalize_text(phrase.text), float(begin), float(end)))
        previous_end = float(end)
    return repaired, TimeRepairs(**counts)
