"""Issue 33's cases through the real ingest (real model, local Qdrant, a Dagster instance): a file cut short, a broken
sidecar and an emptied folder keep every stored point; `pstuts ingest` and the sensor say why in one line."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.defs.sensors import build_folder_sensor
from pstuts_pipeline_tests.support.helpers import run_ingest, settled, stored_points

pytestmark = pytest.mark.slow
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "data"
CAPTION = "9004-sharpen-with-unsharp-mask"


def videos_stored(storage: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for point in stored_points(storage):
        key = str(point["payload"]["metadata"]["video_id"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def pstuts_ingest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).with_name("pstuts")), "ingest", *args],
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def sensor_tick() -> dg.SensorResult:
    with (
        dg.DagsterInstance.get() as instance,
        dg.build_sensor_context(instance=instance, resources=resources_from_env()) as context,
    ):
        return build_folder_sensor()(context)


@pytest.fixture
def with_caption(ingested, storage) -> Path:
    """The sample's three JSON videos and its WebVTT video with a sidecar, all ingested (holdings recorded)."""
    for suffix in (".vtt", ".toml"):
        shutil.copy(SAMPLE_DIR / f"{CAPTION}{suffix}", ingested / f"{CAPTION}{suffix}")
        settled(ingested / f"{CAPTION}{suffix}")
    report = run_ingest()
    assert report.ok and report.plan.to_ingest == ["9004"]
    return ingested


def test_a_json_file_cut_short_removes_none_of_its_videos(with_caption, storage):
    before = stored_points(storage)
    a = with_caption / "a.json"
    a.write_bytes(a.read_bytes()[:300])
    settled(a)

    done = pstuts_ingest()

    assert done.returncode == 1, done.stderr
    assert f"{a}: video 9001: " in done.stderr, done.stderr
    assert re.search(r"videos removed\s*│\s*0\s", done.stderr) and re.search(
        r"kept \(file unreadable\)\s*│\s*1\s", done.stderr
    )
    assert stored_points(storage) == before


def test_a_broken_sidecar_keeps_its_video_and_names_it(with_caption, storage):
    before = stored_points(storage)
    sidecar = with_caption / f"{CAPTION}.toml"
    sidecar.write_text(sidecar.read_text().replace('"', "", 1))  # one quote gone
    settled(sidecar)

    report = run_ingest()

    assert not report.ok and not report.plan.removed
    [error] = report.plan.failed.values()
    assert error.startswith(f"{sidecar}: video 9004: is not valid TOML")
    assert stored_points(storage) == before


def test_an_emptied_folder_is_refused_by_the_command_and_the_sensor(with_caption, storage):
    before = stored_points(storage)
    for path in with_caption.iterdir():
        path.unlink()

    done = pstuts_ingest()

    assert done.returncode == 1
    assert (
        "removal refused: not removing 4 of the 4 stored videos (all of them) whose files are gone: 9001, 9002, "
        in (done.stderr)
    )
    assert stored_points(storage) == before
    tick = sensor_tick()
    assert tick.run_requests == [] and "not removing 4 of the 4 stored videos" in tick.skip_reason.skip_message
    assert stored_points(storage) == before

    allowed = pstuts_ingest("--allow-mass-removal")

    assert allowed.returncode == 0, allowed.stderr
    assert videos_stored(storage) == {}


def test_a_file_being_copied_is_left_to_the_next_tick(with_caption, storage, monkeypatch):
    before = videos_stored(storage)
    monkeypatch.setenv("PSTUTS_SETTLE_S", "600")
    (with_caption / "b.json").write_text("[")  # the first bytes of a copy

    tick = sensor_tick()

    assert tick.run_requests == [] and "is still being written" in tick.skip_reason.skip_message
    assert videos_stored(storage) == before
