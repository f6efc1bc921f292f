"""The Dagster code location: assets, checks, jobs, sensor, schedules and resources in one place."""

from collections.abc import Sequence

import dagster as dg

from pstuts_pipeline import settings
from pstuts_pipeline.defs.assets import evaluation_assets, ingestion_assets, tuning_assets
from pstuts_pipeline.defs.checks import pipeline_checks
from pstuts_pipeline.defs.executors import executor_from_settings, steps_run_in_run_process
from pstuts_pipeline.defs.instance import RunTags
from pstuts_pipeline.defs.io_managers import PartitionedJsonIOManager
from pstuts_pipeline.defs.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.defs.schedules import build_schedules
from pstuts_pipeline.defs.sensors import build_folder_sensor


def with_embedder_version(assets: Sequence[dg.AssetsDefinition], model_id: str) -> list[dg.AssetsDefinition]:
    """Fold the embedding model into the code version of every asset that uses it.

    The model is part of what these assets compute: with it in their code version, switching models
    (PSTUTS_EMBEDDING_MODEL) shows them as stale in Dagster until they are materialized again.
    """

    def versioned(spec: dg.AssetSpec) -> dg.AssetSpec:
        code = f"{spec.code_version}+" if spec.code_version else ""
        return spec.replace_attributes(code_version=f"{code}embedder={model_id}")

    return [a.map_asset_specs(versioned) if "embeddings" in a.required_resource_keys else a for a in assets]


def with_run_size(assets: Sequence[dg.AssetsDefinition], videos_per_run: int) -> list[dg.AssetsDefinition]:
    """Backfills of the video partitions (the UI's "Materialize all") split into runs of at most `videos_per_run`.

    Dagster splits them itself (BackfillPolicy.multi_run), from the same setting that bounds the CLI's and the
    sensor's runs, so a backfill of every partition is never one run of unbounded memory.
    """
    policy = dg.BackfillPolicy.multi_run(max_partitions_per_run=videos_per_run)
    return [a.with_attributes(backfill_policy=policy) if a.partitions_def else a for a in assets]


def build_definitions(
    resources: dict[str, object] | None = None, executor: dg.ExecutorDefinition | None = None
) -> dg.Definitions:
    """The project's definitions; `resources` override what the environment configures, key by key.

    The executor defaults to PSTUTS_EXECUTOR's, in-process unless set: every step of a run in its one process, so
    torch, the project and the model load once per run (the multiprocess executor starts a fresh interpreter for
    each of the six steps). `celery` sends each step to a worker, which keeps the model loaded between steps.
    """
    executor = executor or executor_from_settings()
    resources = {
        **resources_from_env(),
        "run_tags": RunTags(tag_process=steps_run_in_run_process(executor)),
        **(resources or {}),
    }
    model_id = getattr(resources.get("embeddings"), "model_id", None)
    assets = with_embedder_version(ingestion_assets, model_id) if model_id else ingestion_assets
    operations = settings.load(settings.OperationsSettings)
    assets = with_run_size(assets, settings.source_limits().max_videos_per_run)
    return dg.Definitions(
        assets=[*assets, *tuning_assets, *evaluation_assets],
        asset_checks=pipeline_checks,
        jobs=[ingest_videos_job, remove_videos_job],
        sensors=[build_folder_sensor(operations.sensor_interval_s)],
        schedules=build_schedules(operations.reingest_cron, operations.reingest_timezone),
        resources={
            "io_manager": PartitionedJsonIOManager(base_path=settings.paths().io_path),
            **resources,
        },
        executor=executor,
    )


def job_named(job_name: str) -> dg.JobDefinition:
    """A job of the code location by name: what another process calls to rebuild it from its pointer."""
    return build_definitions().resolve_job_def(job_name)


@dg.definitions
def defs() -> dg.Definitions:
    """The code location as Dagster's tools load it: built when they load it, so importing reads no settings."""
    return build_definitions()
