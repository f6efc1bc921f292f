"""Loading, validating and time-repairing PsTuts-VQA-format transcripts (pure domain code, no Dagster)."""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import re
from collections import Counter, defaultdict
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
# A file with more bad records than this gets one summary line instead of one line per record.
LISTED_PER_FILE = 3
# A PsTuts record nests 3 levels (record, transcripts, phrase); room for extra fields, far from the stack's limit.
MAX_RECORD_DEPTH = 32
JSON_TYPES = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


class InputError(ValueError):
    """A problem in the source data that names the file, the video and the field."""

    def __init__(
        self,
        file: str,
        message: str,
        video_id: int | None = None,
        field: str | None = None,
        video_ids: frozenset[int] = frozenset(),
    ):
        self.file = file
        self.video_id = video_id
        self.field = field
        self.detail = message
        # A summary of many errors names no one video but must still hold back the points of those it covers.
        self.video_ids = video_ids | ({video_id} if video_id is not None else set())
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
        return {video_id for e in self.errors for video_id in e.video_ids}

    def missing_reason(self, key: str) -> str:
        """Why a video asked for by id is not in the catalog: a summarized error of its file, or no file at all."""
        for error in self.errors:
            if key.isdigit() and int(key) in error.video_ids:
                return str(error)
        return f"video {key} is in no file of the data folder"

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
    """A short JSON rendering of a bad value; control characters escaped so they never reach a terminal raw."""
    try:
        if isinstance(value, str):
            return json.dumps(value[:60], ensure_ascii=False)
        return json.dumps(value, ensure_ascii=False)[:60]
    except RecursionError:
        return "a value nested too deeply"


def json_type(value: Any) -> str:
    """A JSON value's kind in JSON's words, for messages read by people who wrote JSON, not Python."""
    return "null" if value is None else JSON_TYPES.get(type(value), type(value).__name__)


def _problem(value: Any, expected: str) -> str:
    return "is missing" if value is MISSING else f"is {_describe(value)}, not {expected}"


def _is_time(value: Any) -> bool:
    return value is None or (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply lists and objects nest in a value, counted without recursion and only up to `limit` + 1."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > limit:
                break
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def validate_record(record: Any, file: str, index: int) -> int:
    """Check one video record field by field and return its video id; raise InputError naming the field."""
    if not isinstance(record, dict):
        raise InputError(file, f"record {index} is {json_type(record)}, not an object")
    video_id = record.get("video_id", MISSING)
    if not isinstance(video_id, int) or isinstance(video_id, bool):
        raise InputError(file, f"record {index}: 'video_id' {_problem(video_id, 'an integer')}")
    if nesting_depth(record, MAX_RECORD_DEPTH) > MAX_RECORD_DEPTH:
        # Deeper values would exhaust Python's stack wherever the record is hashed, stored or shown.
        raise InputError(file, f"nests lists or objects more than {MAX_RECORD_DEPTH} levels deep", video_id)
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
            raise InputError(
                file, _problem(pair.get("sent_id", MISSING), "the sent_id of a phrase"), video_id, f"{where}.sent_id"
            )
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


@dataclass
class FileErrors:
    """A file's errors as they are when few, or as one summary line with the first few when many.

    One line per record of a file of 500,000 junk records floods the terminal and the event log, and keeping
    them all costs memory; only the first few are kept, the rest counted. The summary still holds back the
    points of every video it covers.
    """

    file: str
    what: str = "records rejected"
    first: list[InputError] = field(default_factory=list)
    count: int = 0
    video_ids: set[int] = field(default_factory=set)

    def add(self, error: InputError) -> None:
        self.count += 1
        self.video_ids |= error.video_ids
        if len(self.first) <= LISTED_PER_FILE:
            self.first.append(error.with_traceback(None))

    def errors(self) -> list[InputError]:
        if self.count <= LISTED_PER_FILE:
            return self.first
        listed = "; ".join(str(e).removeprefix(f"{self.file}: ") for e in self.first[:LISTED_PER_FILE])
        message = f"{self.count:,} {self.what}, first {LISTED_PER_FILE}: {listed}"
        return [InputError(self.file, message, video_ids=frozenset(self.video_ids))]


def summarize(file: str, errors: list[InputError], what: str = "records rejected") -> list[InputError]:
    """Errors of one file, summarized when there are many (see FileErrors)."""
    collected = FileErrors(file, what)
    for error in errors:
        collected.add(error)
    return collected.errors()


def _json_problem(exc: json.JSONDecodeError) -> str:
    # Some of json's messages end in "at" ("Unterminated string starting at"): do not say it twice.
    where = f"line {exc.lineno} column {exc.colno}"
    return (
        f"is not valid JSON: {exc.msg} {where}"
        if exc.msg.endswith(" at")
        else f"is not valid JSON: {exc.msg} at {where}"
    )


def _parse(file: str, data: bytes) -> tuple[Any, list[InputError]]:
    """The file's JSON, or the errors that name what it seems to hold and where it breaks."""
    # A byte-order mark is how some Windows editors save UTF-8; it is not part of the JSON.
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        readable = data[bom:].decode("utf-8", errors="replace")
        position = len(data[bom : bom + exc.start].decode("utf-8", errors="replace"))
        byte = bom + exc.start
        problem = f"is not UTF-8 text: {exc.reason} at byte {byte} (line {_line(readable, position)})"
        return None, unreadable_file_errors(file, readable, position, problem)
    try:
        return json.loads(text), []
    except json.JSONDecodeError as exc:
        return None, unreadable_file_errors(file, text, exc.pos, _json_problem(exc))
    except RecursionError:
        # json's parser recurses per level: a file of 100,000 '[' exhausts Python's stack, not the memory.
        return None, unreadable_file_errors(
            file, text, 0, "is nested too deeply to be read (a PsTuts file needs 4 levels of brackets)"
        )


def read_video_file(path: Path) -> tuple[list[SourceVideo], list[InputError]]:
    """Read one JSON file of videos; a bad record costs only that record, a bad file only that file."""
    file = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], [InputError(file, f"cannot be read: {exc.strerror}")]
    records, errors = _parse(file, data)
    if errors:
        return [], summarize(file, errors, "videos not read")
    if not isinstance(records, list):
        problem = f"holds {json_type(records)}, not a list of videos"
        return [], unreadable_file_errors(file, data.decode("utf-8", errors="replace"), 0, problem)
    videos: list[SourceVideo] = []
    rejected = FileErrors(file)
    for index, record in enumerate(records):
        try:
            video_id = validate_record(record, file, index)
            videos.append(SourceVideo(video_id, record, file, content_hash(record)))
        except InputError as exc:
            rejected.add(exc)
    return videos, rejected.errors()


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
