"""Temporal relatedness at query time: a chunk borrows evidence from its same-video neighbours, near in time.

A question's answer sits in a stretch of a video where the tutor talks about the same step for a while: when a
chunk's neighbours also match the question, the chunk is more likely the right one. Each candidate's fused score
gains `weight` times the sum of its same-video candidates' scores above the candidates' floor, each weighted by a
Gaussian kernel over the distance between the chunks' midpoints (seconds). Candidates missing from the first
stage count as the floor, so they add nothing (as in `retrieval.fuse`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from pstuts_pipeline.settings import SearchSettings
from pstuts_pipeline.settings.base import default

# Measured on dev, see docs/retrieval-experiments.md: off by default unless it gains.
WEIGHT: float = default(SearchSettings, "temporal_weight")
SIGMA_S: float = default(SearchSettings, "temporal_sigma_s")


@dataclass(frozen=True)
class TemporalSettings:
    """How much a chunk's same-video neighbours count, and how fast that falls off with time distance."""

    weight: float = WEIGHT  # 0: off
    sigma_s: float = SIGMA_S
    relink: bool = False  # the link may move to a neighbour's phrase (see `retrieval.relink_to_neighbours`)

    @property
    def enabled(self) -> bool:
        return self.weight != 0.0 or self.relink


@dataclass(frozen=True)
class Place:
    """Where a chunk is: its video and its time span."""

    video_id: int
    start: float
    stop: float

    @property
    def midpoint(self) -> float:
        return (self.start + self.stop) / 2


def kernel(distance_s: np.ndarray | float, sigma_s: float) -> np.ndarray:
    """Gaussian weight of a neighbour `distance_s` seconds away: 1 at 0, about 0.61 at one sigma."""
    distance = np.asarray(distance_s, dtype=np.float64)
    return np.exp(-0.5 * (distance / sigma_s) ** 2)


def smoothed(
    scores: Mapping[Hashable, float], places: Mapping[Hashable, Place], settings: TemporalSettings
) -> dict[Hashable, float]:
    """Each candidate's score plus `weight` times its same-video candidates' kernel-weighted lift above the floor."""
    if not scores or settings.weight == 0.0:
        return dict(scores)
    floor = min(scores.values())
    by_video: dict[int, list[Hashable]] = {}
    for pid in scores:
        by_video.setdefault(places[pid].video_id, []).append(pid)
    result = dict(scores)
    for ids in by_video.values():
        if len(ids) < 2:
            continue
        middles = np.array([places[p].midpoint for p in ids])
        lifts = np.array([scores[p] - floor for p in ids])
        weights = kernel(middles[:, None] - middles[None, :], settings.sigma_s)
        np.fill_diagonal(weights, 0.0)
        for pid, gain in zip(ids, weights @ lifts, strict=True):
            result[pid] += settings.weight * float(gain)
    return result
