"""A step that cannot succeed on retry fails at once: a missing upstream is not retried for a minute."""

import dagster as dg

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import resources_from_env


def test_a_missing_upstream_fails_the_step_once_without_retries(storage, instance, monkeypatch) -> None:
    assert qdrant_collection.op.retry_policy is not None  # transient errors are still retried
    instance.add_dynamic_partitions(video_partitions.name, ["9001"])
    defs = build_definitions(resources_from_env())
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        partition_key="9001",
        asset_selection=[qdrant_collection.key],
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    events = result.all_events
    assert not [e for e in events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    failures = [e for e in events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert len(failures) == 1
    message = failures[0].step_failure_data.error.message
    assert "missing; materialize the upstream asset for this partition first" in message
