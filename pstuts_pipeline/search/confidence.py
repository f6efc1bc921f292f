"""How likely a search result holds the answer, so search and answers can say when nothing in the videos does.

A logistic model over signals that mean the same in a collection of 11 chunks or of 10,000: the cosine of the
result's best phrase to the question, the share of the question's terms that phrase holds, and 1/rank. (The fused
score is left out: it is standardised over the question's candidates, so its scale depends on how many there are.)
Fitted on PsTuts-VQA train questions asked of a collection that holds half of their videos (the target: the result
holds the answer), checked on dev; the threshold under which a first result counts as "no good match" is the setting
PSTUTS_MIN_CONFIDENCE (benchmarks/abstention.py, docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

from pstuts_pipeline import settings
from pstuts_pipeline.settings.base import default

# (intercept, cosine, term share, 1/rank): fitted by `python -m benchmarks.abstention` on train.
COEFFICIENTS = (-6.502, 3.380, 1.055, 2.010)
SIGNALS = ("cosine", "term_share", "inverse_rank")
# The measured default (chosen on train by benchmarks/abstention.py): declared with the setting.
MIN_CONFIDENCE: float = default(settings.SearchSettings, "min_confidence")
NO_GOOD_MATCH = "No moment in these videos answers this well; the nearest ones are shown as weak matches."


class Scored(Protocol):
    """What the verdict needs of a search result."""

    confidence: float


def signals(cosine: float, term_share: float, rank: int) -> dict[str, float]:
    """A result's signals by name, as they are stored on it and shown in its details."""
    return {"cosine": round(cosine, 4), "term_share": round(term_share, 4), "inverse_rank": round(1 / rank, 4)}


def probability(found: Mapping[str, float], coefficients: Sequence[float] = COEFFICIENTS) -> float:
    """The model's probability that the result holds the answer (0 for a result without signals)."""
    if not found:
        return 0.0
    intercept, *weights = coefficients
    z = intercept + sum(w * float(found[name]) for w, name in zip(weights, SIGNALS, strict=True))
    return round(1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z)))), 4)


def answers_well(results: Sequence[Scored], threshold: float) -> bool:
    """Whether the first result is confident enough to be presented as the answer."""
    return bool(results) and results[0].confidence >= threshold


def threshold() -> float:
    """The confidence under which a first result is "no good match" (PSTUTS_MIN_CONFIDENCE)."""
    return settings.load(settings.SearchSettings).min_confidence
