"""One place that reads video sources, whatever their format, into typed `SourceVideo`s (pure code, no Dagster).

Formats are told apart by suffix: `.srt` and `.vtt` are captions (one video per file), anything else is
PsTuts-VQA JSON (a list of videos per file).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

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
    """The videos of one file, read by its format; a bad video costs only that video, a bad file only that file."""
    if path.suffix.lower() in CAPTION_SUFFIXES:
        return read_caption_file(path)
    return read_pstuts_file(path)


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


def load_catalog(paths: list[Path] | Path) -> Catalog:
    """Load every source file of a folder (or the given files); a video id found twice is refused everywhere."""
    catalog = Catalog()
    if isinstance(paths, Path) and not paths.is_dir():
        # An unmounted or mistyped folder must not look like a folder whose videos were all deleted.
        catalog.errors.append(InputError(str(paths), "is not a folder: no transcripts can be read from it"))
    files = source_files(paths) if isinstance(paths, Path) else list(paths)
    found: list[SourceVideo] = []
    for path in files:
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
