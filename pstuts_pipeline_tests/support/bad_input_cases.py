"""The six bad-input cases: each breaks the sample data in one way and returns the errors expected, by video.

Shared by test_bad_input.py (through `pstuts ingest`) and test_sensor.py (through the folder sensor).
"""

import json
from collections.abc import Callable
from pathlib import Path

from pstuts_pipeline_tests.support.helpers import SAMPLE, write_data

BROKEN, NEIGHBOUR, OTHER = "9002", "9001", "9003"  # a.json holds 9001 and 9002, b.json holds 9003


def sample() -> list[dict]:
    """A deep copy of the sample videos, to break."""
    return json.loads(json.dumps(SAMPLE))


def _line_and_column(text: str, position: int) -> tuple[int, int]:
    return text.count("\n", 0, position) + 1, position - text.rfind("\n", 0, position)


def malformed_json(data: Path) -> dict[str, str]:
    a = data / "a.json"
    text = a.read_text()
    where = text.index('"begin": 17.65')  # 9002, sent_id 3
    text = text[:where] + '"begin": abc' + text[where + len('"begin": 17.65') :]
    a.write_text(text)
    line, column = _line_and_column(text, where + len('"begin": '))
    problem = f"is not valid JSON: Expecting value at line {line} column {column}"
    return {
        BROKEN: f"{a}: video 9002: begin: {problem} (in the phrase with sent_id 3)",
        NEIGHBOUR: f"{a}: video 9001: not read: the file {problem} (in video 9002)",
    }


def missing_field(data: Path) -> dict[str, str]:
    videos = sample()[:2]
    del videos[1]["title"]
    write_data(data, a=videos)
    return {BROKEN: f"{data / 'a.json'}: video 9002: title: is missing"}


def mistyped_field(data: Path) -> dict[str, str]:
    videos = sample()[:2]
    videos[1]["transcripts"][4]["begin"] = "abc"
    write_data(data, a=videos)
    return {BROKEN: f'{data / "a.json"}: video 9002: transcripts[4].begin: is "abc", not a number of seconds or null'}


def empty_transcript(data: Path) -> dict[str, str]:
    videos = sample()[:2]
    videos[1]["transcripts"] = []
    write_data(data, a=videos)
    return {BROKEN: f"{data / 'a.json'}: video 9002: transcripts: is empty: a video needs at least one phrase"}


def duplicate_video_id(data: Path) -> dict[str, str]:
    write_data(data, b=[*sample()[2:], sample()[1]])
    a, b = data / "a.json", data / "b.json"
    return {
        BROKEN: f"{a}: video 9002: video_id: is also defined in {b}\n{b}: video 9002: video_id: is also defined in {a}"
    }


def not_utf8(data: Path) -> dict[str, str]:
    a = data / "a.json"
    raw = a.read_bytes()
    where = raw.index(b"To do that, click")  # 9002, sent_id 3
    raw = raw[:where] + "Voilà, ".encode("latin-1") + raw[where:]
    a.write_bytes(raw)
    byte = where + len("Voil")
    line = raw[:byte].count(b"\n") + 1
    problem = f"is not UTF-8 text: invalid continuation byte at byte {byte} (line {line})"
    return {
        BROKEN: f"{a}: video 9002: sent: {problem} (in the phrase with sent_id 3)",
        NEIGHBOUR: f"{a}: video 9001: not read: the file {problem} (in video 9002)",
    }


CASES: dict[str, Callable[[Path], dict[str, str]]] = {
    "malformed JSON": malformed_json,
    "missing field": missing_field,
    "mistyped field": mistyped_field,
    "empty transcript": empty_transcript,
    "duplicate video id": duplicate_video_id,
    "non-UTF-8 file": not_utf8,
}
