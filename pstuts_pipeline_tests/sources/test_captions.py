"""SRT and WebVTT captions as a second source format: parsing, errors that name the cue, and a real ingest."""

import json
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.search import retrieval
from pstuts_pipeline.sources import RawPhrase, load_catalog, read_source_file
from pstuts_pipeline_tests.support.helpers import SAMPLE_DIR

SRT = """1
00:00:01,000 --> 00:00:04,500
To sharpen a soft photo, duplicate the background layer first.

2
00:00:05,000 --> 00:00:09,250
Then choose <i>Filter</i>, Sharpen,
Unsharp Mask &amp; set the Amount to about 100 percent.

3
00:00:10,000 --> 00:00:14,000
Keep the Radius small, one or two pixels, so edges do not glow.

4
00:00:14,500 --> 00:00:19,000
Raise the Threshold to keep skin and sky smooth and free of grain.
"""

VTT = """\ufeffWEBVTT - captions
Kind: captions

STYLE
::cue { color: yellow }

NOTE a comment
that spans two lines

intro
00:01.000 --> 00:04.500 align:start position:10%
<v Anna>Hello</v> there.

00:00:05.000 --> 00:00:07.000
Pick the Crop tool.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def read_one(path: Path):
    videos, errors = read_source_file(path)
    assert not errors, [str(e) for e in errors]
    [video] = videos
    return video


def the_error(path: Path) -> str:
    videos, errors = read_source_file(path)
    assert videos == [] and len(errors) == 1
    return str(errors[0])


def test_srt_cues_are_phrases_with_their_times_and_the_file_name_gives_id_and_title(tmp_path):
    video = read_one(write(tmp_path, "4242 - Sharpen with Unsharp Mask.srt", SRT))
    assert video.metadata() == {"video_id": 4242, "title": "Sharpen with Unsharp Mask", "desc": "", "url": ""}
    assert video.phrases[:2] == (
        RawPhrase(1, "To sharpen a soft photo, duplicate the background layer first.", 1.0, 4.5),
        RawPhrase(2, "Then choose Filter, Sharpen, Unsharp Mask & set the Amount to about 100 percent.", 5.0, 9.25),
    )
    assert [p.sent_id for p in video.phrases] == [1, 2, 3, 4] and video.qa == ()
    assert len(video.content_hash) == 64


def test_webvtt_skips_header_style_and_notes_settings_and_voice_tags(tmp_path):
    video = read_one(write(tmp_path, "77.vtt", VTT))
    assert video.phrases == (RawPhrase(1, "Hello there.", 1.0, 4.5), RawPhrase(2, "Pick the Crop tool.", 5.0, 7.0))
    assert video.video_id == 77 and video.title == "77"


def test_a_sidecar_gives_id_title_desc_and_url(tmp_path):
    path = write(tmp_path, "sharpen.srt", SRT)
    write(
        tmp_path, "sharpen.toml", 'video_id = 5\ntitle = "Sharpen"\ndesc = "Crisp detail."\nurl = "https://x/5.mp4"\n'
    )
    video = read_one(path)
    assert video.metadata() == {"video_id": 5, "title": "Sharpen", "desc": "Crisp detail.", "url": "https://x/5.mp4"}


def test_without_a_sidecar_url_the_video_beside_the_captions_is_the_link(tmp_path):
    path = write(tmp_path, "4242 - Sharpen.srt", SRT)
    assert read_one(path).url == ""  # no video beside it: no link, not a bare "#t=1.0"
    (tmp_path / "4242 - Sharpen.mp4").write_bytes(b"")
    url = read_one(path).url
    assert url == (tmp_path / "4242 - Sharpen.mp4").resolve().as_uri() and url.startswith("file:///")
    assert retrieval.moment_link(url, 5.0) == url + "#t=5.0" and retrieval.moment_link("", 5.0) == ""
    write(tmp_path, "4242 - Sharpen.toml", 'url = "https://x/5.mp4"\n')
    assert read_one(path).url == "https://x/5.mp4"  # the sidecar's url wins


def test_the_hash_follows_content_not_file_layout(tmp_path):
    (tmp_path / "copy").mkdir()
    first = read_one(write(tmp_path, "1 - A.srt", SRT))
    again = read_one(write(tmp_path / "copy", "1 - A.srt", SRT.replace("\n", "\r\n")))
    edited = read_one(write(tmp_path, "1 - A.srt", SRT.replace("first", "now")))
    assert first.content_hash == again.content_hash != edited.content_hash


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("Sharpen.srt", SRT, "Sharpen.srt: video_id: no video id: start the file name with it ('1234 - Title.srt')"),
        (
            "3 - x.srt",
            SRT.replace("00:00:05,000 -->", "00:00:5 -->"),
            "3 - x.srt: video 3: cue 2: begin: '00:00:5' is not a timestamp",
        ),
        (
            "3 - x.srt",
            SRT.replace("--> 00:00:14,000", "--> soon"),
            "3 - x.srt: video 3: cue 3: end: 'soon' is not a timestamp",
        ),
        ("3 - x.srt", SRT + "\n5\nno timing here\n", "3 - x.srt: video 3: cue 5: has no timing line"),
        ("3 - x.srt", "\n\n", "3 - x.srt: video 3: holds no cues"),
        ("3 - x.srt", "1\n00:00:01,000 --> 00:00:02,000\n<i></i>\n", "3 - x.srt: video 3: holds only empty cues"),
        ("3 - x.vtt", SRT, "3 - x.vtt: video 3: does not start with 'WEBVTT'"),
    ],
)
def test_malformed_captions_are_refused_naming_file_video_and_cue(tmp_path, name, text, expected):
    assert the_error(write(tmp_path, name, text)).startswith(str(tmp_path / expected))


def test_bad_bytes_and_bad_sidecars_name_their_file(tmp_path):
    path = tmp_path / "8 - x.srt"
    path.write_bytes(SRT.encode() + b"\xff")
    assert "8 - x.srt: video 8: is not UTF-8 text" in the_error(path)
    write(tmp_path, "9 - y.srt", SRT)
    write(tmp_path, "9 - y.toml", "title = 3\n")
    assert the_error(tmp_path / "9 - y.srt") == f"{tmp_path / '9 - y.toml'}: video 9: title: is 3, not a string"
    write(tmp_path, "9 - y.toml", 'titel = "typo"\n')
    assert "9 - y.toml: video 9: titel: unknown key" in the_error(tmp_path / "9 - y.srt")


def test_a_folder_reads_both_formats_and_a_bad_caption_costs_only_its_video(tmp_path):
    write(tmp_path, "videos.json", (SAMPLE_DIR / "sample_videos.json").read_text())
    write(tmp_path, "4242 - Sharpen.srt", SRT)
    write(tmp_path, "4243 - Broken.vtt", "not captions")
    write(tmp_path, "9001 - Twin.srt", SRT)
    write(tmp_path, "notes.txt", "ignored")
    catalog = load_catalog(tmp_path)
    assert sorted(catalog.videos) == ["4242", "9002", "9003"]
    assert catalog.bad_video_ids == {4243, 9001}


def test_the_sample_data_folder_holds_a_webvtt_video_beside_the_json_ones():
    catalog = load_catalog(SAMPLE_DIR)
    assert not catalog.errors and sorted(catalog.videos) == ["9001", "9002", "9003", "9004"]
    video = catalog.videos["9004"]
    assert video.title == "Sharpen a photo with Unsharp Mask" and video.url == "https://example.com/videos/9004.mp4"
    assert video.file.endswith(".vtt") and len(video.phrases) == 8


@pytest.mark.slow
def test_a_caption_video_is_ingested_end_to_end_and_links_to_its_cue(tmp_path, storage, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    write(data, "videos.json", json.dumps(json.loads((SAMPLE_DIR / "sample_videos.json").read_text())[:1]))
    write(data, "4242 - Sharpen with Unsharp Mask.srt", SRT)
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(data))
    resources = resources_from_env()
    report = ingest(build_definitions(resources), dg.DagsterInstance.get())
    assert report.ok and sorted(report.plan.to_ingest) == ["4242", "9001"]

    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    with qdrant.get_store() as store:
        [top] = retrieval.search(
            store,
            embeddings.query_embeddings(),
            embeddings.model_id,
            "Which setting keeps skin and sky smooth and free of grain?",
            1,
        )
        points, _ = store.scroll(limit=100, with_payload=True)
    assert top.video_id == 4242 and top.title == "Sharpen with Unsharp Mask"
    assert (top.link_sent_id, top.link_time) == (4, 14.5)
    assert top.link_sentence == "Raise the Threshold to keep skin and sky smooth and free of grain."
    stored = [p.payload["metadata"] for p in points if p.payload["metadata"]["video_id"] == 4242]
    times = {s: t for meta in stored for s, t in zip(meta["sent_ids"], meta["speech_start_stop_times"], strict=True)}
    assert times == {1: [1.0, 4.5], 2: [5.0, 9.25], 3: [10.0, 14.0], 4: [14.5, 19.0]}
    assert {p.payload["metadata"]["video_id"] for p in points} == {9001, 4242}
