"""The typed source model every format is read into, and the errors that name where the input was wrong."""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# The fields every phrase and chunk of a video carries, in one place.
VIDEO_FIELDS = ("video_id", "title", "desc", "url")
# A file with more bad records than this gets one summary line instead of one line per record.
LISTED_PER_FILE = 3


class InputError(ValueError):
    """A problem in the source data that names the file, the video and the field."""

    def __init__(
        self,
        file: str,
        message: str,
        video_id: int | None = None,
        field: str | None = None,
        video_ids: frozenset[int] = frozenset(),
        unsure: bool = False,
        holder: str | None = None,
    ):
        self.file = file
        self.video_id = video_id
        self.field = field
        self.detail = message
        # A summary of many errors names no one video but must still hold back the points of those it covers.
        self.video_ids = video_ids | ({video_id} if video_id is not None else set())
        # The videos it names may not be all it affects (a file cut short, a bad sidecar, a record without an id):
        # then every video its source file held at its last good read is held back too.
        self.unsure = unsure or not self.video_ids
        # The source file whose videos are in question: a sidecar's error concerns the caption file beside it.
        self.holder = holder or file
        where = [file]
        if video_id is not None:
            where.append(f"video {video_id}")
        if field is not None:
            where.append(field)
        super().__init__(": ".join(where) + ": " + message)


@dataclass(frozen=True)
class RawPhrase:
    """One phrase as the source gives it: a time the source does not know is None, repaired later."""

    sent_id: int
    text: str
    begin: float | None
    end: float | None


@dataclass(frozen=True)
class QAPair:
    """A crowd-written question whose answer is spoken in phrase `sent_id`."""

    sent_id: int
    question: str
    answer: str


@dataclass(frozen=True)
class SourceVideo:
    """A validated video, whatever format it came in, with where it came from and a hash of its content."""

    video_id: int
    title: str
    desc: str
    url: str
    phrases: tuple[RawPhrase, ...]
    qa: tuple[QAPair, ...]
    file: str
    content_hash: str

    @property
    def partition_key(self) -> str:
        return str(self.video_id)

    def metadata(self) -> dict[str, Any]:
        """The video-level fields every phrase, chunk and point of the video carries."""
        return {name: getattr(self, name) for name in VIDEO_FIELDS}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SourceVideo:
        """Rebuild a video stored by `to_json`."""
        return cls(
            **{k: v for k, v in value.items() if k not in ("phrases", "qa")},
            phrases=tuple(RawPhrase(**p) for p in value["phrases"]),
            qa=tuple(QAPair(**q) for q in value["qa"]),
        )


@dataclass
class Catalog:
    """Every valid video in a data folder, plus the errors that kept the others out."""

    videos: dict[str, SourceVideo] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)
    # Every source file looked at, read or not.
    files: list[str] = field(default_factory=list)

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
    def unsure_files(self) -> set[str]:
        """Source files that may hold videos no error names: what they held before must not look deleted."""
        return {e.holder for e in self.errors if e.unsure}


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
    unsure: bool = False

    def add(self, error: InputError) -> None:
        self.count += 1
        self.video_ids |= error.video_ids
        self.unsure |= error.unsure
        if len(self.first) <= LISTED_PER_FILE:
            self.first.append(error.with_traceback(None))

    def errors(self) -> list[InputError]:
        if self.count <= LISTED_PER_FILE:
            return self.first
        listed = "; ".join(str(e).removeprefix(f"{self.file}: ") for e in self.first[:LISTED_PER_FILE])
        message = f"{self.count:,} {self.what}, first {LISTED_PER_FILE}: {listed}"
        return [InputError(self.file, message, video_ids=frozenset(self.video_ids), unsure=self.unsure)]


def summarize(file: str, errors: list[InputError], what: str = "records rejected") -> list[InputError]:
    """Errors of one file, summarized when there are many (see FileErrors)."""
    collected = FileErrors(file, what)
    for error in errors:
        collected.add(error)
    return collected.errors()


def content_hash(value: Any) -> str:
    """Hash content canonically so an unchanged video hashes the same whatever its file's layout."""
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def invalid_text_at(value: Any) -> str | None:
    """Where in a parsed record the first text that is not valid Unicode is (`transcripts[3].sent`), or None.

    Walked without recursion: a record's depth is bounded before, but the walk must not depend on it.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str) and not encodes(item):
            return path or None
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in reversed(list(children)):
            if isinstance(key, str) and not encodes(key):
                return f"{path}.{key!a}".lstrip(".")
            stack.append((child, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}".lstrip(".")))
    return None


def normalize_text(text: str) -> str:
    """Collapse internal whitespace so a phrase is one line and joins cleanly."""
    return re.sub(r"\s+", " ", text).strip()


def utf8_text(data: bytes) -> tuple[str, str | None, int]:
    """A file's text, the problem if it is not UTF-8 (bad bytes replaced) and where in the text it is."""
    # A byte-order mark is how some Windows editors save UTF-8; it is not part of the content.
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8"), None, 0
    except UnicodeDecodeError as exc:
        readable = data[bom:].decode("utf-8", errors="replace")
        position = len(data[bom : bom + exc.start].decode("utf-8", errors="replace"))
        line = readable.count("\n", 0, position) + 1
        return readable, f"is not UTF-8 text: {exc.reason} at byte {bom + exc.start} (line {line})", position


# Bounds by meaning. Ids are stored as SQLite and Qdrant integers and name files: 0 to 2**63 - 1 (19 digits).
MAX_ID = 2**63 - 1
# The longest a tutorial is taken to run: a week. A time past it is a broken value, not a long video.
MAX_SECONDS = 7 * 24 * 3600


def id_problem(value: int) -> str | None:
    """Why an integer cannot be a video or phrase id, or None when it can."""
    if 0 <= value <= MAX_ID:
        return None
    shown = f"a number of {len(str(abs(value)))} digits" if abs(value) > 10**24 else str(value)
    return f"is {shown}, not an id from 0 to {MAX_ID} (2**63 - 1)"


def seconds_problem(value: float) -> str | None:
    """Why a time cannot be a moment of a video, or None when it can."""
    if value <= MAX_SECONDS:
        return None
    return f"is {value:.6g} s, past the longest video taken ({MAX_SECONDS:,} s, a week)"


def length_problem(value: str, limit: int, variable: str) -> str | None:
    """Why a text is too long for what it is, or None."""
    if len(value) <= limit:
        return None
    return f"is {len(value):,} characters long, over the limit of {limit:,} ({variable})"
