"""Reading PsTuts-VQA JSON files: a list of video records (checked by pstuts_record.py), or what a broken file holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pstuts_pipeline.settings import SourceSettings, source_limits
from pstuts_pipeline.sources.model import (
    FileErrors,
    InputError,
    QAPair,
    RawPhrase,
    SourceVideo,
    content_hash,
    invalid_text_at,
    summarize,
    utf8_text,
)
from pstuts_pipeline.sources.pstuts_record import OversizedNumber, json_type, validate_record
from pstuts_pipeline.sources.reading import UnreadableFile, read_source_bytes

# Enough of a broken file's text to tell which videos it holds and where it breaks.
VIDEO_ID_KEY = re.compile(r'"video_id"\s*:\s*(\d+)')
SENT_ID_KEY = re.compile(r'"sent_id"\s*:\s*(\d+)')
ANY_KEY = re.compile(r'"(\w+)"\s*:')
# Longer integers are kept as their digit count: int() of 5,000 digits raises a ValueError naming no file.
MAX_INT_CHARS = 24


def parse_int(digits: str) -> int | OversizedNumber:
    return int(digits) if len(digits) <= MAX_INT_CHARS else OversizedNumber(digits)


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


def video_of(record: Any, file: str, index: int = 0, limits: SourceSettings | None = None) -> SourceVideo:
    """A record as a typed video; its hash stays that of the record, so stored videos are not redone."""
    video = validate_record(record, file, index, limits or source_limits())
    try:
        hashed = content_hash(record)
    except UnicodeEncodeError:
        # JSON's "\ud800" escape gives a lone surrogate, which no file, database or page can hold as UTF-8.
        raise InputError(
            file,
            "holds a lone surrogate escape (such as \\ud800): not valid Unicode text",
            video.video_id,
            invalid_text_at(record),
        ) from None
    return SourceVideo(
        video_id=video.video_id,
        title=video.title,
        desc=video.desc,
        url=video.url,
        phrases=tuple(RawPhrase(p.sent_id, p.sent, p.begin, p.end) for p in video.transcripts),
        qa=tuple(QAPair(q.sent_id, q.q, q.a) for q in video.qa),
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
    limits = source_limits()  # read once per file, not once per record
    for index, record in enumerate(records):
        try:
            videos.append(video_of(record, file, index, limits))
        except InputError as exc:
            rejected.add(exc)
    return videos, rejected.errors()
