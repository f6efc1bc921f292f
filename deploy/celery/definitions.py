"""pstuts_pipeline with every step sent to Celery workers (dagster-celery): the code location to load instead of
pstuts_pipeline.definitions when runs should fan out over a pool of worker machines.

    pip install -c constraints.txt -e '.[postgres]' dagster-celery   # on the webserver, daemon and every worker
    dagster-celery worker start -A dagster_celery.app -y deploy/celery/celery.yaml   # on each worker machine
    dagster dev -m deploy.celery.definitions   # or a workspace.yaml entry pointing at this file

Not installable here (no broker); kept beside the tested deploy/dagster.yaml, which every machine shares.
"""

import dagster as dg
from dagster_celery import celery_executor

from pstuts_pipeline.definitions import build_definitions


@dg.definitions
def defs() -> dg.Definitions:
    """The project's code location with each run's steps sent to Celery workers."""
    return build_definitions(executor=celery_executor.configured({"broker": {"env": "PSTUTS_CELERY_BROKER"}}))
