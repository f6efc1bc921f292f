"""One place that reads video sources, whatever their format, into typed `SourceVideo`s (pure code, no Dagster).

Formats are told apart by suffix: `.srt` and `.vtt` are captions (one video per file), anything else is
PsTuts-VQA JSON (a list of videos per file).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Collection
from pathlib import Path

from pstuts_pipeline import settings
from pstuts_pipeline.sources.captions import CAPTION_SUFFIXES, read_caption_file
from pstuts_pipeline.sources.model import (
    VIDEO_FIELDS,
    Catalog,
    InputError,
    QAPair,
    RawPhrase,
    SourceVideo,
    normalize_text,
    summarize,
)
from pstuts_pipeline.sources.pstuts_json import read_pstuts_file

__all__ = [
    "VIDEO_FIELDS",
    "Catalog",
    "InputError",
    "QAPair",
    "RawPhrase",
    "SourceVideo",
    "load_catalog",
    "normalize_text",
    "read_source_file",
    "source_files",
]


SOURCE_SUFFIXES = (".json", *CAPTION_SUFFIXES)


def is_source_name(name: str) -> bool:
    """Whether a file name is one to read: a known suffix in any case, and not hidden.

    Hidden names are editors' and macOS's: `.#x.json` (an Emacs lock), `._x.json` (AppleDouble metadata).
    """
    return not name.startswith(".") and Path(name).suffix.lower() in SOURCE_SUFFIXES


def source_files(folder: Path) -> list[Path]:
    """The files of a data folder that hold videos, in a stable order."""
    return sorted(p for p in folder.glob("*") if is_source_name(p.name))


def read_source_file(path: Path) -> tuple[list[SourceVideo], list[InputError]]:
    """The videos of one file, read by its format; a bad video costs only that video, a bad file only that file.

    Whatever goes wrong in reading one file (the readers name what they expect; this catches what they do not) is
    that file's error: it never stops the other files.
    """
    try:
        if path.suffix.lower() in CAPTION_SUFFIXES:
            return read_caption_file(path)
        return read_pstuts_file(path)
    except (RecursionError, MemoryError, ValueError, OSError, UnicodeError) as exc:
        return [], [InputError(str(path), f"could not be read ({type(exc).__name__})", unsure=True)]


def outside_problem(path: Path, root: Path) -> str | None:
    """Why a file of the data folder is not read because it lies elsewhere (a symlink out of it), or None.

    Its content is never read, so no line of /etc/shadow can reach an error message or the event log.
    """
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return "is a link that leads nowhere (or in a loop): not read"
    return None if resolved.is_relative_to(root) else "is a link to a file outside the data folder: not read"


def settling_problem(path: Path, settle_s: float, now: float) -> str | None:
    """Why a file is not read yet because it was written moments ago (a copy still under way), or None."""
    try:
        age = now - path.stat().st_mtime
    except OSError:
        return None  # the reader says why it cannot be read
    if age >= settle_s:
        return None
    return f"is still being written (changed {max(age, 0):.1f} s ago): read once unchanged for {settle_s:g} s (PSTUTS_SETTLE_S)"


def youngest_change_age(folder: Path) -> float | None:
    """Seconds since the last write to any source file (or sidecar) of a folder, or None for an empty folder."""
    times = []
    for path in folder.glob("*"):
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return time.time() - max(times) if times else None


def wait_until_settled(folder: Path, settle_s: float, longest_s: float = 30.0) -> None:
    """Wait until no file of the folder was written within `settle_s` (at most `longest_s`), for a command run now."""
    deadline = time.monotonic() + longest_s
    while settle_s > 0 and time.monotonic() < deadline:
        age = youngest_change_age(folder) if folder.is_dir() else None
        if age is None or age >= settle_s:
            return
        time.sleep(min(settle_s - max(age, 0), max(deadline - time.monotonic(), 0)) + 0.01)


def duplicate_errors(found: list[SourceVideo]) -> list[InputError]:
    """One error per file holding a video id that is defined more than once, saying where else it is."""
    places: dict[int, list[str]] = defaultdict(list)
    for video in found:
        places[video.video_id].append(video.file)
    errors = []
    for video_id, files in places.items():
        if len(files) == 1:
            continue
        counts = Counter(files)
        for file, count in counts.items():
            others = sorted(set(counts) - {file})
            parts = [f"is also defined in {', '.join(others)}"] if others else []
            if count > 1:
                parts.append(f"is defined {count} times in this file")
            errors.append(InputError(file, "; ".join(parts), video_id, "video_id"))
    return errors


def load_catalog(paths: list[Path] | Path, settle_s: float = 0.0, only: Collection[str] | None = None) -> Catalog:
    """Load every source file of a folder (or the given files); a video id found twice is refused everywhere.

    In a folder, a file that is a link out of it is refused unread (unless PSTUTS_ALLOW_LINKS_OUTSIDE=1), and one
    written less than `settle_s` ago is not read yet; both hold back the videos it held before (see `holdings`).
    `only` reads just those files of the folder (a run's own videos' files), with the same checks.
    """
    catalog = Catalog()
    if isinstance(paths, Path) and not paths.is_dir():
        # An unmounted or mistyped folder must not look like a folder whose videos were all deleted.
        catalog.errors.append(InputError(str(paths), "is not a folder: no transcripts can be read from it"))
    root = paths.resolve() if isinstance(paths, Path) and not settings.source_limits().allow_links_outside else None
    files = source_files(paths) if isinstance(paths, Path) else list(paths)
    if only is not None:
        files = [path for path in files if str(path) in only]
    found: list[SourceVideo] = []
    now = time.time()
    for path in files:
        catalog.files.append(str(path))
        problem = None if root is None else outside_problem(path, root)
        problem = problem or (settling_problem(path, settle_s, now) if settle_s > 0 else None)
        if problem is not None:
            catalog.errors.append(InputError(str(path), problem, unsure=True))
            continue
        videos, errors = read_source_file(path)
        found.extend(videos)
        catalog.errors.extend(errors)
    duplicates = duplicate_errors(found)
    duplicated = {e.video_id for e in duplicates}
    by_file: dict[str, list[InputError]] = defaultdict(list)
    for error in duplicates:
        by_file[error.file].append(error)
    for file, errors in by_file.items():
        catalog.errors.extend(summarize(file, errors, "duplicate video ids"))
    for video in found:
        if video.video_id not in duplicated:
            catalog.videos[video.partition_key] = video
    return catalog
