"""`pstuts dev` over a home the CLI filled: nothing runs until the embedding model changes. A module of its own so
that no other `pstuts dev` (the other module's, kept for its tests) runs beside it."""

import json

import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline_tests.support.dagster_dev import DagsterDev, ingest_runs, ranges, stored
from pstuts_pipeline_tests.support.helpers import SAMPLE
from pstuts_pipeline_tests.support.servers import QUICK_SENSOR
from pstuts_pipeline_tests.support.workspace import Workspace

pytestmark = pytest.mark.slow


def test_over_a_home_the_cli_filled_nothing_runs_until_the_model_changes(tmp_path):
    space = Workspace(tmp_path, "cli_first", QUICK_SENSOR)
    (space.data / "videos.json").write_text(json.dumps(SAMPLE))
    assert space.ingest("cli").details["videos_ingested"] == 3
    with DagsterDev(space.env(), space.logs / "dagster_dev.log") as dev:

        def finished() -> list[dict]:
            """The ticks that are done: one still evaluating (STARTED, under load) has no skip reason yet."""
            return [t for t in dev.ticks() if t["status"] != "STARTED"]

        dev.wait_until(lambda: len(finished()) >= 2, 300, "two finished sensor ticks")
        dev.wait_settled()
        assert ingest_runs(dev) == [] and len(ingest_runs(dev, "cli")) == 1
        newest = finished()[0]
        assert newest["status"] == "SKIPPED" and "3 videos match what Qdrant holds" in newest["skipReason"], newest

    # Another model is another fingerprint (and, as a collection holds one model's vectors, another collection).
    renamed = tmp_path / "renamed-minilm"
    renamed.mkdir()
    for item in embedding.bundled_model_path().iterdir():
        (renamed / item.name).symlink_to(item)
    env = {**space.env(), "PSTUTS_EMBEDDING_MODEL": str(renamed), "PSTUTS_COLLECTION": "renamed_model"}
    with DagsterDev(env, space.logs / "dagster_dev_new_model.log") as dev:
        dev.wait_until(lambda: len(ingest_runs(dev)) == 1, 300, "a run for the new model")
        dev.wait_settled()
        assert ranges(ingest_runs(dev)) == [("9001", "9003")]
    assert set(stored(space, "renamed_model")) == {9001, 9002, 9003}
