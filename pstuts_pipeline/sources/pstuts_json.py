"""Reading and validating PsTuts-VQA JSON files: a list of video records, each with timed phrases and QA pairs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pstuts_pipeline.settings import source_limits
from pstuts_pipeline.sources.model import (
    MAX_ID,
    FileErrors,
    InputError,
    QAPair,
    RawPhrase,
    SourceVideo,
    content_hash,
    id_problem,
    invalid_text_at,
    length_problem,
    normalize_text,
    seconds_problem,
    summarize,
    utf8_text,
)
from pstuts_pipeline.sources.reading import UnreadableFile, read_source_bytes

REQUIRED_TEXT_FIELDS = ("title", "url")
OPTIONAL_TEXT_FIELDS = ("desc", "length")
MISSING = object()
# Enough of a broken file's text to tell which videos it holds and where it breaks.
VIDEO_ID_KEY = re.compile(r'"video_id"\s*:\s*(\d+)')
SENT_ID_KEY = re.compile(r'"sent_id"\s*:\s*(\d+)')
ANY_KEY = re.compile(r'"(\w+)"\s*:')
# A PsTuts record nests 3 levels (record, transcripts, phrase); room for extra fields, far from the stack's limit.
MAX_RECORD_DEPTH = 32
# Longer integers are kept as their digit count: int() of 5,000 digits raises a ValueError naming no file.
MAX_INT_CHARS = 24


class OversizedNumber:
    """A JSON integer too long to be anything a video holds, kept as its length so the record can be refused."""

    def __init__(self, digits: str):
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"a number of {self.digits:,} digits"


def parse_int(digits: str) -> int | OversizedNumber:
    return int(digits) if len(digits) <= MAX_INT_CHARS else OversizedNumber(digits)


JSON_TYPES = {
    OversizedNumber: "a number",
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _describe(value: Any) -> str:
    """A short JSON rendering of a bad value; control characters escaped so they never reach a terminal raw."""
    if isinstance(value, OversizedNumber):
        return repr(value)
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
    if isinstance(value, OversizedNumber) and expected == "an integer":
        expected = f"an id from 0 to {MAX_ID} (2**63 - 1)"  # every integer field of a record is an id
    return "is missing" if value is MISSING else f"is {_describe(value)}, not {expected}"


def _is_time(value: Any) -> bool:
    return value is None or (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply lists and objects nest in a value, counted without recursion and only up to `limit` + 1.

    An oversized number anywhere in it, even in a field nobody reads, is raised as the ValueError it would
    otherwise cause wherever the record is hashed or stored.
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, OversizedNumber):
            raise ValueError(f"holds {item!r}: no field of a video takes a number that long")
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
    if problem := id_problem(video_id):
        raise InputError(file, f"record {index}: 'video_id' {problem}")
    try:
        depth = nesting_depth(record, MAX_RECORD_DEPTH)
    except ValueError as error:
        raise InputError(file, str(error), video_id) from None
    if depth > MAX_RECORD_DEPTH:
        # Deeper values would exhaust Python's stack wherever the record is hashed, stored or shown.
        raise InputError(file, f"nests lists or objects more than {MAX_RECORD_DEPTH} levels deep", video_id)
    limits = source_limits()
    field_limit, phrase_limit, count_limit = (
        limits.max_field_chars,
        limits.max_phrase_chars,
        limits.max_phrases_per_video,
    )
    for name in REQUIRED_TEXT_FIELDS:
        if not isinstance(record.get(name), str):
            raise InputError(file, _problem(record.get(name, MISSING), "a string"), video_id, name)
    for name in OPTIONAL_TEXT_FIELDS:
        if name in record and not isinstance(record[name], str):
            raise InputError(file, _problem(record[name], "a string"), video_id, name)
    for name in (*REQUIRED_TEXT_FIELDS, *OPTIONAL_TEXT_FIELDS):
        if name in record and (problem := length_problem(record[name], field_limit, "PSTUTS_MAX_FIELD_CHARS")):
            raise InputError(file, problem, video_id, name)
    phrases = record.get("transcripts", MISSING)
    if not isinstance(phrases, list):
        raise InputError(file, _problem(phrases, "a list of phrases"), video_id, "transcripts")
    if not phrases:
        raise InputError(file, "is empty: a video needs at least one phrase", video_id, "transcripts")
    if len(phrases) > count_limit:
        raise InputError(
            file,
            f"holds {len(phrases):,} phrases, over the limit of {count_limit:,} (PSTUTS_MAX_PHRASES_PER_VIDEO)",
            video_id,
            "transcripts",
        )
    seen_ids: set[int] = set()
    for i, phrase in enumerate(phrases):
        where = f"transcripts[{i}]"
        if not isinstance(phrase, dict):
            raise InputError(file, f"is {_describe(phrase)}, not an object", video_id, where)
        sent_id = phrase.get("sent_id", MISSING)
        if not isinstance(sent_id, int) or isinstance(sent_id, bool):
            raise InputError(file, _problem(sent_id, "an integer"), video_id, f"{where}.sent_id")
        if problem := id_problem(sent_id):
            raise InputError(file, problem, video_id, f"{where}.sent_id")
        if sent_id in seen_ids:
            raise InputError(file, f"{sent_id} appears twice", video_id, f"{where}.sent_id")
        seen_ids.add(sent_id)
        if not isinstance(phrase.get("sent"), str):
            raise InputError(file, _problem(phrase.get("sent", MISSING), "a string"), video_id, f"{where}.sent")
        if problem := length_problem(phrase["sent"], phrase_limit, "PSTUTS_MAX_PHRASE_CHARS"):
            raise InputError(file, problem, video_id, f"{where}.sent")
        for key in ("begin", "end"):
            # null is how the source marks an unknown time; a missing key is a broken record.
            value = phrase.get(key, MISSING)
            if value is MISSING or not _is_time(value):
                raise InputError(file, _problem(value, "a number of seconds or null"), video_id, f"{where}.{key}")
            if value is not None and (problem := seconds_problem(value)):
                raise InputError(file, problem, video_id, f"{where}.{key}")
    if not any(normalize_text(p["sent"]) for p in phrases):
        raise InputError(file, "holds only empty phrases", video_id, "transcripts")
    qa = record.get("qa", [])
    if not isinstance(qa, list):
        raise InputError(file, f"is {_describe(qa)}, not a list", video_id, "qa")
    if len(qa) > count_limit:
        raise InputError(
            file,
            f"holds {len(qa):,} pairs, over the limit of {count_limit:,} (PSTUTS_MAX_PHRASES_PER_VIDEO)",
            video_id,
            "qa",
        )
    for i, pair in enumerate(qa):
        where = f"qa[{i}]"
        if not isinstance(pair, dict):
            raise InputError(file, f"is {_describe(pair)}, not an object", video_id, where)
        if type(pair.get("sent_id")) is not int or pair["sent_id"] not in seen_ids:  # `true` and `2.0` equal 1 and 2
            raise InputError(
                file, _problem(pair.get("sent_id", MISSING), "the sent_id of a phrase"), video_id, f"{where}.sent_id"
            )
        for key in ("q", "a"):
            if not isinstance(pair.get(key), str):
                raise InputError(file, _problem(pair.get(key, MISSING), "a string"), video_id, f"{where}.{key}")
            if problem := length_problem(pair[key], phrase_limit, "PSTUTS_MAX_PHRASE_CHARS"):
                raise InputError(file, problem, video_id, f"{where}.{key}")
    return video_id


def unreadable_file_errors(file: str, text: str, position: int, problem: str) -> list[InputError]:
    """Name every video a file that cannot be parsed seems to hold, and the field where it breaks.

    Without this, the videos of a broken file would look deleted and lose their points.
    """
    found = [(m.start(), int(m.group(1))) for m in VIDEO_ID_KEY.finditer(text)]
    if not found:
        return [InputError(file, problem, unsure=True)]
    starts_before = [(start, video_id) for start, video_id in found if start < position]
    broken = starts_before[-1][1] if starts_before else None
    errors = []
    if starts_before:
        start = starts_before[-1][0]
        keys = [m.group(1) for m in ANY_KEY.finditer(text, start, position)]
        sent_ids = [m.group(1) for m in SENT_ID_KEY.finditer(text, start, position)]
        near = f" (in the phrase with sent_id {sent_ids[-1]})" if sent_ids and keys[-1] != "qa" else ""
        errors.append(InputError(file, problem + near, broken, keys[-1], unsure=True))
    for video_id in dict.fromkeys(v for _, v in found):
        if video_id != broken:
            where = f" (in video {broken})" if broken is not None else ""
            errors.append(InputError(file, f"not read: the file {problem}{where}", video_id, unsure=True))
    return errors


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
    text, problem, position = utf8_text(data)
    if problem is not None:
        return None, unreadable_file_errors(file, text, position, problem)
    try:
        return json.loads(text, parse_int=parse_int), []
    except json.JSONDecodeError as exc:
        return None, unreadable_file_errors(file, text, exc.pos, _json_problem(exc))
    except RecursionError:
        # json's parser recurses per level: a file of 100,000 '[' exhausts Python's stack, not the memory.
        return None, unreadable_file_errors(
            file, text, 0, "is nested too deeply to be read (a PsTuts file needs 4 levels of brackets)"
        )


def raw_phrases(transcripts: list[dict[str, Any]]) -> tuple[RawPhrase, ...]:
    """A validated record's `transcripts` as typed phrases."""
    return tuple(RawPhrase(p["sent_id"], p["sent"], p["begin"], p["end"]) for p in transcripts)


def video_of(record: dict[str, Any], video_id: int, file: str) -> SourceVideo:
    """A validated record as a typed video; its hash stays that of the record, so stored videos are not redone."""
    try:
        hashed = content_hash(record)
    except UnicodeEncodeError:
        # JSON's "\ud800" escape gives a lone surrogate, which no file, database or page can hold as UTF-8.
        raise InputError(
            file,
            "holds a lone surrogate escape (such as \\ud800): not valid Unicode text",
            video_id,
            invalid_text_at(record),
        ) from None
    return SourceVideo(
        video_id=video_id,
        title=record["title"],
        desc=record.get("desc", ""),
        url=record["url"],
        phrases=raw_phrases(record["transcripts"]),
        qa=tuple(QAPair(int(p["sent_id"]), p["q"], p["a"]) for p in record.get("qa", [])),
        file=file,
        content_hash=hashed,
    )


def read_pstuts_file(path: Path) -> tuple[list[SourceVideo], list[InputError]]:
    """Read one JSON file of videos; a bad record costs only that record, a bad file only that file."""
    file = str(path)
    try:
        data = read_source_bytes(path)
    except UnreadableFile as exc:
        return [], [InputError(file, str(exc.strerror), unsure=True)]
    records, errors = _parse(file, data)
    if errors:
        return [], summarize(file, errors, "videos not read")
    if not isinstance(records, list):
        problem = f"holds {json_type(records)}, not a list of videos"
        return [], summarize(file, unreadable_file_errors(file, data.decode("utf-8", errors="replace"), 0, problem))
    videos: list[SourceVideo] = []
    rejected = FileErrors(file)
    for index, record in enumerate(records):
        try:
            videos.append(video_of(record, validate_record(record, file, index), file))
        except InputError as exc:
            rejected.add(exc)
    return videos, rejected.errors()
