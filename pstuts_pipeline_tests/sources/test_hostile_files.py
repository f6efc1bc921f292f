"""Issue 21, classes 1, 2 and 8: special files, numbers and texts too large for what they mean, and odd names are
each one error naming file, video and field; the good videos beside them are still read, and nothing hangs."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline.sources.reading import read_source_bytes
from pstuts_pipeline.sources.reconciliation import reconcile
from pstuts_pipeline_tests.support.helpers import SAMPLE


@pytest.fixture(autouse=True)
def no_hang():
    """A case that blocks fails after 20 s instead of holding the suite."""

    def fail(*_):
        raise TimeoutError("reading the folder hung")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def folder_with(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    """The three sample videos in good.json, plus the given files."""
    (tmp_path / "good.json").write_text(json.dumps(SAMPLE))
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return tmp_path


def errors_of(data: Path) -> list[str]:
    catalog = load_catalog(data)
    assert {"9001", "9002", "9003"} <= set(catalog.videos), "the good videos were not read"
    return [str(e) for e in catalog.errors]


def one_video(**changes) -> str:
    return json.dumps([{**SAMPLE[0], "video_id": 9500, **changes}])


def test_a_fifo_named_like_a_source_is_refused_at_once(tmp_path):
    data = folder_with(tmp_path, {})
    os.mkfifo(data / "x.json")
    started = time.monotonic()
    assert errors_of(data) == [f"{data / 'x.json'}: is a named pipe (FIFO), not a regular file: not read"]
    assert time.monotonic() - started < 5


def test_a_fifo_as_a_caption_sidecar_is_refused(tmp_path):
    """The sidecar is never read, so it names no video (it might give another id than the file name's)."""
    data = folder_with(tmp_path, {"9600 - Title.srt": "1\n00:00:01,000 --> 00:00:02,000\nhello\n"})
    os.mkfifo(data / "9600 - Title.toml")
    assert errors_of(data) == [f"{data / '9600 - Title.toml'}: is a named pipe (FIFO), not a regular file: not read"]


def test_a_symlink_to_an_endless_device_is_refused_not_read(tmp_path, monkeypatch):
    data = folder_with(tmp_path, {})
    (data / "zero.json").symlink_to("/dev/zero")
    assert errors_of(data) == [f"{data / 'zero.json'}: is a link to a file outside the data folder: not read"]
    monkeypatch.setenv("PSTUTS_ALLOW_LINKS_OUTSIDE", "1")  # followed, it is still never read
    assert errors_of(data) == [f"{data / 'zero.json'}: is a character device, not a regular file: not read"]


def test_a_file_over_the_byte_limit_is_refused_naming_the_variable(tmp_path, monkeypatch):
    data = folder_with(tmp_path, {"big.json": b"[" + b" " * 5000 + b"]"})
    monkeypatch.setenv("PSTUTS_MAX_FILE_BYTES", "4096")
    with pytest.raises(OSError, match="larger than 4,096 bytes"):
        read_source_bytes(data / "big.json")
    monkeypatch.setenv("PSTUTS_MAX_FILE_BYTES", "100000")
    assert errors_of(data) == []


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "id.json",
            '[{"video_id": 1' + "0" * 5000 + "}]",
            "record 0: 'video_id' is a number of 5,001 digits, not an id from 0 to 9223372036854775807 (2**63 - 1)",
        ),
        (
            "id.json",
            one_video(video_id=10**20),
            "record 0: 'video_id' is 100000000000000000000, not an id from 0 to 9223372036854775807 (2**63 - 1)",
        ),
        (
            "extra.json",
            one_video()[:-2] + ', "views": 1' + "0" * 5000 + "}]",
            "video 9500: holds a number of 5,001 digits: no field of a video takes a number that long",
        ),
        (
            "sent.json",
            one_video(transcripts=[{"sent_id": -1, "sent": "a", "begin": 0, "end": 1}]),
            "video 9500: transcripts[0].sent_id: is -1, not an id from 0 to 9223372036854775807 (2**63 - 1)",
        ),
        (
            "time.json",
            one_video(transcripts=[{"sent_id": 1, "sent": "a", "begin": 0, "end": 1e300}]),
            "video 9500: transcripts[0].end: is 1e+300 s, past the longest video taken (604,800 s, a week)",
        ),
        (
            "title.json",
            one_video(title="t" * 5000),
            "video 9500: title: is 5,000 characters long, over the limit of 4,096 (PSTUTS_MAX_FIELD_CHARS)",
        ),
        (
            "9700 - Hours.srt",
            "1\n" + "9" * 400 + ":00:01,000 --> 00:00:02,000\nhello\n",
            "video 9700: cue 1: begin: '" + "9" * 56 + "...: an hour field of 400 digits is no time in a video",
        ),
        (
            "1" + "2" * 199 + " - Long id.srt",
            "1\n00:00:01,000 --> 00:00:02,000\nhello\n",
            "video_id: the file name starts with a number of 200 digits, not a video id",
        ),
    ],
)
def test_numbers_and_texts_too_large_for_what_they_mean_are_a_record_error(tmp_path, name, content, expected):
    data = folder_with(tmp_path, {name: content})
    assert errors_of(data) == [f"{data / name}: {expected}"]


def test_phrases_over_the_limit_are_refused_naming_the_variable(tmp_path, monkeypatch):
    phrases = [{"sent_id": i, "sent": "a", "begin": i, "end": i + 1} for i in range(31)]
    cues = "".join(f"{i}\n00:00:{i:02},000 --> 00:00:{i:02},500\nhi\n\n" for i in range(1, 32))
    data = folder_with(tmp_path, {"many.json": one_video(transcripts=phrases), "9800 - Cues.srt": cues})
    monkeypatch.setenv("PSTUTS_MAX_PHRASES_PER_VIDEO", "30")
    catalog = load_catalog(data)
    assert [str(e) for e in catalog.errors] == [
        f"{data / '9800 - Cues.srt'}: video 9800: holds 31 cues, over the limit of 30 (PSTUTS_MAX_PHRASES_PER_VIDEO)",
        f"{data / 'many.json'}: video 9500: transcripts: holds 31 phrases, over the limit of 30 "
        "(PSTUTS_MAX_PHRASES_PER_VIDEO)",
    ]


def test_upper_case_suffixes_are_read_and_editor_junk_is_ignored(tmp_path):
    good = json.dumps([{**SAMPLE[0], "video_id": 9900}])
    data = folder_with(tmp_path, {"X.JSON": good, "._x.json": b"\x00\x05\x16\x07junk", ".#x.json": b"user@host.123"})
    catalog = load_catalog(data)
    assert catalog.errors == [] and "9900" in catalog.videos
    plan = reconcile(catalog, {9001: {"f"}, 9999: {"f"}}, lambda video: "f")
    assert plan.removed == ["9999"]  # junk no longer holds back removals
