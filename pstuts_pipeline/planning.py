"""Decide which videos need (re-)ingesting: compare what the data folder holds with what Qdrant was built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pstuts_pipeline.transcripts import Catalog, SourceVideo


@dataclass
class IngestPlan:
    """Partition keys by what must happen to them."""

    to_ingest: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def plan_ingest(
    catalog: Catalog,
    stored: dict[int, set[str]],
    fingerprint_of: Callable[[SourceVideo], str],
    only: Iterable[str] | None = None,
    force: bool = False,
) -> IngestPlan:
    """A video is ingested when forced, new, or built from other content, model or settings than now."""
    plan = IngestPlan()
    selected = set(only) if only else None
    failed: dict[str, list[str]] = {}  # joined once at the end: growing a string per error is quadratic
    for error in catalog.errors:
        key = str(error.video_id) if error.video_id is not None else error.file
        if selected is None or key in selected:
            failed.setdefault(key, []).append(str(error))
    plan.failed = {key: "\n".join(lines) for key, lines in failed.items()}
    for key, video in sorted(catalog.videos.items(), key=lambda kv: int(kv[0])):
        if selected is not None and key not in selected:
            continue
        if force or stored.get(video.video_id) != {fingerprint_of(video)}:
            plan.to_ingest.append(key)
        else:
            plan.unchanged.append(key)
    if selected is not None:
        for key in sorted(selected - set(catalog.videos) - set(plan.failed)):
            plan.failed[key] = catalog.missing_reason(key)
    elif not catalog.hides_videos:
        # A video that is missing only because its file cannot be read keeps its points until it reads again.
        bad = {str(v) for v in catalog.bad_video_ids}
        plan.removed = sorted((str(v) for v in stored if str(v) not in catalog.videos and str(v) not in bad), key=int)
    return plan


def contiguous_ranges(selected: list[str], order: list[str]) -> list[tuple[str, str]]:
    """Cover `selected` with the fewest [first, last] runs of `order` (a run spans consecutive keys only)."""
    wanted = set(selected)
    ranges: list[tuple[str, str]] = []
    start = previous = None
    for key in order:
        if key in wanted:
            start = start or key
            previous = key
        elif start is not None:
            ranges.append((start, previous))
            start = None
    if start is not None:
        ranges.append((start, previous))
    return ranges
