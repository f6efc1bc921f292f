"""A stored video is removed only when a readable data folder positively no longer holds it (issue 33).

Each case here removed stored videos on 4987de7: a JSON file cut short, a broken sidecar, an emptied folder. The
policy is tested through `reconcile_folder`, the one path `pstuts ingest`, the sensor and the schedule take, with the
holdings kept in a real Dagster-home folder; test_removal_ingest.py runs the same cases through a real ingest.
"""

import json
import time
from pathlib import Path

import pytest

from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline.sources.holdings import HOLDINGS_FILE, read_holdings
from pstuts_pipeline.sources.reconciliation import reconcile_folder
from pstuts_pipeline_tests.support.helpers import SAMPLE, settled
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR

SAMPLE_FILE = Path(__file__).resolve().parents[2] / "data" / "sample_videos.json"
VTT = "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\nPick the Clone Stamp tool.\n\n00:00:03.500 --> 00:00:05.000\nAlt-click a source.\n"


def fingerprint(video) -> str:
    return video.content_hash


def ingest_all(data: Path, home: Path) -> dict[int, set[str]]:
    """What a good ingest of the folder leaves: every video stored, the holdings recorded."""
    for path in data.iterdir():
        settled(path)
    catalog, result = reconcile_folder(data, home, {}, fingerprint)
    assert not catalog.errors and not result.removed
    return {v.video_id: {fingerprint(v)} for v in catalog.videos.values()}


@pytest.fixture
def home(tmp_path) -> Path:
    folder = tmp_path / "dagster_home"
    folder.mkdir()
    return folder


@pytest.fixture(autouse=True)
def no_settle_wait(monkeypatch):
    """Files are dated back by hand; a test that checks settling sets its own time."""
    monkeypatch.setenv("PSTUTS_SETTLE_S", "1")


def sources_to_sweep() -> list[Path]:
    files = [SAMPLE_FILE]
    if (PSTUTS_DIR / "dev.json").is_file():
        files.append(PSTUTS_DIR / "dev.json")
    return files


@pytest.mark.parametrize("source", sources_to_sweep(), ids=lambda p: p.name)
def test_a_file_cut_anywhere_removes_nothing(source, tmp_path, home):
    """Cut the file at 50 points from empty to whole; after each, reconcile: no stored video may go."""
    data = tmp_path / "data"
    data.mkdir()
    full = source.read_bytes()
    (data / "videos.json").write_bytes(full)
    stored = ingest_all(data, home)
    removed_at = {}
    for cut in sorted({round(len(full) * i / 50) for i in range(50)}):
        (data / "videos.json").write_bytes(full[:cut])
        settled(data / "videos.json")
        catalog, result = reconcile_folder(data, home, stored, fingerprint)
        assert catalog.errors, f"a cut at {cut} bytes read as a whole file"
        if result.removed:
            removed_at[cut] = result.removed
        accounted = set(result.held_back) | set(catalog.videos) | {str(v) for v in catalog.bad_video_ids}
        assert accounted >= {str(v) for v in stored}, f"cut at {cut}: a stored video is neither read nor held back"
    assert removed_at == {}
    (data / "videos.json").write_bytes(full)
    settled(data / "videos.json")
    _, result = reconcile_folder(data, home, stored, fingerprint)
    assert not result.removed and len(result.unchanged) == len(stored)


def test_a_truncated_file_holds_back_only_its_own_videos(tmp_path, home):
    """The other file's deleted video is still removed: the holdings say which videos the broken file held."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text(json.dumps(SAMPLE[:2]))
    (data / "b.json").write_text(json.dumps(SAMPLE[2:]))
    stored = ingest_all(data, home) | {4157: {"old"}}
    assert read_holdings(home, data) == {str(data / "a.json"): {9001, 9002}, str(data / "b.json"): {9003}}
    (data / "a.json").write_bytes((data / "a.json").read_bytes()[:300])
    (data / "b.json").write_text("[]")
    for path in data.iterdir():
        settled(path)

    catalog, result = reconcile_folder(data, home, stored, fingerprint)

    assert catalog.bad_video_ids == {9001}, "the cut falls in 9001's record, the only id still in the file"
    assert result.removed == ["4157", "9003"] and result.held_back == ["9002"]
    assert read_holdings(home, data)[str(data / "a.json")] == {9001, 9002}, "a broken read must not shrink the record"


def test_without_a_record_of_the_file_nothing_is_removed(tmp_path, home):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_bytes(json.dumps(SAMPLE).encode()[:300])
    settled(data / "a.json")
    _, result = reconcile_folder(data, home, {9001: {"f"}, 9002: {"f"}, 9003: {"f"}}, fingerprint)
    assert result.removed == [] and result.held_back == ["9002", "9003"]


SIDECAR_BREAKS = {
    "a missing quote": ('video_id = 4157\ntitle = "Clone stamp\n', 4157),
    "an unknown key": ('video_id = 4157\ntitel = "Clone stamp"\n', 4157),
    "the id as a string": ('video_id = "4157"\n', 4157),
    "the id as a float": ("video_id = 4157.0\n", 4157),
    "the id negative": ("video_id = -4157\n", None),
    "a title as a number": ("video_id = 4157\ntitle = 3\n", 4157),
    "a url as a list": ('video_id = 4157\nurl = ["x"]\n', 4157),
    "a desc as a table": ("video_id = 4157\n[desc]\nx = 1\n", 4157),
    "a latin-1 byte": (b'video_id = 4157\ntitle = "caf\xe9"\n', 4157),
    "a 4,097-character title": (f'video_id = 4157\ntitle = "{"x" * 4097}"\n', 4157),
    "a lone surrogate": ('video_id = 4157\ntitle = "x\\ud800y"\n', 4157),
    "nested 100,000 levels": ("video_id = 4157\nx = " + "[" * 100_000 + "]" * 100_000 + "\n", 4157),
    "a 5,000-digit integer": ("video_id = 4157\nx = " + "9" * 5000 + "\n", 4157),
    "binary junk": (bytes(range(256)), None),
    "a folder": (None, None),
    "a symlink loop": (None, None),
}


def break_sidecar(sidecar: Path, how: str) -> None:
    content, _ = SIDECAR_BREAKS[how]
    sidecar.unlink()
    if how == "a folder":
        sidecar.mkdir()
    elif how == "a symlink loop":
        sidecar.symlink_to(sidecar.name)
    else:
        sidecar.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("how", list(SIDECAR_BREAKS))
def test_a_broken_sidecar_removes_nothing_and_names_the_video_it_gave(how, tmp_path, home):
    data = tmp_path / "data"
    data.mkdir()
    (data / "01 - Clone stamp.vtt").write_text(VTT)
    (data / "01 - Clone stamp.toml").write_text('video_id = 4157\ntitle = "Clone stamp"\n')
    (data / "b.json").write_text(json.dumps(SAMPLE[2:]))
    stored = ingest_all(data, home)
    assert set(stored) == {4157, 9003}
    break_sidecar(data / "01 - Clone stamp.toml", how)
    if how != "a symlink loop":
        settled(data / "01 - Clone stamp.toml")

    catalog, result = reconcile_folder(data, home, stored, fingerprint)

    [error] = catalog.errors
    assert error.file == str(data / "01 - Clone stamp.toml")
    assert error.video_id == SIDECAR_BREAKS[how][1], str(error)
    assert result.removed == []
    assert result.held_back == ([] if error.video_id == 4157 else ["4157"]), "named, or held back unnamed"
    assert list(catalog.videos) == ["9003"], "the other file is still read"
    assert len(str(error)) < 400 and "\n" not in str(error)


def test_an_emptied_folder_is_refused_as_a_mass_removal(tmp_path, home, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text(json.dumps(SAMPLE))
    stored = ingest_all(data, home)
    (data / "a.json").unlink()

    _, result = reconcile_folder(data, home, stored, fingerprint)

    assert result.removed == [] and result.removal_refused.startswith(
        "not removing 3 of the 3 stored videos (all of them) whose files are gone: 9001, 9002, 9003;"
    )
    _, allowed = reconcile_folder(data, home, stored, fingerprint, allow_removal=True)
    assert allowed.removed == ["9001", "9002", "9003"] and not allowed.removal_refused
    monkeypatch.setenv("PSTUTS_ALLOW_MASS_REMOVAL", "1")
    assert reconcile_folder(data, home, stored, fingerprint)[1].removed == ["9001", "9002", "9003"]


def test_removing_over_the_share_is_refused_and_up_to_it_is_made(tmp_path, home, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text(json.dumps(SAMPLE[:1]))
    (data / "b.json").write_text(json.dumps(SAMPLE[1:]))
    stored = ingest_all(data, home)
    (data / "b.json").unlink()  # 2 of 3
    assert "over 50% of them" in reconcile_folder(data, home, stored, fingerprint)[1].removal_refused
    monkeypatch.setenv("PSTUTS_MAX_REMOVAL_SHARE", "0.7")
    assert reconcile_folder(data, home, stored, fingerprint)[1].removed == ["9002", "9003"]


def test_a_file_still_being_written_is_left_for_later_and_holds_its_videos(tmp_path, home, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text(json.dumps(SAMPLE))
    stored = ingest_all(data, home)
    monkeypatch.setenv("PSTUTS_SETTLE_S", "30")
    (data / "a.json").write_text(json.dumps(SAMPLE[:1]))  # being rewritten right now

    catalog, result = reconcile_folder(data, home, stored, fingerprint)

    assert [str(e) for e in catalog.errors][0].startswith(f"{data / 'a.json'}: is still being written")
    assert result.removed == [] and result.held_back == ["9001", "9002", "9003"] and not catalog.videos
    (data / "a.json").write_text(json.dumps(SAMPLE[:2]))  # the copy is done
    settled(data / "a.json")
    assert reconcile_folder(data, home, stored, fingerprint)[1].removed == ["9003"]


def test_a_command_waits_for_a_file_to_settle(tmp_path, home, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PSTUTS_SETTLE_S", "0.5")
    (data / "a.json").write_text(json.dumps(SAMPLE))
    started = time.monotonic()
    catalog, _ = reconcile_folder(data, home, {}, fingerprint, wait=True)
    assert sorted(catalog.videos) == ["9001", "9002", "9003"] and time.monotonic() - started >= 0.4


def test_a_link_out_of_the_folder_is_refused_unread_and_unquoted(tmp_path, home, monkeypatch):
    monkeypatch.delenv("PSTUTS_ALLOW_LINKS_OUTSIDE", raising=False)
    secret = tmp_path / "outside" / "shadow"
    secret.parent.mkdir()
    secret.write_text("root:*:20228:0:99999:7:::\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "6 - shadow.srt").symlink_to(secret)
    (data / "7 - missing.srt").symlink_to(tmp_path / "nowhere.srt")
    (data / "a.json").write_text(json.dumps(SAMPLE[:1]))
    catalog = load_catalog(data)
    assert [str(e) for e in catalog.errors] == [
        f"{data / '6 - shadow.srt'}: is a link to a file outside the data folder: not read",
        f"{data / '7 - missing.srt'}: is a link that leads nowhere (or in a loop): not read",
    ]
    assert list(catalog.videos) == ["9001"]
    (data / "b.json").symlink_to("a.json")  # a link within the folder is read: its video is found twice
    duplicates = [e for e in load_catalog(data).errors if e.field == "video_id"]
    assert {e.file for e in duplicates} == {str(data / "a.json"), str(data / "b.json")}


def test_a_lone_surrogate_costs_only_its_record_naming_the_field(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    text = json.dumps(SAMPLE).replace('"title": "', '"title": "x\\ud800y', 1)
    (data / "a.json").write_text(text)
    catalog = load_catalog(data)
    [error] = catalog.errors
    assert str(error) == (
        f"{data / 'a.json'}: video 9001: title: holds a lone surrogate escape (such as \\ud800): not valid Unicode text"
    )
    assert sorted(catalog.videos) == ["9002", "9003"]
    deep = json.dumps(SAMPLE).replace('"sent": "', '"sent": "\\udfff', 1)
    (data / "a.json").write_text(deep)
    [error] = load_catalog(data).errors
    assert error.field == "transcripts[0].sent"


@pytest.mark.parametrize("bad", [True, 2.0])
def test_a_question_sent_id_must_be_an_integer(bad, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    video = json.loads(json.dumps(SAMPLE[0]))
    video["qa"][0]["sent_id"] = bad
    (data / "a.json").write_text(json.dumps([video]))
    [error] = load_catalog(data).errors
    assert error.field == "qa[0].sent_id" and error.video_id == 9001


def test_caption_names_and_cues_with_unusual_line_breaks(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "12 - Two\nlines.vtt").write_text(VTT)
    (data / "13 - Separators.vtt").write_text(VTT.replace("Alt-click a source.", "Alt-click\u2028a\u2028source."))
    catalog = load_catalog(data)
    assert not catalog.errors, [str(e) for e in catalog.errors]
    assert catalog.videos["12"].title == "Two lines"
    assert catalog.videos["13"].phrases[1].text == "Alt-click a source."


def test_the_holdings_record_is_per_folder(tmp_path, home):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text(json.dumps(SAMPLE))
    ingest_all(data, home)
    assert json.loads((home / HOLDINGS_FILE).read_text())["folder"] == str(data.resolve())
    assert read_holdings(home, tmp_path / "another") == {}
