"""Which videos of the data folder to ingest, keep or remove, against the fingerprints stored beside their points.

The policy alone, without Dagster: `defs.reconcile` turns its answer into run requests for `pstuts ingest`, the folder
sensor and the schedule, and `pstuts ingest` with nothing to do reaches its verdict from the ledger with it.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from pstuts_pipeline.sources import Catalog, SourceVideo

NEW_REASON = "new video"
CHANGED_REASON = "source, embedding model or chunk settings differ from what Qdrant holds"
FORCED_REASON = "re-ingest forced"
REMOVED_REASON = "video no longer in the data folder"


@dataclass
class Reconciliation:
    """Partition keys by what must happen to them, and why."""

    to_ingest: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def has_work(self) -> bool:
        return bool(self.to_ingest or self.removed)


def failures_by_key(catalog: Catalog, selected: set[str] | None) -> dict[str, str]:
    """The catalog's errors grouped by video (or by file when no video is named), joined once per key."""
    grouped: dict[str, list[str]] = {}
    for error in catalog.errors:
        key = str(error.video_id) if error.video_id is not None else error.file
        if selected is None or key in selected:
            grouped.setdefault(key, []).append(str(error))
    return {key: "\n".join(messages) for key, messages in grouped.items()}


def reconcile(
    catalog: Catalog,
    stored: dict[int, set[str]],
    fingerprint_of: Callable[[SourceVideo], str],
    only: Iterable[str] | None = None,
    force: bool = False,
) -> Reconciliation:
    """A video is ingested when forced, new, or stored from other content, model or settings than now.

    A video is removed when Qdrant holds it and no file names it, unless some file could not be read at all
    (then a missing video cannot be told from an unreadable one, and its points stay until the file reads).
    """
    selected = set(only) if only else None
    result = Reconciliation(failed=failures_by_key(catalog, selected))
    for key, video in sorted(catalog.videos.items(), key=lambda kv: int(kv[0])):
        if selected is not None and key not in selected:
            continue
        prints = stored.get(video.video_id)
        if force or prints != {fingerprint_of(video)}:
            result.to_ingest.append(key)
            result.reasons[key] = FORCED_REASON if force else NEW_REASON if not prints else CHANGED_REASON
        else:
            result.unchanged.append(key)
    if selected is not None:
        for key in sorted(selected - set(catalog.videos) - set(result.failed)):
            result.failed[key] = catalog.missing_reason(key)
    elif not catalog.hides_videos:
        unreadable = {str(v) for v in catalog.bad_video_ids}
        result.removed = sorted(
            (str(v) for v in stored if str(v) not in catalog.videos and str(v) not in unreadable), key=int
        )
        result.reasons |= {key: REMOVED_REASON for key in result.removed}
    return result
