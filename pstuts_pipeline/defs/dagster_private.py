"""Every name this project takes from Dagster's private modules, in one place, because no public API does the job.

- The partition-range tags: a `dg.RunRequest` for a range of dynamic partitions (one run per range of videos, so
  the model loads once) has no public parameter; these tags are what Dagster's own backfills set.
- `AssetCheckEvaluationTargetMaterializationData`: a check that reports each partition of a range run on its own
  (`dg.AssetCheckEvaluation(partition=...)`) names the materialization it checked with it.
- `BulkActionsFilter` / `BulkActionStatus`: the only way to ask the instance for backfills still in progress.
- `add_metadata_by_partition`: `context.add_asset_metadata(..., partition_key=key)` lists the run's dynamic partitions
  from the instance again on every call to check the key (three SQLite queries per video and asset, some 4 s of a
  65-video ingest); this checks the keys once and adds to the same accumulator the public method adds to.
- `poll_celery_steps_every`: dagster-celery's executor loop sleeps a module constant (`TICK_SECONDS`, 1 s) between
  looking at its steps, so every step of a Celery run waited up to a second to be noticed done and its successor
  sent; nothing public sets it.
- `use_engine`, `ConfigurableClassData`, `PostgresStorageConfig`: dagster-postgres's storages open a connection for
  every query and take no pool setting (defs/postgres_storage.py); their engine is a private attribute, and the
  types their `from_config_value` takes live in private modules.

`pstuts_pipeline_tests/defs/test_dagster_private.py` imports each and checks its shape, so the Dagster upgrade that
moves or changes one fails there, not in a user's sensor tick.
"""

from collections.abc import Mapping

import dagster as dg
import sqlalchemy
from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationTargetMaterializationData
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus
from dagster._core.storage.config import PostgresStorageConfig
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from dagster._serdes import ConfigurableClassData


def poll_celery_steps_every(seconds: float) -> None:
    """How long dagster-celery's executor loop sleeps between looks at its steps, in this process."""
    from dagster_celery import core_execution_loop  # the `celery` extra

    core_execution_loop.TICK_SECONDS = seconds  # type: ignore[assignment]  # an int in dagster-celery, read as a sleep


def use_engine(storage: object, engine: sqlalchemy.Engine) -> None:
    """Point a dagster-postgres storage at another SQLAlchemy engine (its `_engine`, made with NullPool)."""
    if not isinstance(getattr(storage, "_engine", None), sqlalchemy.Engine):
        raise TypeError(f"{type(storage).__name__} keeps no SQLAlchemy engine in `_engine` any more")
    storage._engine = engine  # type: ignore[attr-defined]  # noqa: SLF001 - the point of this module


def add_metadata_by_partition(
    context: dg.AssetExecutionContext, metadata_by_partition: Mapping[str, Mapping[str, object]]
) -> None:
    """What `context.add_asset_metadata(metadata, partition_key=key)` does for each key, with the keys checked once."""
    # First, as the public method: an asset invoked directly (unit tests) has no step and raises AttributeError here.
    step = context.op_execution_context._step_execution_context  # noqa: SLF001 - the point of this module
    outside = set(metadata_by_partition) - set(context.partition_keys)
    if outside:
        raise dg.DagsterInvariantViolationError(f"metadata for partitions the run does not target: {sorted(outside)}")
    accumulator = step._metadata_accumulator  # noqa: SLF001
    for key, metadata in metadata_by_partition.items():
        accumulator = accumulator.with_additional_asset_metadata(
            asset_key=context.asset_key, metadata=metadata, partition_key=key
        )
    step._metadata_accumulator = accumulator  # noqa: SLF001


__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "AssetCheckEvaluationTargetMaterializationData",
    "BulkActionStatus",
    "BulkActionsFilter",
    "ConfigurableClassData",
    "PostgresStorageConfig",
    "add_metadata_by_partition",
    "poll_celery_steps_every",
    "use_engine",
]
