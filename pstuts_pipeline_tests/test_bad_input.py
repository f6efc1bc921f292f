"""Bad input: each case gets an error naming file, video and field, the other videos still ingest, and what
the broken video had in Qdrant stays until a good version replaces it."""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest
from conftest import SAMPLE_DIR
from qdrant_client import QdrantClient

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.ingest import IngestReport, ingest
from pstuts_pipeline.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.partitions import video_partitions
from pstuts_pipeline.reconcile import reconcile
from pstuts_pipeline.resources import resources_from_env
from pstuts_pipeline.transcripts import Catalog, InputError, load_catalog

COLLECTION = "pstuts_transcripts"
SAMPLE = json.loads((SAMPLE_DIR / "sample_videos.json").read_text())
BROKEN, NEIGHBOUR, OTHER = "9002", "9001", "9003"  # a.json holds 9001 and 9002, b.json holds 9003


def write_data(folder: Path, a: list[dict] | None = None, b: list[dict] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.json").write_text(json.dumps(SAMPLE[:2] if a is None else a, indent=1), encoding="utf-8")
    (folder / "b.json").write_text(json.dumps(SAMPLE[2:] if b is None else b, indent=1), encoding="utf-8")


def stored_points(storage: Path) -> list[dict]:
    """Every point in the local collection, as plain data: id, payload and vectors."""
    client = QdrantClient(path=str(storage / "qdrant"))
    try:
        points, _ = client.scroll(COLLECTION, limit=10_000, with_payload=True, with_vectors=True)
    finally:
        client.close()
    return sorted((json.loads(p.model_dump_json()) for p in points), key=lambda p: p["id"])


def video_snapshot(storage: Path, video_id: str) -> list[dict]:
    """A video's points as stored."""
    return [p for p in stored_points(storage) if str(p["payload"]["metadata"]["video_id"]) == video_id]


def run_ingest() -> IngestReport:
    with dg.DagsterInstance.get() as instance:
        return ingest(build_definitions(resources_from_env()), instance)


def partitions() -> list[str]:
    with dg.DagsterInstance.get() as instance:
        return instance.get_dynamic_partitions(video_partitions.name)


@pytest.fixture(scope="module")
def ingested_once(tmp_path_factory) -> Path:
    """The sample videos ingested with the real model, once; each test starts from a copy of this state."""
    root = tmp_path_factory.mktemp("ingested")
    write_data(root / "data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_STORAGE_DIR", str(root / "storage"))
        env.setenv("DAGSTER_HOME", str(root / "storage" / "dagster_home"))
        env.setenv("PSTUTS_DATA_DIR", str(root / "data"))
        (root / "storage" / "dagster_home").mkdir(parents=True)
        (root / "storage" / "dagster_home" / "dagster.yaml").write_text(DEFAULT_INSTANCE_YAML)
        report = run_ingest()
    assert report.ok and report.plan.to_ingest == sorted([BROKEN, NEIGHBOUR, OTHER])
    return root


@pytest.fixture
def ingested(ingested_once, storage, tmp_path, monkeypatch) -> Path:
    """A private copy of the ingested state; returns its data folder."""
    shutil.copytree(ingested_once / "storage", storage, dirs_exist_ok=True)
    shutil.copytree(ingested_once / "data", tmp_path / "data")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _sample() -> list[dict]:
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
    videos = _sample()[:2]
    del videos[1]["title"]
    write_data(data, a=videos)
    return {BROKEN: f"{data / 'a.json'}: video 9002: title: is missing"}


def mistyped_field(data: Path) -> dict[str, str]:
    videos = _sample()[:2]
    videos[1]["transcripts"][4]["begin"] = "abc"
    write_data(data, a=videos)
    return {BROKEN: f'{data / "a.json"}: video 9002: transcripts[4].begin: is "abc", not a number of seconds or null'}


def empty_transcript(data: Path) -> dict[str, str]:
    videos = _sample()[:2]
    videos[1]["transcripts"] = []
    write_data(data, a=videos)
    return {BROKEN: f"{data / 'a.json'}: video 9002: transcripts: is empty: a video needs at least one phrase"}


def duplicate_video_id(data: Path) -> dict[str, str]:
    write_data(data, b=[*_sample()[2:], _sample()[1]])
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


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_named_and_loses_nothing(case, ingested, storage):
    before = {key: video_snapshot(storage, key) for key in (BROKEN, NEIGHBOUR, OTHER)}
    assert all(before.values())
    expected = CASES[case](ingested)
    # Another video changes at the same time: it must still be ingested.
    other = [{**_sample()[2], "title": "Retitled while another file is broken"}]
    if case == "duplicate video id":
        other.append(_sample()[1])
    (ingested / "b.json").write_text(json.dumps(other))

    report = run_ingest()

    assert not report.ok
    assert report.plan.failed == expected
    assert report.plan.to_ingest == [OTHER] and not report.failed_runs and not report.plan.removed
    assert {p["payload"]["metadata"]["title"] for p in video_snapshot(storage, OTHER)} == {other[0]["title"]}
    for key in (BROKEN, NEIGHBOUR):
        assert video_snapshot(storage, key) == before[key], f"video {key}'s points changed"
    assert {BROKEN, NEIGHBOUR, OTHER} <= set(partitions())


@pytest.mark.slow
def test_a_good_version_replaces_what_a_broken_video_had(ingested, storage):
    mistyped_field(ingested)
    assert not run_ingest().ok
    fixed = _sample()[:2]
    fixed[1]["title"] = "Fixed and retitled"
    write_data(ingested, a=fixed)

    report = run_ingest()

    assert report.ok and report.plan.to_ingest == [BROKEN]
    assert {p["payload"]["metadata"]["title"] for p in video_snapshot(storage, BROKEN)} == {"Fixed and retitled"}


@pytest.mark.slow
def test_pstuts_ingest_exits_non_zero_naming_the_bad_video(ingested, storage):
    expected = mistyped_field(ingested)[BROKEN]
    result = subprocess.run(
        [str(Path(sys.executable).with_name("pstuts")), "ingest"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "500", "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr
    assert f"failed {BROKEN}: {expected}" in result.stderr
    assert video_snapshot(storage, BROKEN)


@pytest.mark.slow
def test_a_video_removed_from_the_folder_loses_its_partition_and_points(ingested, storage):
    (ingested / "b.json").unlink()

    report = run_ingest()

    assert report.ok and report.plan.removed == [OTHER] and not report.plan.to_ingest
    assert video_snapshot(storage, OTHER) == []
    assert OTHER not in partitions() and {BROKEN, NEIGHBOUR} <= set(partitions())
    assert video_snapshot(storage, BROKEN) and video_snapshot(storage, NEIGHBOUR)


def _catalog(tmp_path: Path, files: dict[str, bytes]) -> Catalog:
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    return load_catalog(tmp_path)


def test_a_file_that_names_no_video_holds_back_every_removal(tmp_path):
    """If a file cannot be tied to any video, a missing video may just be unreadable: nothing is removed."""
    catalog = _catalog(tmp_path, {"a.json": json.dumps(SAMPLE[:1]).encode(), "b.json": b"[{garbage"})
    assert [str(e) for e in catalog.errors] == [
        f"{tmp_path / 'b.json'}: is not valid JSON: Expecting property name "
        "enclosed in double quotes at line 1 column 3"
    ]
    stored = {9001: {"fingerprint"}, 9003: {"fingerprint"}}
    plan = reconcile(catalog, stored, lambda v: "fingerprint")
    assert plan.removed == [] and plan.unchanged == ["9001"] and list(plan.failed) == [str(tmp_path / "b.json")]
    readable = _catalog(tmp_path, {"b.json": b"[]"})
    assert reconcile(readable, stored, lambda v: "fingerprint").removed == ["9003"]


def test_a_missing_data_folder_removes_nothing(tmp_path):
    catalog = load_catalog(tmp_path / "unmounted")
    assert [str(e) for e in catalog.errors] == [
        f"{tmp_path / 'unmounted'}: is not a folder: no transcripts can be read from it"
    ]
    assert reconcile(catalog, {9001: {"f"}}, lambda v: "f").removed == []


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda v: v.pop("video_id"), None, "record 0: 'video_id' is missing"),
        (lambda v: v.update(video_id="9001"), None, "record 0: 'video_id' is \"9001\", not an integer"),
        (lambda v: v["transcripts"][0].pop("end"), "transcripts[0].end", "is missing"),
        (lambda v: v["transcripts"][1].update(end=-1), "transcripts[1].end", "is -1, not a number of seconds or null"),
        (lambda v: v["transcripts"][2].update(sent=None), "transcripts[2].sent", "is null, not a string"),
        (lambda v: v["transcripts"][3].update(sent_id=0), "transcripts[3].sent_id", "0 appears twice"),
        (
            lambda v: v.update(transcripts=[{**t, "sent": " "} for t in v["transcripts"]]),
            "transcripts",
            "holds only empty phrases",
        ),
        (lambda v: v["qa"][0].update(sent_id=999), "qa[0].sent_id", "is 999, not the sent_id of a phrase"),
    ],
)
def test_each_record_problem_names_its_field(tmp_path, change, field, message):
    video = _sample()[0]
    change(video)
    catalog = _catalog(tmp_path, {"a.json": json.dumps([video, SAMPLE[1]]).encode()})
    assert list(catalog.videos) == ["9002"]
    [error] = catalog.errors
    assert isinstance(error, InputError) and (error.field, error.detail) == (field, message)
    assert str(error) == ": ".join(
        [
            str(tmp_path / "a.json"),
            *(["video 9001"] if "video_id" not in message else []),
            *([field] if field else []),
            message,
        ]
    )


@pytest.mark.slow
def test_a_failed_run_names_its_step_and_error_and_keeps_the_stored_points(ingested, storage, monkeypatch):
    from pstuts_pipeline import chunking

    before = video_snapshot(storage, OTHER)
    (ingested / "b.json").write_text(json.dumps([{**_sample()[2], "title": "Retitled"}]))

    def broken(*args, **kwargs):
        raise RuntimeError("the aligner lost its place")

    monkeypatch.setattr(chunking, "timed_chunks", broken)
    report = run_ingest()

    assert not report.ok and report.plan.to_ingest == [OTHER]
    [failed] = report.failed_runs
    assert failed.startswith(f"{OTHER}..{OTHER} (run ")
    assert failed.endswith("): timestamped_chunks: RuntimeError: the aligner lost its place"), failed
    assert video_snapshot(storage, OTHER) == before
