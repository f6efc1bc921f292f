"""The Dagster code location: assets, checks, jobs, sensor, schedule and resources in one place."""

import dagster as dg

from pstuts_pipeline.assets import ingestion_assets
from pstuts_pipeline.checks import pipeline_checks
from pstuts_pipeline.io_managers import PartitionedPickleIOManager
from pstuts_pipeline.jobs import ingest_videos_job, remove_videos_job
from pstuts_pipeline.resources import resources_from_env
from pstuts_pipeline.schedules import nightly_reingest
from pstuts_pipeline.sensors import transcript_folder_sensor
from pstuts_pipeline.settings import env_int

defs = dg.Definitions(
    assets=ingestion_assets,
    asset_checks=pipeline_checks,
    jobs=[ingest_videos_job, remove_videos_job],
    sensors=[transcript_folder_sensor],
    schedules=[nightly_reingest],
    resources={
        **resources_from_env(),
        "io_manager": PartitionedPickleIOManager(base_path=__import__("os").environ.get("PSTUTS_IO_PATH", "")),
    },
)
