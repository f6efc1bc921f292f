"""The Celery app a worker runs: dagster-celery's step task, with the same settings as the executor that sends steps.

    dagster-celery worker start -A pstuts_pipeline.defs.celery_app -y deploy/celery/celery.yaml -- -c 1

dagster-celery's own app (`-A dagster_celery.app`) takes its settings from the `-y` file alone, so a worker's
visibility timeout was whatever that file said whatever PSTUTS_CELERY_VISIBILITY_TIMEOUT_S was. This app applies
`celery_config()` (executors.py) over it: the broker transport options, acknowledgements and prefetch every worker
and every run use come from one function and the worker's own environment.

The worker builds the ingest job once before it forks its pool process, which inherits it: otherwise the pool
process imported the code location at its first step, which then started ~5 s after it was sent (4.5 s of
imports, 1 s for the job's first build; a later step's rebuild takes 45 ms). Bad settings stop the worker at start.
"""

from celery import Celery
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from pstuts_pipeline.defs.executors import celery_config, reconstructable_job
from pstuts_pipeline.defs.reconcile import INGEST_JOB_NAME


def worker_app() -> Celery:
    """dagster-celery's app (its defaults, then the `-y` file), then the project's Celery settings over them."""
    app = make_app()
    app.conf.update(celery_config()["config_source"])
    return app


app = worker_app()
execute_plan = create_task(app)
reconstructable_job(INGEST_JOB_NAME).get_definition()
