"""What each source file held at its last good read, so a file that cannot be read now holds its videos back.

A file cut short by a copy, a sidecar with a typo or a record without an id hides which videos the file holds; without
this record the videos after the cut would look deleted and lose their points. It is kept in the Dagster home beside
the ledger, for one data folder; without it, one unreadable file holds back every removal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path

from pstuts_pipeline.sources.model import Catalog

HOLDINGS_FILE = "pstuts_source_holdings.json"
HOLDINGS_VERSION = 1

Holdings = dict[str, set[int]]


def read_holdings(home: Path | None, folder: Path) -> Holdings:
    """The videos each file of `folder` held at its last good read; empty when unknown."""
    if home is None:
        return {}
    try:
        raw = json.loads((home / HOLDINGS_FILE).read_text())
        if raw.get("version") != HOLDINGS_VERSION or raw.get("folder") != str(folder.resolve()):
            return {}
        return {str(file): {int(v) for v in videos} for file, videos in raw["files"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def updated_holdings(previous: Holdings, catalog: Catalog) -> Holdings:
    """Each file read now: what it holds now (the videos refused by name count as held); an unsure one: as before."""
    unsure = catalog.unsure_files
    current: Holdings = {file: set() for file in catalog.files if file not in unsure}
    for video in catalog.videos.values():
        if video.file in current:
            current[video.file].add(video.video_id)
    for error in catalog.errors:
        if error.holder in current:
            current[error.holder] |= error.video_ids
    kept = {file: previous[file] for file in unsure if file in previous}
    return current | kept


def files_holding(holdings: Holdings, videos: Collection[int]) -> set[str] | None:
    """The files that held these videos at their last good read; None when one of them is in no file we know of."""
    known = set().union(*holdings.values()) if holdings else set()
    return {file for file, held in holdings.items() if not held.isdisjoint(videos)} if set(videos) <= known else None


def write_holdings(home: Path | None, folder: Path, holdings: Holdings) -> None:
    """Replace the record in one step (a reader never sees half of it); nothing without a Dagster home."""
    if home is None:
        return
    path = home / HOLDINGS_FILE
    record = {
        "version": HOLDINGS_VERSION,
        "folder": str(folder.resolve()),
        "files": {file: sorted(videos) for file, videos in sorted(holdings.items())},
    }
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record))
    temporary.replace(path)


def remember_holdings(home: Path | None, folder: Path, catalog: Catalog) -> Holdings:
    """The holdings to judge this catalog by (those of the last good reads), recorded updated for the next one."""
    previous = read_holdings(home, folder)
    updated = updated_holdings(previous, catalog)
    if updated != previous:
        write_holdings(home, folder, updated)
    return updated
