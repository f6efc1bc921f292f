"""Loading, validating and time-repairing PsTuts-VQA-format transcripts (pure domain code, no Dagster)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIRED_TEXT_FIELDS = ("title", "url")
OPTIONAL_TEXT_FIELDS = ("desc", "length")
MISSING = object()
# Enough of a broken file's text to tell which videos it holds and where it breaks.
VIDEO_ID_KEY = re.compile(r'"video_id"\s*:\s*(\d+)')
SENT_ID_KEY = re.compile(r'"sent_id"\s*:\s*(\d+)')
ANY_KEY = re.compile(r'"(\w+)"\s*:')


class InputError(ValueError):
    """A problem in the source data that names the file, the video and the field."""

    def __init__(self, file: str, message: str, video_id: int | None = None, field: str | None = None):
        self.file = file
        self.video_id = video_id
        self.field = field
        self.detail = message
        where = [file]
        if video_id is not None:
            where.append(f"video {video_id}")
        if field is not None:
            where.append(field)
        super().__init__(": ".join(where) + ": " + message)


@dataclass(frozen=True)
class Phrase:
    """One timed transcript phrase, as spoken, with repaired times."""

    sent_id: int
    text: str
    begin: float
    end: float


@dataclass(frozen=True)
class QAPair:
    """A crowd-written question whose answer is spoken in phrase `sent_id`."""

    sent_id: int
    question: str
    answer: str


@dataclass(frozen=True)
class SourceVideo:
    """A validated video record together with where it came from and a hash of its content."""

    video_id: int
    record: dict[str, Any]
    file: str
    content_hash: str

    @property
    def partition_key(self) -> str:
        return str(self.video_id)


@dataclass
class Catalog:
    """Every valid video in a data folder, plus the errors that kept the others out."""

    videos: dict[str, SourceVideo] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)

    @property
    def bad_video_ids(self) -> set[int]:
        return {e.video_id for e in self.errors if e.video_id is not None}

    @property
    def hides_videos(self) -> bool:
        """Some input could not be tied to a video, so a video missing from the catalog may only be unreadable."""
        return any(e.video_id is None for e in self.errors)


@dataclass(frozen=True)
class TimeRepairs:
    """How many phrase times were repaired, by rule, so the repairs are visible."""

    begin_filled: int = 0
    end_filled: int = 0
    end_before_begin: int = 0
    begin_moved_forward: int = 0

    @property
    def total(self) -> int:
        return self.begin_filled + self.end_filled + self.end_before_begin + self.begin_moved_forward

    def as_dict(self) -> dict[str, int]:
        return {
            "begin_filled": self.begin_filled,
            "end_filled": self.end_filled,
            "end_before_begin": self.end_before_begin,
            "begin_moved_forward": self.begin_moved_forward,
        }


def content_hash(record: dict[str, Any]) -> str:
    """Hash a record canonically so an unchanged video hashes the same whatever its file's layout."""
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def normalize_text(text: str) -> str:
    """Collapse internal whitespace so a phrase is one line and joins cleanly."""
    return re.sub(r"\s+", " ", text).strip()


def _describe(value: Any) -> str:
    return json.dumps(value)[:60] if not isinstance(value, str) else f'"{value[:60]}"'


def _problem(value: Any, expected: str) -> str:
    return "is missing" if value is MISSING else f"is {_describe(value)}, not {expected}"


def _is_time(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0)
    )


def validate_record(record: Any, file: str, index: int) -> int:
    """Check one video record field by field and return its video id; raise InputError naming the field."""
    if not isinstance(record, dict):
        raise InputError(file, f"record {index} is {type(record).__name__}, not an object")
    video_id = record.get("video_id", MISSING)
    if not isinstance(video_id, int) or isinstance(video_id, bool):
        raise InputError(file, f"record {index}: 'video_id' {_problem(video_id, 'an integer')}")
    for name in REQUIRED_TEXT_FIELDS:
        if not isinstance(record.get(name), str):
            raise InputError(file, _problem(record.get(name, MISSING), "a string"), video_id, name)
    for name in OPTIONAL_TEXT_FIELDS:
        if name in record and not isinstance(record[name], str):
            raise InputError(file, _problem(record[name], "a string"), video_id, name)
    phrases = record.get("transcripts", MISSING)
    if not isinstance(phrases, list):
        raise InputError(file, _problem(phrases, "a list of phrases"), video_id, "transcripts")
    if not phrases:
        raise InputError(file, "is empty: a video needs at least one phrase", video_id, "transcripts")
    seen_ids: set[int] = set()
    for i, phrase in enumerate(phrases):
        where = f"transcripts[{i}]"
        if not isinstance(phrase, dict):
            raise InputError(file, f"is {_describe(phrase)}, not an object", video_id, where)
        sent_id = phrase.get("sent_id", MISSING)
        if not isinstance(sent_id, int) or isinstance(sent_id, bool):
            raise InputError(file, _problem(sent_id, "an integer"), video_id, f"{where}.sent_id")
        if sent_id in seen_ids:
            raise InputError(file, f"{sent_id} appears twice", video_id, f"{where}.sent_id")
        seen_ids.add(sent_id)
        if not isinstance(phrase.get("sent"), str):
            raise InputError(file, _problem(phrase.get("sent", MISSING), "a string"), video_id, f"{where}.sent")
        for key in ("begin", "end"):
            # null is how the source marks an unknown time; a missing key is a broken record.
            value = phrase.get(key, MISSING)
            if value is MISSING or not _is_time(value):
                raise InputError(file, _problem(value, "a number of seconds or null"), video_id, f"{where}.{key}")
    if not any(normalize_text(p["sent"]) for p in phrases):
        raise InputError(file, "holds only empty phrases", video_id, "transcripts")
    qa = record.get("qa", [])
    if not isinstance(qa, list):
        raise InputError(file, f"is {_describe(qa)}, not a list", video_id, "qa")
    for i, pair in enumerate(qa):
        where = f"qa[{i}]"
        if not isinstance(pair, dict):
            raise InputError(file, f"is {_describe(pair)}, not an object", video_id, where)
        if pair.get("sent_id") not in seen_ids:
            raise InputError(file, _problem(pair.get("sent_id", MISSING), "the sent_id of a phrase"), video_id, f"{where}.sent_id")
        for key in ("q", "a"):
            if not isinstance(pair.get(key), str):
                raise InputError(file, _problem(pair.get(key, MISSING), "a string"), video_id, f"{where}.{key}")
    return video_id


def unreadable_file_errors(file: str, text: str, position: int, problem: str) -> list[InputError]:
    """Name every video a file that cannot be parsed seems to hold, and the field where it breaks.

    Without this, the videos of a broken file would look deleted and lose their points.
    """
    found = [(m.start(), int(m.group(1))) for m in VIDEO_ID_KEY.finditer(text)]
    if not found:
        return [InputError(file, problem)]
    starts_before = [(start, video_id) for start, video_id in found if start < position]
    broken = starts_before[-1][1] if starts_before else None
    errors = []
    if starts_before:
        start = starts_before[-1][0]
        keys = [m.group(1) for m in ANY_KEY.finditer(text, start, position)]
        sent_ids = [m.group(1) for m in SENT_ID_KEY.finditer(text, start, position)]
        near = f" (in the phrase with sent_id {sent_ids[-1]})" if sent_ids and keys[-1] != "qa" else ""
        errors.append(InputError(file, problem + near, broken, keys[-1]))
    for video_id in dict.fromkeys(v for _, v in found):
        if video_id != broken:
            where = f" (in video {broken})" if broken is not None else ""
            errors.append(InputError(file, f"not read: the file {problem}{where}", video_id))
    return errors


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def read_video_file(path: Path) -> tuple[list[SourceVideo], list[InputError]]:
    """Read one JSON file of videos; a bad record costs only that record, a bad file only that file."""
    file = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], [InputError(file, f"cannot be read: {exc.strerror}")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        readable = data.decode("utf-8", errors="replace")
        position = len(data[: exc.start].decode("utf-8", errors="replace"))
        problem = f"is not UTF-8 text: {exc.reason} at byte {exc.start} (line {_line(readable, position)})"
        return [], unreadable_file_errors(file, readable, position, problem)
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        problem = f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        return [], unreadable_file_errors(file, text, exc.pos, problem)
    if not isinstance(records, list):
        problem = f"holds a JSON {type(records).__name__}, not a list of videos"
        return [], unreadable_file_errors(file, text, 0, problem)
    videos: list[SourceVideo] = []
    errors: list[InputError] = []
    for index, record in enumerate(records):
        try:
            video_id = validate_record(record, file, index)
        except InputError as exc:
            errors.append(exc)
            continue
        videos.append(SourceVideo(video_id, record, file, content_hash(record)))
    return videos, errors


def load_catalog(paths: list[Path] | Path) -> Catalog:
    """Load every `*.json` in a folder (or the given files); a video id found twice is refused everywhere."""
    catalog = Catalog()
    if isinstance(paths, Path) and not paths.is_dir():
        # An unmounted or mistyped folder must not look like a folder whose videos were all deleted.
        catalog.errors.append(InputError(str(paths), "is not a folder: no transcripts can be read from it"))
    files = sorted(paths.glob("*.json")) if isinstance(paths, Path) else list(paths)
    found: list[SourceVideo] = []
    for path in files:
        videos, errors = read_video_file(path)
        found.extend(videos)
        catalog.errors.extend(errors)
    counts = Counter(v.video_id for v in found)
    for video in found:
        if counts[video.video_id] > 1:
            others = sorted({v.file for v in found if v.video_id == video.video_id} - {video.file}) or [video.file]
            catalog.errors.append(
                InputError(video.file, f"is also defined in {', '.join(others)}", video.video_id, "video_id")
            )
        else:
            catalog.videos[video.partition_key] = video
    return catalog


def _next_known_time(raw: list[dict[str, Any]], start: int, at_least: float) -> float | None:
    for phrase in raw[start:]:
        for key in ("begin", "end"):
            value = phrase.get(key)
            if value is not None and value >= at_least:
                return float(value)
    return None


def repair_times(raw_phrases: list[dict[str, Any]]) -> tuple[list[Phrase], TimeRepairs]:
    """Give every phrase a time span so that spans never overlap and never go backwards.

    Rules, applied in order to each phrase:
    1. a missing `begin` takes the previous phrase's (repaired) end, or 0 for the first phrase;
    2. a `begin` before the previous phrase's end moves forward to that end;
    3. a missing `end` takes the next known time at or after `begin`, or `begin` if none is known;
    4. an `end` before `begin` is treated the same way as a missing one.
    """
    repaired: list[Phrase] = []
    counts = Counter[str]()
    previous_end = 0.0
    for i, phrase in enumerate(raw_phrases):
        begin = phrase.get("begin")
        if begin is None:
            begin = previous_end
            counts["begin_filled"] += 1
        elif begin < previous_end:
            begin = previous_end
            counts["begin_moved_forward"] += 1
        end = phrase.get("end")
        if end is None or end < begin:
            counts["end_filled" if end is None else "end_before_begin"] += 1
            end = _next_known_time(raw_phrases, i + 1, begin)
            end = begin if end is None else end
        repaired.append(Phrase(phrase["sent_id"], normalize_text(phrase["sent"]), float(begin), float(end)))
        previous_end = float(end)
    return repaired, TimeRepairs(**counts)


def qa_pairs(record: dict[str, Any]) -> list[QAPair]:
    """The question-answer pairs of a record, typed."""
    return [QAPair(int(p["sent_id"]), p["q"], p["a"]) for p in record.get("qa", [])]
