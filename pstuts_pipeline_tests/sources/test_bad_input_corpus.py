"""The bad-input corpus (bad_inputs/, expected messages in its manifest.json), each file dropped beside the ingested
sample videos: `pstuts ingest` and the folder sensor name file, video and field, and every stored point stays."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.cli import project
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.defs.sensors import build_folder_sensor
from pstuts_pipeline_tests.support.helpers import run_main, settled, stored_points

CORPUS = Path(__file__).parent / "bad_inputs"
MANIFEST: dict[str, dict] = json.loads((CORPUS / "manifest.json").read_text())
pytestmark = pytest.mark.slow


def expected(name: str, data: Path) -> list[str]:
    """The manifest's messages for a case, with its place in the data folder filled in."""
    return [line.replace("{file}", str(data / name)).replace("{data}", str(data)) for line in MANIFEST[name]["expect"]]


def test_the_manifest_covers_every_file_of_the_corpus():
    assert sorted(p.name for p in CORPUS.iterdir() if p.name != "manifest.json") == sorted(MANIFEST)
    assert all(entry["expect"] and entry["why"] for entry in MANIFEST.values())


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_pstuts_ingest_names_the_problem_and_keeps_every_point(name, ingested, storage, monkeypatch, capsys):  # noqa: F811
    before = stored_points(storage)
    shutil.copy(CORPUS / name, ingested / name)
    # The module-level `defs` was built with whatever environment the first test had; this test's is fresh.
    monkeypatch.setattr(project, "definitions", lambda: build_definitions(resources_from_env()))

    code, _, err = run_main(monkeypatch, capsys, "ingest")

    assert code == 1
    for message in expected(name, ingested):
        assert message in err, f"{name}: {message!r} not in:\n{err}"
    assert "run failed" not in err
    assert stored_points(storage) == before


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_the_sensor_requests_nothing_removes_nothing_and_says_why(name, ingested, storage):  # noqa: F811
    before = stored_points(storage)
    shutil.copy(CORPUS / name, ingested / name)
    settled(ingested / name)  # a tick leaves a file written moments ago for the next one

    with (
        dg.DagsterInstance.get() as instance,
        dg.build_sensor_context(instance=instance, resources=resources_from_env()) as context,
    ):
        result = build_folder_sensor()(context)

    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    said = result.skip_reason.skip_message
    for message in expected(name, ingested):
        assert message in said, f"{name}: {message!r} not in {said!r}"
    assert stored_points(storage) == before


def test_the_whole_corpus_at_once_through_the_real_command(ingested, storage):  # noqa: F811
    before = stored_points(storage)
    for name in MANIFEST:
        shutil.copy(CORPUS / name, ingested / name)

    done = subprocess.run(
        [str(Path(sys.executable).with_name("pstuts")), "ingest"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 1, done.stderr
    missing = [m for name in MANIFEST for m in expected(name, ingested) if m not in done.stderr]
    assert missing == [], done.stderr
    assert stored_points(storage) == before


# Special files cannot live in git: each is made in the data folder by the test, with the message it must give.
SPECIAL_FILES = {
    "fifo.json": (lambda path: os.mkfifo(path), "is a named pipe (FIFO), not a regular file: not read"),
    "zero.json": (lambda path: path.symlink_to("/dev/zero"), "is a link to a file outside the data folder: not read"),
}


@pytest.mark.parametrize("name", sorted(SPECIAL_FILES))
def test_special_files_neither_hang_nor_stop_ingest_or_the_sensor(name, ingested, storage, monkeypatch, capsys):  # noqa: F811
    before = stored_points(storage)
    make, message = SPECIAL_FILES[name]
    make(ingested / name)
    settled(ingested / name)
    monkeypatch.setattr(project, "definitions", lambda: build_definitions(resources_from_env()))

    code, _, err = run_main(monkeypatch, capsys, "ingest")

    assert code == 1 and f"{ingested / name}: {message}" in err, err
    with (
        dg.DagsterInstance.get() as instance,
        dg.build_sensor_context(instance=instance, resources=resources_from_env()) as context,
    ):
        result = build_folder_sensor()(context)
    assert result.run_requests == [] and f"{ingested / name}: {message}" in result.skip_reason.skip_message
    assert stored_points(storage) == before
