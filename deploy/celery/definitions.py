"""pstuts_pipeline with every step sent to Celery workers (dagster-celery): the code location the webserver and the
daemon load when runs should fan out over a pool of workers (docs/operations-distributed.md).

    pip install -c constraints.txt -e '.[postgres,celery]'   # on the webserver, the daemon and every worker
    dagster-celery worker start -A pstuts_pipeline.defs.celery_app -y deploy/celery/celery.yaml -- -c 1   # each worker
    dagster-daemon run -f deploy/celery/definitions.py          # and dagster-webserver -f ... for the UI

`pstuts ingest` reaches the same workers with PSTUTS_EXECUTOR=celery. Tested end to end (Redis, PostgreSQL, two
workers, this file loaded by dagster-daemon) in pstuts_pipeline_tests/defs/test_distributed.py.
"""

import dagster as dg

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.executors import celery_executor


@dg.definitions
def defs() -> dg.Definitions:
    """The project's code location with each run's steps sent to Celery workers."""
    return build_definitions(executor=celery_executor())
