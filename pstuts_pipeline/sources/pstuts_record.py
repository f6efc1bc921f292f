"""One PsTuts-VQA record as typed pydantic models: each field refuses a bad value naming what it is and should be."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, NoReturn, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainValidator,
    StrictInt,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from pstuts_pipeline.settings import SourceSettings
from pstuts_pipeline.sources.model import (
    MAX_ID,
    InputError,
    id_problem,
    length_problem,
    normalize_text,
    seconds_problem,
)

MISSING = object()
# A PsTuts record nests 3 levels (record, transcripts, phrase); room for extra fields, far from the stack's limit.
MAX_RECORD_DEPTH = 32


class OversizedNumber:
    """A JSON integer too long to be anything a video holds, kept as its length so the record can be refused."""

    def __init__(self, digits: str):
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"a number of {self.digits:,} digits"


JSON_TYPES = {
    OversizedNumber: "a number",
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def describe(value: Any) -> str:
    """A short JSON rendering of a bad value; control characters escaped so they never reach a terminal raw.

    A lone surrogate (JSON's "\\ud800") is shown as that escape: no terminal, log or database takes it as text.
    """
    if isinstance(value, OversizedNumber):
        return repr(value)
    try:
        if isinstance(value, str):
            shown = json.dumps(value[:60], ensure_ascii=False)
        else:
            # default=repr: a list or object holding an oversized number showed a TypeError, not the record.
            shown = json.dumps(value, ensure_ascii=False, default=repr)[:60]
    except RecursionError:
        return "a value nested too deeply"
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


def json_type(value: Any) -> str:
    """A JSON value's kind in JSON's words, for messages read by people who wrote JSON, not Python."""
    return "null" if value is None else JSON_TYPES.get(type(value), type(value).__name__)


def _problem(value: Any, expected: str) -> str:
    if isinstance(value, OversizedNumber) and expected == "an integer":
        expected = f"an id from 0 to {MAX_ID} (2**63 - 1)"  # every integer field of a record is an id
    return "is missing" if value is MISSING else f"is {describe(value)}, not {expected}"


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply lists and objects nest in a value, counted level by level without recursion, up to `limit` + 1.

    An oversized number anywhere in it, even in a field nobody reads, is raised as the ValueError it would
    otherwise cause wherever the record is hashed or stored.
    """
    depth, level = 0, [value] if type(value) in (dict, list) else []
    while level and depth <= limit:
        depth += 1
        below = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                kind = type(child)
                if kind is dict or kind is list:
                    below.append(child)
                elif kind is OversizedNumber:
                    raise ValueError(f"holds {child!r}: no field of a video takes a number that long")
        level = below
    return depth


@dataclass
class RecordContext:
    """What validating one record needs beyond its own fields (the validators' `info.context`)."""

    limits: SourceSettings
    sent_ids: set[int] = field(default_factory=set)


def _context(info: ValidationInfo) -> RecordContext:
    return cast(RecordContext, info.context)  # validate_record always gives one


def _refuse(problem: str, kind: str = "pstuts_field") -> NoReturn:
    raise PydanticCustomError(kind, "{problem}", {"problem": problem})


def _text(value: Any, limit: int, variable: str) -> str:
    if not isinstance(value, str):
        _refuse(_problem(value, "a string"))
    if problem := length_problem(value, limit, variable):
        _refuse(problem)
    return value


def _field_text(value: Any, info: ValidationInfo) -> str:
    return _text(value, _context(info).limits.max_field_chars, "PSTUTS_MAX_FIELD_CHARS")


def _phrase_text(value: Any, info: ValidationInfo) -> str:
    return _text(value, _context(info).limits.max_phrase_chars, "PSTUTS_MAX_PHRASE_CHARS")


def _phrase_id(value: Any, info: ValidationInfo) -> int:
    """A phrase's id: an integer id, once per video (the questions name their answer's phrase by it)."""
    if not isinstance(value, int) or isinstance(value, bool):
        _refuse(_problem(value, "an integer"))
    if problem := id_problem(value):
        _refuse(problem)
    seen = _context(info).sent_ids
    if value in seen:
        _refuse(f"{value} appears twice")
    seen.add(value)
    return value


def _answer_phrase_id(value: Any, info: ValidationInfo) -> int:
    # `type(...) is int`: JSON's `true` and `2.0` equal the ids 1 and 2 in Python.
    if type(value) is not int or value not in _context(info).sent_ids:
        _refuse(_problem(value, "the sent_id of a phrase"))
    return value


def _seconds(value: Any) -> float | None:
    """A time in seconds; null is how the source marks an unknown time (a missing key is a broken record)."""
    if not (
        value is None
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0)
    ):
        _refuse(_problem(value, "a number of seconds or null"))
    if value is not None and (problem := seconds_problem(value)):
        _refuse(problem)
    return value


def _bounded(items: Any, info: ValidationInfo, expected: str, noun: str) -> list[Any]:
    if not isinstance(items, list):
        _refuse(_problem(items, expected))
    limit = _context(info).limits.max_phrases_per_video
    if len(items) > limit:
        _refuse(f"holds {len(items):,} {noun}, over the limit of {limit:,} (PSTUTS_MAX_PHRASES_PER_VIDEO)")
    return items


def _phrase_list(items: Any, info: ValidationInfo) -> list[Any]:
    if isinstance(items, list) and not items:
        _refuse("is empty: a video needs at least one phrase")
    return _bounded(items, info, "a list of phrases", "phrases")


def _pair_list(items: Any, info: ValidationInfo) -> list[Any]:
    return _bounded(items, info, "a list", "pairs")


FieldText = Annotated[str, PlainValidator(_field_text)]
PhraseText = Annotated[str, PlainValidator(_phrase_text)]
Seconds = Annotated[float | None, PlainValidator(_seconds)]


class Phrase(BaseModel):
    """One timed phrase of a transcript."""

    sent_id: Annotated[int, PlainValidator(_phrase_id)]
    sent: PhraseText
    begin: Seconds
    end: Seconds


class Question(BaseModel):
    """A question whose answer is spoken in the phrase `sent_id`."""

    sent_id: Annotated[int, PlainValidator(_answer_phrase_id)]
    q: PhraseText
    a: PhraseText


def _not_only_empty(phrases: list[Phrase]) -> list[Phrase]:
    if not any(normalize_text(p.sent) for p in phrases):
        _refuse("holds only empty phrases")
    return phrases


class VideoRecord(BaseModel):
    """One video of a PsTuts-VQA file. Fields it does not name are ignored here but kept in the video's hash."""

    video_id: StrictInt
    title: FieldText
    url: FieldText
    desc: FieldText = ""
    length: FieldText = ""
    transcripts: Annotated[list[Phrase], BeforeValidator(_phrase_list), AfterValidator(_not_only_empty)]
    qa: Annotated[list[Question], BeforeValidator(_pair_list)] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _identified_and_shallow(cls, record: Any) -> Any:
        """An object with an id, checked before any field so every later message can name the video."""
        if not isinstance(record, dict):
            return record  # pydantic's own error; validate_record refuses it first, without pydantic's cost
        video_id = record.get("video_id", MISSING)
        if not isinstance(video_id, int) or isinstance(video_id, bool):
            _refuse(_problem(video_id, "an integer"), "pstuts_video_id")
        if problem := id_problem(video_id):
            _refuse(problem, "pstuts_video_id")
        try:
            depth = nesting_depth(record, MAX_RECORD_DEPTH)
        except ValueError as problem:
            _refuse(str(problem))
        if depth > MAX_RECORD_DEPTH:
            # Deeper values would exhaust Python's stack wherever the record is hashed, stored or shown.
            _refuse(f"nests lists or objects more than {MAX_RECORD_DEPTH} levels deep")
        return record


def _field_path(loc: tuple[int | str, ...]) -> str | None:
    """A pydantic location as the record's path: ("transcripts", 4, "begin") is "transcripts[4].begin"."""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
    return path or None


def _input_error(error: ErrorDetails, record: Any, file: str, index: int) -> InputError:
    """The first problem pydantic found, in the words and the place the reader of the file needs."""
    kind, message = error["type"], error["msg"]
    if kind == "pstuts_video_id":
        return InputError(file, f"record {index}: 'video_id' {message}")
    if kind == "missing":
        message = "is missing"
    elif kind == "model_type":  # a phrase or a question that is not an object
        message = f"is {describe(error['input'])}, not an object"
    return InputError(file, message, record["video_id"], _field_path(error["loc"]))


def validate_record(record: Any, file: str, index: int, limits: SourceSettings) -> VideoRecord:
    """One record as a typed video, or an InputError naming the file, the record or video, and the field."""
    if not isinstance(record, dict):  # a file of 500,000 junk values must cost microseconds per value
        raise InputError(file, f"record {index} is {json_type(record)}, not an object")
    try:
        return VideoRecord.model_validate(record, context=RecordContext(limits))
    except ValidationError as invalid:
        # The first error is the first bad field in the order of the file's fields and phrases.
        raise _input_error(invalid.errors(include_url=False)[0], record, file, index) from None
