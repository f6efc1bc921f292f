"""Every name this project takes from Dagster's private modules, in one place, because no public API does the job.

- The partition-range tags: a `dg.RunRequest` for a range of dynamic partitions (one run per range of videos, so
  the model loads once) has no public parameter; these tags are what Dagster's own backfills set.
- `DagsterInvalidPropertyError`: how an asset invoked directly (unit tests) says it has no run to tag.
- `AssetCheckEvaluationTargetMaterializationData`: a check that reports each partition of a range run on its own
  (`dg.AssetCheckEvaluation(partition=...)`) names the materialization it checked with it.
- `BulkActionsFilter` / `BulkActionStatus`: the only way to ask the instance for backfills still in progress.
- `ReconstructableRepository`: a job as a module pointer that Celery workers rebuild it from, for a run that
  `pstuts ingest` submits with PSTUTS_EXECUTOR=celery (`dg.reconstructable` needs a job defined at module level;
  ours are built by `build_definitions`).

`pstuts_pipeline_tests/defs/test_dagster_private.py` imports each and checks its shape, so the Dagster upgrade that
moves or changes one fails there, not in a user's sensor tick.
"""

from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationTargetMaterializationData
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.errors import DagsterInvalidPropertyError
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

__all__ = [
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "AssetCheckEvaluationTargetMaterializationData",
    "BulkActionStatus",
    "BulkActionsFilter",
    "DagsterInvalidPropertyError",
    "ReconstructableRepository",
]
