"""The commands users run: `pstuts ingest`, `pstuts search`, `dagster asset materialize`, `dg`, parallel partitions."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline_tests.support.helpers import local_points

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SAMPLE_VIDEOS = ["9001", "9002", "9003", "9004"]  # 9004 is WebVTT captions
pytestmark = pytest.mark.slow


def run(args: list[str], env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli_env(storage: Path) -> dict[str, str]:
    env = {**os.environ, "PSTUTS_DATA_DIR": str(REPO / "data"), "PSTUTS_STORAGE_DIR": str(storage)}
    env["DAGSTER_HOME"] = str(storage / "dagster_home")
    return env


def point_counts(storage: Path) -> dict[int, int]:
    points = local_points(storage / "qdrant")
    counts: dict[int, int] = {}
    for point in points:
        video = point.payload["metadata"]["video_id"]
        counts[video] = counts.get(video, 0) + 1
    return counts


def materialize(partition: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pstuts_pipeline.definitions",
            "--select",
            ",".join(INGESTION_ASSET_NAMES),
            "--partition",
            partition,
        ],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def step_keys() -> list[str]:
    """The steps of an ingest run: each ingestion asset, and each asset check not computed with its asset."""
    from pstuts_pipeline.definitions import build_definitions
    from pstuts_pipeline.defs.reconcile import INGEST_JOB_NAME

    return [node.name for node in build_definitions().resolve_job_def(INGEST_JOB_NAME).graph.nodes]


def test_ingest_search_and_dagster_cli_rematerialize(cli_env, storage):
    ingest = run([str(BIN / "pstuts"), "ingest"], cli_env)
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert "videos ingested" in ingest.stderr and "points in collection" in ingest.stderr
    # Not a terminal: progress as plain lines, the run's ended steps (read once a second) counted up to all of them.
    line = r"^pstuts ingest: 0/4 videos done; run 1/1: 4 videos, (\w+) done \((\d+)/(\d+) steps\)"
    steps = re.findall(line, ingest.stderr, re.M)
    assert steps and {name for name, _, _ in steps} <= set(step_keys()), ingest.stderr
    done, total = [int(d) for _, d, _ in steps], {int(t) for _, _, t in steps}
    assert done == sorted(done) and total == {len(step_keys())}
    assert f"pstuts ingest: 4/4 videos done ({len(step_keys())}/{len(step_keys())} steps)" in ingest.stderr
    counts = point_counts(storage)
    assert sorted(map(str, counts)) == SAMPLE_VIDEOS and all(counts.values())

    search = run([str(BIN / "pstuts"), "search", "How do I open Free Transform?", "--top-k", "3", "--json"], cli_env)
    assert search.returncode == 0, search.stderr
    answer = json.loads(search.stdout)
    assert answer["question"] == "How do I open Free Transform?"
    top = answer["results"][0]
    assert {"video_id", "title", "url", "start", "stop", "link_time", "link", "score", "text"} <= set(top)
    assert top["video_id"] == 9003 and top["start"] <= top["link_time"] <= top["stop"]
    assert top["link"] == f"{top['url']}#t={top['link_time']:.1f}"
    assert (
        answer["answered"]
        and 0 < top["confidence"] < 1
        and set(top["signals"]) == {"cosine", "term_share", "inverse_rank"}
    )

    # No sample video adds text: both commands say so, and show the nearest moments as weak.
    unanswered = "How do I add text to a photo?"
    weak = json.loads(run([str(BIN / "pstuts"), "search", unanswered, "--json"], cli_env).stdout)
    assert not weak["answered"] and weak["note"].startswith("No moment in these videos answers this well")
    assert all(r["confidence"] < weak["min_confidence"] for r in weak["results"])
    asked = run([str(BIN / "pstuts"), "ask", unanswered], cli_env)
    assert asked.returncode == 0 and "No moment in these videos answers this well" in asked.stdout
    assert asked.stdout.count("weak match (") == 3 and "[00:" in asked.stdout
    asked = json.loads(run([str(BIN / "pstuts"), "ask", unanswered, "--json"], cli_env).stdout)
    assert not asked["answered"] and asked["citations"] == [] and len(asked["chunks"]) == 3

    listed = run([str(BIN / "pstuts"), "videos", "--json"], cli_env)
    assert listed.returncode == 0, listed.stderr
    videos = {v["video_id"]: v for v in json.loads(listed.stdout)["videos"]}
    assert sorted(map(str, videos)) == SAMPLE_VIDEOS
    assert {v: videos[v]["points"] for v in videos} == point_counts(storage)
    assert all(v["chunks"] == v["points"] and v["ingested"] for v in videos.values())
    assert videos[9004]["source_file"] == "9004-sharpen-with-unsharp-mask.vtt"
    assert videos[9003]["title"] == "Free Transform a layer"
    table = run([str(BIN / "pstuts"), "videos"], cli_env)
    assert "4 videos in 'pstuts_transcripts'" in table.stdout and "Free Transform a layer" in table.stdout

    questions = storage / "questions.txt"
    questions.write_text("How do I straighten a crooked horizon?\nWhich brush removes small blemishes?\n")
    batch = run([str(BIN / "pstuts"), "search", "--questions", str(questions), "--top-k", "2", "--json"], cli_env)
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [line["question"] for line in lines] == questions.read_text().splitlines()
    assert [line["results"][0]["video_id"] for line in lines] == [9001, 9002]

    rematerialized = materialize("9001", cli_env)
    output, _ = rematerialized.communicate(timeout=600)
    assert rematerialized.returncode == 0, output
    assert point_counts(storage) == counts


def test_parallel_runs_of_dagster_asset_materialize(cli_env, storage):
    """Three runs at once, each in its own process, all writing the one local-mode Qdrant folder."""
    first = run([str(BIN / "pstuts"), "ingest", "--video", "9001"], cli_env)
    assert first.returncode == 0, first.stderr  # also initialises the instance and registers the partitions
    runs = [materialize(key, cli_env) for key in SAMPLE_VIDEOS]
    outputs = [r.communicate(timeout=900)[0] for r in runs]
    for proc, output in zip(runs, outputs):
        assert proc.returncode == 0, output
        assert "already accessed by another instance" not in output
        assert "STEP_SUCCESS" in output and "Launching subprocess" not in output  # the in-process executor
    assert sorted(map(str, point_counts(storage))) == SAMPLE_VIDEOS


def test_ingest_exits_nonzero_naming_a_missing_video(cli_env):
    result = run([str(BIN / "pstuts"), "ingest", "--video", "123456"], cli_env)
    assert result.returncode == 1
    assert "123456" in result.stderr and "no file" in result.stderr


def dg_command(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """`dg` as a user runs it from the project folder, with this environment active."""
    return run([str(BIN / "dg"), *args], {**env, "VIRTUAL_ENV": sys.prefix})


def test_dagster_dg_tools_check_list_and_launch_the_project(cli_env, storage):
    checked = dg_command(["check", "defs"], cli_env)
    assert checked.returncode == 0 and "All definitions loaded successfully" in checked.stdout + checked.stderr

    listed = dg_command(["list", "defs", "--json"], cli_env)
    assert listed.returncode == 0, listed.stderr
    defs = json.loads(listed.stdout)
    assets = {a["asset_key"] for a in defs["assets"]}
    assert set(INGESTION_ASSET_NAMES) <= assets
    assert {"ingest_videos", "remove_videos"} <= {j["name"] for j in defs["jobs"]}
    assert "transcript_folder_sensor" in {s["name"] for s in defs["sensors"]}

    registered = run([str(BIN / "pstuts"), "register"], cli_env)
    assert registered.returncode == 0, registered.stderr
    launched = dg_command(["launch", "--assets", ",".join(INGESTION_ASSET_NAMES), "--partition", "9002"], cli_env)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert set(point_counts(storage)) == {9002}
