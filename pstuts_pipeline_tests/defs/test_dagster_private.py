"""The private Dagster names the project relies on (defs/dagster_private.py) still mean what it takes them to mean:
the Dagster upgrade that moves or changes one fails here, not in a user's sensor tick."""

import dagster as dg
import pytest
import sqlalchemy

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


def test_the_celery_executor_loop_sleeps_the_module_constant_that_sets_its_polling():
    import inspect

    from dagster_celery import core_execution_loop

    before = core_execution_loop.TICK_SECONDS
    try:
        dagster_private.poll_celery_steps_every(0.2)
        assert core_execution_loop.TICK_SECONDS == 0.2
    finally:
        core_execution_loop.TICK_SECONDS = before
    assert "time.sleep(TICK_SECONDS)" in inspect.getsource(core_execution_loop.core_celery_execution_loop)


def test_the_postgres_storages_keep_their_engine_where_use_engine_replaces_it():
    """Without a server: the stock storages' source still assigns `self._engine`, which use_engine replaces."""
    import inspect

    import dagster_postgres

    for storage in (
        dagster_postgres.PostgresRunStorage,
        dagster_postgres.PostgresEventLogStorage,
        dagster_postgres.PostgresScheduleStorage,
    ):
        assert "self._engine = create_pg_engine(" in inspect.getsource(storage.__init__), storage.__name__
    assert {"postgres_url", "postgres_db"} <= set(dagster_private.PostgresStorageConfig.__annotations__)
    with pytest.raises(TypeError, match="no SQLAlchemy engine"):
        dagster_private.use_engine(object(), sqlalchemy.create_engine("sqlite://"))
