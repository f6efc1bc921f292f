"""Bad input: each case gets an error naming file, video and field, the other videos still ingest, and what
the broken video had in Qdrant stays until a good version replaces it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.sources import Catalog, InputError, load_catalog
from pstuts_pipeline.sources.reconciliation import reconcile
from pstuts_pipeline_tests.support.bad_input_cases import BROKEN, CASES, NEIGHBOUR, OTHER, mistyped_field, sample
from pstuts_pipeline_tests.support.helpers import SAMPLE, run_ingest, stored_points, write_data


def video_snapshot(storage: Path, video_id: str) -> list[dict]:
    """A video's points as stored."""
    return [p for p in stored_points(storage) if str(p["payload"]["metadata"]["video_id"]) == video_id]


def partitions() -> list[str]:
    with dg.DagsterInstance.get() as instance:
        return instance.get_dynamic_partitions(video_partitions.name)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_named_and_loses_nothing(case, ingested, storage):
    before = {key: video_snapshot(storage, key) for key in (BROKEN, NEIGHBOUR, OTHER)}
    assert all(before.values())
    expected = CASES[case](ingested)
    # Another video changes at the same time: it must still be ingested.
    other = [{**sample()[2], "title": "Retitled while another file is broken"}]
    if case == "duplicate video id":
        other.append(sample()[1])
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
    fixed = sample()[:2]
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
    video = sample()[0]
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
    from pstuts_pipeline.chunking import chunker as chunking

    before = video_snapshot(storage, OTHER)
    (ingested / "b.json").write_text(json.dumps([{**sample()[2], "title": "Retitled"}]))

    def broken(*args, **kwargs):
        raise RuntimeError("the aligner lost its place")

    monkeypatch.setattr(chunking, "timed_chunks", broken)
    report = run_ingest()

    assert not report.ok and report.plan.to_ingest == [OTHER]
    [failed] = report.failed_runs
    assert failed.startswith(
        f"for 1 video ({OTHER}..{OTHER}): timestamped_chunks: RuntimeError: the aligner lost its place ("
    ), failed
    log = Path(failed.rsplit("tracebacks in ", 1)[1].rstrip(")"))
    assert "the aligner lost its place" in log.read_text()
    assert video_snapshot(storage, OTHER) == before
