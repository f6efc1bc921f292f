"""A run is tagged when its resources are set up (`RunTags`): with the process executing it, so that a later tick can
tell a killed run from a live one (not with a step's process when steps run elsewhere, on Celery), and with why it
runs when nobody said."""

import dagster as dg

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.instance import (
    MANUAL_REASON,
    PID_TAG,
    REASON_TAG,
    TRIGGER_TAG,
    RunTags,
    process_is_gone,
    this_process_tags,
)
from pstuts_pipeline.defs.reconcile import REMOVE_JOB_NAME
from pstuts_pipeline.defs.resources import QdrantResource

NO_VIDEOS = {"ops": {"delete_video_points": {"config": {"video_ids": []}}}}


def test_a_removal_run_is_tagged_with_the_process_that_executes_it(tmp_path) -> None:
    defs = build_definitions({"qdrant": QdrantResource(path=str(tmp_path / "qdrant"))})
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = defs.resolve_job_def(REMOVE_JOB_NAME).execute_in_process(instance=instance, run_config=NO_VIDEOS)
        tags = instance.get_run_by_id(result.run_id).tags
    assert result.success
    assert {k: tags.get(k) for k in this_process_tags()} == this_process_tags()
    assert (tags[TRIGGER_TAG], tags[REASON_TAG]) == ("manual", MANUAL_REASON), "launched with no reason: by hand"
    assert not process_is_gone(dict(tags)), "this process is alive: the run must not be taken for a dead one"


def test_a_run_whose_steps_run_elsewhere_is_not_tagged_by_them(tmp_path) -> None:
    @dg.op
    def step(run_tags: RunTags) -> None:
        pass

    @dg.job(resource_defs={"run_tags": RunTags(tag_process=False)})
    def elsewhere() -> None:
        step()

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = elsewhere.execute_in_process(instance=instance)
        assert PID_TAG not in instance.get_run_by_id(result.run_id).tags


def test_a_run_that_says_why_keeps_its_reason(tmp_path) -> None:
    defs = build_definitions({"qdrant": QdrantResource(path=str(tmp_path / "qdrant"))})
    asked = {TRIGGER_TAG: "sensor", REASON_TAG: "video no longer in the data folder"}
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        job = defs.resolve_job_def(REMOVE_JOB_NAME)
        result = job.execute_in_process(instance=instance, run_config=NO_VIDEOS, tags=asked)
        tags = instance.get_run_by_id(result.run_id).tags
    assert {k: tags[k] for k in asked} == asked
