"""Where a cited moment can be played: local media beside a caption file, an http(s) video URL, or only a link.

Only two kinds of source ever reach the page: `/media/<video id>` (a file the index found beside a caption file in
the data folder, never a path a request names) and http(s) URLs. Anything else in the data (javascript:, file:,
an empty url) gives no link at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pstuts_pipeline.sources.captions import CAPTION_SUFFIXES, read_caption_file

# What an HTML5 <video> plays in every browser we test (WebM) and most others (MP4); served with Range support.
MEDIA_SUFFIXES = (".mp4", ".webm", ".ogv", ".m4v")
MEDIA_ROUTE = "/media"


@dataclass(frozen=True)
class Player:
    """How the page plays a moment: `video` (an embeddable source, with #t=), `link` (a page to open), or `none`."""

    kind: Literal["video", "link", "none"]
    src: str | None


def web_url(url: str) -> bool:
    """Whether a URL from the data is a plain http(s) address the page may link to."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    # Whitespace and control characters have no place in a URL; browsers strip some of them before the scheme.
    return parts.scheme in ("http", "https") and bool(parts.netloc) and url.isprintable() and " " not in url


def player(video_id: int, url: str, seconds: float, local: dict[int, Path]) -> Player:
    """The source the page plays a moment from: local media first, then an http(s) video URL, else a link or none."""
    moment = f"#t={seconds:.1f}"
    if video_id in local:
        return Player("video", f"{MEDIA_ROUTE}/{video_id}{moment}")
    if not web_url(url):
        return Player("none", None)
    base = url.split("#")[0]
    embeddable = urlsplit(base).path.lower().endswith(MEDIA_SUFFIXES)
    return Player("video" if embeddable else "link", base + moment)


class MediaIndex:
    """Video id -> media file beside its caption file in the data folder; rescanned when the folder changes."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._files: dict[int, Path] = {}

    def files(self) -> dict[int, Path]:
        """Every playable local file by video id (a folder that cannot be read has none)."""
        try:
            stamp = self.folder.stat().st_mtime_ns
        except OSError:
            return {}
        with self._lock:
            if stamp != self._stamp:
                self._files, self._stamp = scan(self.folder), stamp
            return dict(self._files)


def scan(folder: Path) -> dict[int, Path]:
    """Media files that share a caption file's name, inside the folder itself (a symlink out of it is ignored)."""
    root = folder.resolve()
    found: dict[int, Path] = {}
    for media in sorted(folder.glob("*")):
        if media.suffix.lower() not in MEDIA_SUFFIXES:
            continue
        resolved = media.resolve()
        if resolved.parent != root or not resolved.is_file():
            continue
        for suffix in CAPTION_SUFFIXES:
            caption = media.with_suffix(suffix)
            if caption.is_file():
                videos, _ = read_caption_file(caption)
                if videos:
                    found.setdefault(videos[0].video_id, resolved)
                break
    return found
