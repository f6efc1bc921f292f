"""Reading SRT and WebVTT caption files: one video per file, each cue a phrase timed by the cue.

A caption file says nothing of its video, so the rest comes from beside it:
- the video id from `video_id` in a sidecar `<name>.toml`, else from the number the file name starts with
  (`1234 - Remove a background.srt` is video 1234);
- the title, description and url from the sidecar's `title`, `desc` and `url`, else the title from the file name
  after the number (`Remove a background`), no description, and as url the video file beside the caption file (same
  name, a common video extension) as a file:// URL, or none.
"""

from __future__ import annotations

import html
import os
import re
import tomllib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pstuts_pipeline.settings import source_limits
from pstuts_pipeline.sources.model import (
    InputError,
    RawPhrase,
    SourceVideo,
    content_hash,
    encodes,
    id_problem,
    length_problem,
    normalize_text,
    seconds_problem,
    utf8_text,
)
from pstuts_pipeline.sources.reading import UnreadableFile, read_source_bytes

CAPTION_SUFFIXES = (".srt", ".vtt")
SIDECAR_SUFFIX = ".toml"
# A sidecar holds four short fields; anything far bigger is not one.
SIDECAR_MAX_BYTES = 1 << 20
SIDECAR_KEYS = {"video_id": int, "title": str, "desc": str, "url": str}
NAMED_ID = re.compile(r"(\d+)\b\s*(?:[-–_.:]\s*)?(.*)", re.DOTALL)  # a name may hold a newline
# SRT writes 00:01:02,500 and WebVTT 01:02.500 or 00:01:02.500; either is read in either kind of file.
TIMESTAMP = re.compile(r"^(?:(\d+):)?([0-5]\d):([0-5]\d)[,.](\d{1,3})$")
TAG = re.compile(r"<[^>]*>")
LINE_BREAK = re.compile(r"\r\n|\r|\n")
# WebVTT blocks that are not cues.
NOT_CUES = ("NOTE", "STYLE", "REGION")


def sidecar_of(path: Path) -> Path:
    return path.with_suffix(SIDECAR_SUFFIX)


def _sidecar(path: Path, named_id: int | None) -> dict[str, Any]:
    """The sidecar's fields, checked, or none when there is no sidecar.

    Any problem raises an InputError that names the video the sidecar gives (its `video_id` line, when one can still
    be found) and holds back every video the caption file held before: a broken sidecar must not look like a video
    that left the folder. A symlink loop or a dangling link is a sidecar that cannot be read, not a missing one.
    """
    sidecar = sidecar_of(path)
    if not os.path.lexists(sidecar):
        return {}
    given_id: int | None = None

    def refused(problem: str, key: str | None = None) -> InputError:
        return InputError(str(sidecar), problem, given_id, key, unsure=True, holder=str(path))

    try:
        text, problem, _ = utf8_text(read_source_bytes(sidecar, max_bytes=SIDECAR_MAX_BYTES))
    except UnreadableFile as exc:
        raise refused(str(exc.strerror)) from None
    given_id = sidecar_video_id(text)
    if problem is not None:
        raise refused(problem)
    try:
        fields = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise refused(f"is not valid TOML: {exc}") from None
    except RecursionError:
        raise refused("nests tables or arrays too deeply to be read (a sidecar needs none)") from None
    except ValueError:  # an integer of thousands of digits: Python refuses to convert it
        raise refused("holds a number too long to be read (over 4,300 digits)") from None
    if "video_id" not in fields:
        given_id = named_id  # the sidecar reads, and leaves the id to the file name
    for key, value in fields.items():
        expected = SIDECAR_KEYS.get(key)
        if expected is None:
            raise refused(f"unknown key (known: {', '.join(SIDECAR_KEYS)})", _shown_key(key))
        if not isinstance(value, expected) or isinstance(value, bool):
            kind = "an integer" if expected is int else "a string"
            raise refused(f"is {_shown(value)}, not {kind}", key)
        if isinstance(value, int) and (problem := id_problem(value)):
            raise refused(problem, key)
        if isinstance(value, str):
            if problem := length_problem(value, source_limits().max_field_chars, "PSTUTS_MAX_FIELD_CHARS"):
                raise refused(problem, key)
            if not encodes(value):
                raise refused("holds a lone surrogate escape: not valid Unicode text", key)
    return fields


SIDECAR_ID_LINE = re.compile(r'^\s*video_id\s*=\s*["\']?(\d{1,19})\b', re.MULTILINE)


def sidecar_video_id(text: str) -> int | None:
    """The video id a sidecar gives, from its `video_id` line even when the rest of it does not parse."""
    match = SIDECAR_ID_LINE.search(text)
    return int(match.group(1)) if match and not id_problem(int(match.group(1))) else None


def _shown_key(key: str) -> str:
    return _shown(key).strip("'\"")


def _shown(value: object) -> str:
    """A bad value as its repr, cut short: a field may be megabytes long."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _seconds(value: str, file: str, video_id: int, where: str) -> float:
    match = TIMESTAMP.match(value)
    if match is None:
        raise InputError(file, f"{_shown(value)} is not a timestamp like 00:01:02,500", video_id, where)
    hours, minutes, seconds, fraction = match.groups()
    # Bounded before int(): an hour field of 400 digits is too large to convert to float.
    if hours and len(hours.lstrip("0")) > 6:
        raise InputError(
            file, f"{_shown(value)}: an hour field of {len(hours)} digits is no time in a video", video_id, where
        )
    total = int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + int(fraction.ljust(3, "0")) / 1000
    problem = seconds_problem(total)
    if problem:
        raise InputError(file, f"{value} {problem}", video_id, where)
    return total


def _cue_text(lines: list[str]) -> str:
    """A cue's lines as one phrase, without markup such as <i> or <v Speaker>."""
    return normalize_text(html.unescape(TAG.sub("", " ".join(lines))))


def parse_cues(text: str, file: str, video_id: int, webvtt: bool) -> list[RawPhrase]:
    """Each cue as a phrase numbered from 1, in file order; raise InputError naming the cue and what is wrong."""
    blocks: list[list[str]] = [[]]
    # Lines end at \n, \r\n or \r only: str.splitlines would also split a cue's text at U+2028 or a form feed.
    for line in LINE_BREAK.split(text):
        if line.strip():
            blocks[-1].append(line.strip())
        elif blocks[-1]:
            blocks.append([])
    blocks = [b for b in blocks if b]
    if webvtt:
        if not blocks or not re.match(r"WEBVTT\b", blocks[0][0]):
            raise InputError(file, "does not start with 'WEBVTT': not a WebVTT file", video_id)
        blocks = [b for b in blocks[1:] if b[0].split(maxsplit=1)[0] not in NOT_CUES]
    limits = source_limits()
    limit, text_limit = limits.max_phrases_per_video, limits.max_phrase_chars
    if len(blocks) > limit:
        raise InputError(
            file, f"holds {len(blocks):,} cues, over the limit of {limit:,} (PSTUTS_MAX_PHRASES_PER_VIDEO)", video_id
        )
    phrases: list[RawPhrase] = []
    for block in blocks:
        where = f"cue {len(phrases) + 1}"
        timing = next((i for i, line in enumerate(block) if "-->" in line), None)
        if timing is None or timing > 1:
            # Before the timing line there may be one line: the cue's number (SRT) or identifier (WebVTT).
            raise InputError(
                file, f"has no timing line like '00:00:01,000 --> 00:00:02,500': {_shown(block[0])}", video_id, where
            )
        begin, _, rest = block[timing].partition("-->")
        end = rest.split()[0] if rest.split() else ""  # WebVTT cue settings (align:start ...) follow the end time
        text = _cue_text(block[timing + 1 :])
        if problem := length_problem(text, text_limit, "PSTUTS_MAX_PHRASE_CHARS"):
            raise InputError(file, problem, video_id, where)
        phrases.append(
            RawPhrase(
                len(phrases) + 1,
                text,
                _seconds(begin.strip(), file, video_id, f"{where}: begin"),
                _seconds(end, file, video_id, f"{where}: end"),
            )
        )
    if not phrases:
        raise InputError(file, "holds no cues: a video needs at least one phrase", video_id)
    if not any(p.text for p in phrases):
        raise InputError(file, "holds only empty cues", video_id)
    return phrases


# Containers browsers and players open at a `#t=` fragment; the video beside its captions shares their name.
VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".mov", ".m4v", ".ogv", ".avi")


def media_beside(path: Path) -> str:
    """The file:// URL of the video file beside a caption file (same name, a common video extension), or ""."""
    for suffix in VIDEO_SUFFIXES:
        for candidate in (path.with_suffix(suffix), path.with_suffix(suffix.upper())):
            if candidate.is_file():
                return candidate.resolve().as_uri()
    return ""


def read_caption_file(path: Path) -> tuple[list[SourceVideo], list[InputError]]:
    """The one video of an SRT or WebVTT file, or the error naming the file, the cue and what is wrong."""
    file = str(path)
    named = NAMED_ID.fullmatch(path.stem)
    if named and len(named.group(1)) > 24:
        digits = f"the file name starts with a number of {len(named.group(1))} digits, not a video id"
        return [], [InputError(file, digits, field="video_id")]
    named_id = int(named.group(1)) if named else None
    try:
        meta = _sidecar(path, named_id)
        video_id = meta.get("video_id", named_id)
        if video_id is not None and (problem := id_problem(video_id)):
            # A file name of 300 digits: the id would not fit SQLite, Qdrant or a file name of its own.
            raise InputError(file, f"the id in the file name {problem}", field="video_id")
        if video_id is None:
            sidecar = path.with_suffix(SIDECAR_SUFFIX).name
            raise InputError(
                file,
                f"no video id: start the file name with it ('1234 - Title{path.suffix}') or set it in {sidecar}",
                field="video_id",
            )
        try:
            data = read_source_bytes(path)
        except UnreadableFile as exc:
            raise InputError(file, str(exc.strerror), video_id) from None
        text, problem, _ = utf8_text(data)
        if problem is not None:
            raise InputError(file, problem, video_id)
        webvtt = path.suffix.lower() == ".vtt" or text.startswith("WEBVTT")
        phrases = parse_cues(text, file, video_id, webvtt)
    except InputError as error:
        return [], [error]
    title = meta.get("title") or (normalize_text(named.group(2)) if named else "") or normalize_text(path.stem)
    fields = {
        "video_id": video_id,
        "title": title,
        "desc": meta.get("desc", ""),
        "url": meta.get("url") or media_beside(path),
    }
    typed = {**fields, "phrases": [asdict(p) for p in phrases]}
    return [SourceVideo(**fields, phrases=tuple(phrases), qa=(), file=file, content_hash=content_hash(typed))], []
