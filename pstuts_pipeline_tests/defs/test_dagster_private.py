"""The private Dagster names the project relies on (defs/dagster_private.py) still mean what it takes them to mean:
the Dagster upgrade that moves or changes one fails here, not in a user's sensor tick."""

import dagster as dg
import pytest

from pstuts_pipeline.defs import dagster_private


def test_the_partition_range_tags_are_the_ones_dagster_reads_a_range_run_from() -> None:
    assert dagster_private.ASSET_PARTITION_RANGE_START_TAG == "dagster/asset_partition_range_start"
    assert dagster_private.ASSET_PARTITION_RANGE_END_TAG == "dagster/asset_partition_range_end"


def test_a_range_run_request_with_those_tags_materializes_every_partition_in_it(tmp_path) -> None:
    videos = dg.DynamicPartitionsDefinition(name="videos")
    seen: list[str] = []

    @dg.asset(partitions_def=videos, backfill_policy=dg.BackfillPolicy.single_run())
    def chunk(context: dg.AssetExecutionContext) -> None:
        seen.extend(context.partition_keys)

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("videos", ["1", "2", "3"])
        tags = {
            dagster_private.ASSET_PARTITION_RANGE_START_TAG: "1",
            dagster_private.ASSET_PARTITION_RANGE_END_TAG: "2",
        }
        result = dg.materialize([chunk], instance=instance, tags=tags)
    assert result.success and seen == ["1", "2"]


def test_in_progress_backfills_are_found_by_the_requested_status(tmp_path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        status = dagster_private.BulkActionStatus.REQUESTED
        found = instance.get_backfills(filters=dagster_private.BulkActionsFilter(statuses=[status]), limit=5)
    assert found == []


def test_a_check_evaluation_names_the_partition_and_materialization_it_checked() -> None:
    target = dagster_private.AssetCheckEvaluationTargetMaterializationData(run_id="r", storage_id=1, timestamp=2.0)
    evaluation = dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey("a"), check_name="c", passed=True, partition="7", target_materialization_data=target
    )
    assert (evaluation.partition, evaluation.target_materialization_data.storage_id) == ("7", 1)


def test_metadata_added_by_partition_lands_on_each_partitions_own_materialization(tmp_path) -> None:
    videos = dg.DynamicPartitionsDefinition(name="videos")

    @dg.asset(partitions_def=videos, backfill_policy=dg.BackfillPolicy.single_run())
    def chunk(context: dg.AssetExecutionContext) -> None:
        with pytest.raises(dg.DagsterInvariantViolationError, match=r"\['3'\]"):
            dagster_private.add_metadata_by_partition(context, {"3": {"chunks": 0}})
        dagster_private.add_metadata_by_partition(context, {key: {"chunks": int(key) * 10} for key in ["1", "2"]})

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("videos", ["1", "2", "3"])
        tags = {
            dagster_private.ASSET_PARTITION_RANGE_START_TAG: "1",
            dagster_private.ASSET_PARTITION_RANGE_END_TAG: "2",
        }
        assert dg.materialize([chunk], instance=instance, tags=tags).success
        records = instance.fetch_materializations(dg.AssetKey("chunk"), limit=10).records
        found = {r.partition_key: r.asset_materialization.metadata["chunks"].value for r in records}
    assert found == {"1": 10, "2": 20}
