"""Dagster only: assets, checks, jobs, sensors, schedules, partitions, resources and the IO manager, thin wrappers over
the domain packages.

Two APIs this project needs exist only as beta/preview in Dagster 1.13, so their warnings are silenced here, exactly
those and nowhere else: `backfill_policy` (a range of videos runs as one run, so the model loads once per run, not per
video) and `partitions_def` on an asset check (each video's checks report on that video's partition). Dagster copies
the sensor with `owners` when it binds resources, which warns the same way although no owner is set.
"""

import warnings

warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy` of function `asset` is currently in beta")
warnings.filterwarnings("ignore", message=r"Specifying a partitions_def on an AssetCheckSpec is currently in preview")
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition.__init__` is currently")
