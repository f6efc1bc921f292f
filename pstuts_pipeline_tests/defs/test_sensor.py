"""The data-folder sensor on the reconcile policy: against what Qdrant holds, batched range runs, removal by job."""

import json
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import execute_request
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs import reconcile
from pstuts_pipeline.defs.jobs import INGEST_JOB_NAME, REMOVE_JOB_NAME
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.reconcile import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.defs.sensors import build_folder_sensor
from pstuts_pipeline.sources.reconciliation import CHANGED_REASON
from pstuts_pipeline_tests.support.bad_input_cases import CASES
from pstuts_pipeline_tests.support.helpers import SAMPLE, settled, stored_points, write_data

KEYS = ["9001", "9002", "9003"]
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("files_written_long_ago")]


def tick(instance: dg.DagsterInstance) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, resources=resources_from_env()) as context:
        return build_folder_sensor()(context)


def apply_partition_requests(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def launch(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """Execute the tick's requests as the daemon would launch them."""
    apply_partition_requests(instance, result)
    defs = build_definitions(resources_from_env())
    for request in result.run_requests:
        assert execute_request(defs, instance, request).success


def point_counts(storage: Path) -> Counter[int]:
    return Counter(p["payload"]["metadata"]["video_id"] for p in stored_points(storage))


def test_a_fresh_instance_over_a_filled_store_registers_partitions_and_requests_nothing(ingested, storage):
    """`dagster dev` started over a home `pstuts ingest` filled, or a new home over the same Qdrant: no re-ingest."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = tick(instance)
        assert result.run_requests == []
        [add] = result.dynamic_partitions_requests
        assert list(add.partition_keys) == KEYS


def test_new_videos_are_one_range_run_and_a_second_tick_waits_for_it(storage, tmp_path, monkeypatch):
    write_data(tmp_path / "data")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(tmp_path / "data"))
    with dg.DagsterInstance.ephemeral() as instance:
        first = tick(instance)
        [request] = first.run_requests
        assert request.job_name == INGEST_JOB_NAME and request.partition_key is None
        assert (request.tags[ASSET_PARTITION_RANGE_START_TAG], request.tags[ASSET_PARTITION_RANGE_END_TAG]) == (
            "9001",
            "9003",
        )
        assert request.tags["pstuts/reason"] == "new video" and request.tags["pstuts/videos"] == "3"
        # While the run is going the sensor asks for nothing more (it would ingest the same videos twice).
        apply_partition_requests(instance, first)
        run = instance.create_run_for_job(
            build_definitions(resources_from_env()).resolve_job_def(INGEST_JOB_NAME),
            tags=request.tags,
            status=dg.DagsterRunStatus.STARTED,
        )
        waiting = tick(instance)
        assert not waiting.run_requests and run.run_id[:8] in waiting.skip_reason.skip_message
        instance.delete_run(run.run_id)
        launch(instance, first)
        assert set(point_counts(storage)) == {9001, 9002, 9003}
        after = tick(instance)
        assert not after.run_requests and "3 videos match" in after.skip_reason.skip_message


def test_an_edit_a_revert_and_a_model_change_are_each_requested_once(ingested, storage, monkeypatch):
    with dg.DagsterInstance.ephemeral() as instance:
        apply_partition_requests(instance, tick(instance))
        edited = [SAMPLE[0], {**SAMPLE[1], "title": "Edited"}]
        write_data(ingested, a=edited)
        first_edit = tick(instance)
        [request] = first_edit.run_requests
        assert request.tags[ASSET_PARTITION_RANGE_START_TAG] == request.tags[ASSET_PARTITION_RANGE_END_TAG] == "9002"
        assert "differ from what Qdrant holds" in request.tags["pstuts/reason"]
        # The same state gives the same run key: the daemon launches it once, a failed run is not relaunched.
        assert [r.run_key for r in tick(instance).run_requests] == [request.run_key]
        launch(instance, first_edit)
        assert not tick(instance).run_requests
        write_data(ingested)
        reverted = tick(instance)
        assert [r.run_key for r in reverted.run_requests] != [request.run_key] and len(reverted.run_requests) == 1
        launch(instance, reverted)
        monkeypatch.setenv("PSTUTS_CHUNKER_BUFFER_SIZE", "1")
        [everything] = tick(instance).run_requests
        assert everything.tags["pstuts/videos"] == "3"


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_file_is_reported_and_its_videos_kept(case, ingested, storage, capsys):
    before = stored_points(storage)
    with dg.DagsterInstance.ephemeral() as instance:
        apply_partition_requests(instance, tick(instance))
        expected = CASES[case](ingested)
        result = tick(instance)
        assert all(r.job_name == INGEST_JOB_NAME for r in result.run_requests)  # no removal of unreadable videos
        logged = capsys.readouterr().err  # the tick's log, shown in the UI
        for message in expected.values():
            assert message.splitlines()[0] in logged
        launch(instance, result)
        for video in {str(v) for v in expected}:
            assert [p for p in stored_points(storage) if str(p["payload"]["metadata"]["video_id"]) == video] == [
                p for p in before if str(p["payload"]["metadata"]["video_id"]) == video
            ]


def test_a_refused_file_is_an_observation_naming_it_until_it_is_fixed(ingested, storage):
    def observe(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
        with dg.build_sensor_context(instance=instance, resources=resources_from_env(), cursor=cursor) as context:
            return build_folder_sensor()(context)

    with dg.DagsterInstance.ephemeral() as instance:
        clean = observe(instance, None)
        assert not clean.asset_events  # nothing refused, nothing to say
        apply_partition_requests(instance, clean)
        expected = CASES["malformed JSON"](ingested)
        refused = observe(instance, clean.cursor)
        [event] = refused.asset_events
        shown = {k: v.value for k, v in event.metadata.items()}
        assert (
            event.asset_key == dg.AssetKey("raw_transcripts") and shown["refused_videos"] == 2
        )  # 9002 and 9001 in the same file
        assert any(next(iter(expected.values())).splitlines()[0] in line for line in shown["errors"])
        assert shown["data_folder"] == str(ingested)
        assert not observe(instance, refused.cursor).asset_events  # unchanged: said once
        write_data(ingested)  # the file fixed
        [cleared] = observe(instance, refused.cursor).asset_events
        assert cleared.metadata["refused_videos"].value == 0 and cleared.metadata["errors"].value == []


def test_a_missing_folder_removes_nothing(ingested, storage, tmp_path, capsys):
    with dg.DagsterInstance.ephemeral() as instance:
        apply_partition_requests(instance, tick(instance))
        ingested.rename(tmp_path / "unmounted")
        result = tick(instance)
        assert not result.run_requests
        assert f"{ingested}: is not a folder" in capsys.readouterr().err


def test_a_removed_video_goes_through_the_removal_job_with_its_partition(ingested, storage):
    before = point_counts(storage)
    with dg.DagsterInstance.ephemeral() as instance:
        apply_partition_requests(instance, tick(instance))
        (ingested / "b.json").unlink()
        result = tick(instance)
        [removal] = result.run_requests
        assert (
            removal.job_name == REMOVE_JOB_NAME
            and removal.tags["pstuts/reason"] == "video no longer in the data folder"
        )
        launch(instance, result)
        assert point_counts(storage) == {9001: before[9001], 9002: before[9002]}
        assert set(instance.get_dynamic_partitions(video_partitions.name)) == {"9001", "9002"}
        # The collection's overview shows the count the store holds now, not the last ingest's.
        latest = instance.fetch_observations(dg.AssetKey("qdrant_collection"), limit=1).records[0]
        shown = {k: v.value for k, v in latest.asset_observation.metadata.items()}
        assert shown["collection_points"] == before[9001] + before[9002] and shown["videos_removed"] == [9003]
        assert shown["points_removed"] == before[9003]
        assert not tick(instance).run_requests


def tick_with_cursor(instance: dg.DagsterInstance, cursor: str | None) -> tuple[dg.SensorResult | dg.SkipReason, str]:
    """A tick as the daemon runs it: given the last cursor, returning what it asked and its new cursor."""
    with dg.build_sensor_context(instance=instance, resources=resources_from_env(), cursor=cursor) as context:
        result = build_folder_sensor()(context)
    return result, result.cursor if isinstance(result, dg.SensorResult) else cursor


def test_an_unchanged_tick_answers_from_its_cursor_without_opening_qdrant(ingested, storage, monkeypatch):
    for path in ingested.iterdir():
        settled(path)
    with dg.DagsterInstance.get() as instance:
        first, cursor = tick_with_cursor(instance, None)
        assert first.run_requests == [] and first.skip_reason.skip_message.startswith("3 videos match")

        def no_store(*args, **kwargs):
            raise AssertionError("an unchanged tick opened Qdrant")

        with monkeypatch.context() as patched:
            patched.setattr(reconcile, "observe_store", no_store)
            patched.setattr(reconcile, "reconcile_folder", no_store)
            second, kept = tick_with_cursor(instance, cursor)
        assert isinstance(second, dg.SkipReason) and kept == cursor
        assert second.skip_message == f"unchanged since the last look: {first.skip_reason.skip_message}"

        edited = [SAMPLE[0], {**SAMPLE[1], "title": "Edited while the cursor held"}]
        (ingested / "a.json").write_text(json.dumps(edited))
        settled(ingested / "a.json")
        third, _ = tick_with_cursor(instance, cursor)
        [request] = third.run_requests
        assert (
            request.tags["pstuts/reason"] == CHANGED_REASON and request.tags[ASSET_PARTITION_RANGE_START_TAG] == "9002"
        )
