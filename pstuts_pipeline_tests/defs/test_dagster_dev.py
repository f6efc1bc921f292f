"""The path users run: `pstuts dev` (dagster dev: webserver, daemon, code server) as subprocesses over a fresh home,
transcript files dropped into the watched folder, an edit and a removal; and the UI in a real browser."""

import json
import shutil
import subprocess
from collections.abc import Iterator

import dagster as dg
import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline_tests.support.dagster_dev import DagsterDev, ingest_runs, launch_all_partitions, ranges, stored
from pstuts_pipeline_tests.support.helpers import SAMPLE
from pstuts_pipeline_tests.support.servers import QUICK_SENSOR, skip_or_fail
from pstuts_pipeline_tests.support.workspace import Workspace

pytestmark = pytest.mark.slow
KEYS = {"9001", "9002", "9003"}


RUN_SIZE = {"PSTUTS_MAX_VIDEOS_PER_RUN": "1"}


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> Workspace:
    return Workspace(tmp_path_factory.mktemp("dagster_dev"), "user", {**QUICK_SENSOR, **RUN_SIZE})


@pytest.fixture(scope="module")
def dev(space: Workspace) -> Iterator[DagsterDev]:
    """dagster dev over a fresh home and an empty folder, into which the sample file was then dropped."""
    with DagsterDev(space.env(), space.logs / "dagster_dev.log") as running:
        (space.data / "videos.json").write_text(json.dumps(SAMPLE))
        running.wait_until(lambda: KEYS <= running.materialized(), 900, "the sample partitions of qdrant_collection")
        running.wait_settled()
        yield running


def test_a_fresh_home_gets_the_project_instance_settings(space, dev):
    with dg.DagsterInstance.from_config(str(space.home)) as instance:
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 1
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1


def test_files_dropped_in_are_batched_runs_and_edits_and_removals_follow(space, dev):
    runs = ingest_runs(dev)
    assert ranges(runs[:3]) == [(k, k) for k in sorted(KEYS)], "runs of PSTUTS_MAX_VIDEOS_PER_RUN (1) videos"
    assert all(r["status"] == "SUCCESS" for r in runs[:3])
    assert runs[0]["tags"]["pstuts/trigger"] == "sensor" and runs[0]["tags"]["pstuts/reason"] == "new video"
    assert set(stored(space)) == {9001, 9002, 9003}

    edited = [SAMPLE[0], {**SAMPLE[1], "title": "Healing brush, edited"}, SAMPLE[2]]
    (space.data / "videos.json").write_text(json.dumps(edited))
    dev.wait_until(lambda: len(ingest_runs(dev)) == 4, 300, "a run for the edited video")
    dev.wait_settled()
    assert ranges(ingest_runs(dev))[3] == ("9002", "9002")
    assert stored(space)[9002] == {"Healing brush, edited"}

    (space.data / "videos.json").write_text(json.dumps(edited[:2]))
    dev.wait_until(lambda: any(r["jobName"] == "remove_videos" for r in dev.runs()), 300, "the removal run")
    dev.wait_settled()
    [removal] = [r for r in dev.runs() if r["jobName"] == "remove_videos"]
    assert removal["status"] == "SUCCESS" and removal["tags"]["pstuts/trigger"] == "sensor"
    assert set(stored(space)) == {9001, 9002} and len(ingest_runs(dev)) == 4
    with dg.DagsterInstance.from_config(str(space.home)) as instance:
        assert set(instance.get_dynamic_partitions("videos")) == {"9001", "9002"}


def test_a_backfill_of_every_partition_from_the_ui_is_split_into_runs_of_the_configured_size(space, dev):
    """What the UI's "Materialize all" sends: a backfill of every partition, which Dagster's daemon splits into runs
    of at most PSTUTS_MAX_VIDEOS_PER_RUN (1 here) partitions (BackfillPolicy.multi_run), each saying it was manual.
    benchmarks/ui_backfill.py does the same over the 65 PsTuts videos at 10 per run."""
    with dg.DagsterInstance.from_config(str(space.home)) as instance:
        partitions = instance.get_dynamic_partitions("videos")
    backfill = launch_all_partitions(dev)
    ran = lambda: [r for r in dev.runs() if r["tags"].get("dagster/backfill") == backfill]
    dev.wait_until(lambda: ran() and all(r["status"] == "SUCCESS" for r in ran()), 600, f"backfill {backfill}")
    spans = sorted(
        (r["tags"]["dagster/asset_partition_range_start"], r["tags"]["dagster/asset_partition_range_end"])
        for r in ran()
    )
    assert len(partitions) >= 2 and spans == [(k, k) for k in sorted(partitions)]
    assert {r["tags"]["pstuts/trigger"] for r in ran()} == {"manual"}
    dev.wait_settled()


def test_the_ui_renders_the_lineage_and_the_partitions_in_a_real_browser(dev):
    if shutil.which("chromium") is None:
        skip_or_fail("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")

    def rendered(path: str) -> str:
        page = subprocess.run(
            [
                "chromium",
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1500,1000",
                "--virtual-time-budget=20000",
                "--dump-dom",
                dev.url + path,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert page.returncode == 0, page.stderr[-2000:]
        return page.stdout

    lineage = rendered("/locations/pstuts_pipeline/asset-groups/ingestion/lineage")
    assert [name for name in INGESTION_ASSET_NAMES if name not in lineage] == []
    partitions = rendered("/assets/qdrant_collection?view=partitions")
    assert "9001" in partitions and "9002" in partitions
