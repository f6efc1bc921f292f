"""Which videos of the data folder to ingest, keep or remove, against the fingerprints stored beside their points.

The policy alone, without Dagster: `defs.reconcile` turns its answer into run requests for `pstuts ingest`, the folder
sensor and the schedule, and `pstuts ingest` with nothing to do reaches its verdict from the ledger with it.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pstuts_pipeline.settings import source_limits
from pstuts_pipeline.sources import Catalog, SourceVideo, load_catalog, wait_until_settled
from pstuts_pipeline.sources.holdings import Holdings, files_holding, read_holdings, remember_holdings

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
    # The phrases of each video to ingest: runs are cut by them as well as by videos, to bound their memory.
    phrases: dict[str, int] = field(default_factory=dict)
    # The characters of each video's transcript, a measure of its work: runs are balanced by them.
    characters: dict[str, int] = field(default_factory=dict)
    # Stored videos kept although no file names them now, because a file that may hold them could not be read.
    held_back: list[str] = field(default_factory=list)
    # Why removals were not made although their files are gone (too many at once), or "".
    removal_refused: str = ""

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


@dataclass(frozen=True)
class RemovalGuard:
    """How many stored videos one reconcile may remove before it asks for a say-so (an emptied or unmounted folder)."""

    max_share: float = 0.5
    allowed: bool = False

    def refusal(self, removed: list[str], stored: int) -> str:
        """Why these removals are not made, or "" when they may be."""
        if self.allowed or not removed or (len(removed) < stored and len(removed) <= self.max_share * stored):
            return ""
        share = "all of them" if len(removed) >= stored else f"over {self.max_share:.0%} of them"
        listed = ", ".join(removed[:5]) + (f" and {len(removed) - 5:,} more" if len(removed) > 5 else "")
        return (
            f"not removing {len(removed):,} of the {stored:,} stored videos ({share}) whose files are gone: {listed}; "
            "if the data folder is right, run `pstuts ingest --allow-mass-removal` or set PSTUTS_ALLOW_MASS_REMOVAL=1"
        )


def held_back_videos(catalog: Catalog, holdings: Holdings) -> set[int] | None:
    """Videos that unreadable files held at their last good read; None when some such file's past is unknown."""
    held: set[int] = set()
    for file in catalog.unsure_files:
        if file not in holdings:
            return None
        held |= holdings[file]
    return held


def removals(
    catalog: Catalog, stored: dict[int, set[str]], holdings: Holdings, guard: RemovalGuard, result: Reconciliation
) -> None:
    """Stored videos that a readable folder positively no longer holds; the rest held back, with why."""
    gone = {v for v in stored if str(v) not in catalog.videos} - catalog.bad_video_ids
    held = held_back_videos(catalog, holdings)
    kept = gone if held is None else gone & held
    result.held_back = sorted((str(v) for v in kept), key=int)
    removed = sorted((str(v) for v in gone - kept), key=int)
    result.removal_refused = guard.refusal(removed, len(stored))
    if not result.removal_refused:
        result.removed = removed
        result.reasons |= {key: REMOVED_REASON for key in removed}


def reconcile(
    catalog: Catalog,
    stored: dict[int, set[str]],
    fingerprint_of: Callable[[SourceVideo], str],
    only: Iterable[str] | None = None,
    force: bool = False,
    holdings: Holdings | None = None,
    guard: RemovalGuard = RemovalGuard(),
) -> Reconciliation:
    """A video is ingested when forced, new, or stored from other content, model or settings than now.

    A video is removed only on proof: Qdrant holds it, no file names it, and no file that could not be read held it
    at its last good read (`holdings`; a file with no such record holds back every removal). Removing more than the
    guard's share of the stored videos at once is refused unless allowed.
    """
    selected = set(only) if only else None
    result = Reconciliation(failed=failures_by_key(catalog, selected))
    for key, video in sorted(catalog.videos.items(), key=lambda kv: int(kv[0])):
        if selected is not None and key not in selected:
            continue
        prints = stored.get(video.video_id)
        if force or prints != {fingerprint_of(video)}:
            result.to_ingest.append(key)
            result.phrases[key] = len(video.phrases)
            result.characters[key] = sum(len(phrase.text) for phrase in video.phrases)
            result.reasons[key] = FORCED_REASON if force else NEW_REASON if not prints else CHANGED_REASON
        else:
            result.unchanged.append(key)
    if selected is not None:
        for key in sorted(selected - set(catalog.videos) - set(result.failed)):
            result.failed[key] = catalog.missing_reason(key)
    else:
        removals(catalog, stored, holdings or {}, guard, result)
    return result


def reconcile_folder(
    folder: Path,
    home: Path | None,
    stored: dict[int, set[str]],
    fingerprint_of: Callable[[SourceVideo], str],
    only: Iterable[str] | None = None,
    force: bool = False,
    allow_removal: bool = False,
    wait: bool = False,
) -> tuple[Catalog, Reconciliation]:
    """Read the data folder the way every caller must (settled files, holdings remembered in `home`), and reconcile.

    `wait` (a command run now) waits for files still being written; a tick leaves them for the next one.
    """
    limits = source_limits()
    settle = limits.settle_s
    if wait:
        wait_until_settled(folder, settle)
    catalog = load_catalog(folder, settle)
    holdings = remember_holdings(home, folder, catalog)
    guard = RemovalGuard(limits.max_removal_share, allow_removal or limits.allow_mass_removal)
    return catalog, reconcile(catalog, stored, fingerprint_of, only, force, holdings, guard)


def own_videos_catalog(folder: Path, home: Path | None, wanted: set[int]) -> Catalog:
    """The files that held these videos at the last reconcile, or the whole folder when one has moved since.

    A range run of 100 videos out of 10,000 reads one file of 100 in 0.7 s instead of the folder in 81 s. The
    reconcile that planned the run read the whole folder (and refused ids found twice); a copy of a video added to
    another file since is seen by the next one.
    """
    held = files_holding(read_holdings(home, folder), wanted)
    if held is not None:
        catalog = load_catalog(folder, only=held)
        if all(video in catalog.bad_video_ids or str(video) in catalog.videos for video in wanted):
            return catalog
    return load_catalog(folder)
