"""The Celery app a worker runs: dagster-celery's step task, with the same settings as the executor that sends steps.

    dagster-celery worker start -A pstuts_pipeline.defs.celery_app -y deploy/celery/celery.yaml -- -c 1

dagster-celery's own app (`-A dagster_celery.app`) takes its settings from the `-y` file alone, so a worker's
visibility timeout was whatever that file said whatever PSTUTS_CELERY_VISIBILITY_TIMEOUT_S was. This app applies
`celery_config()` (executors.py) over it: the broker transport options, acknowledgements and prefetch every worker
and every run use come from one function and the worker's own environment.

The worker builds the ingest job once before it forks its pool process, which inherits it: otherwise the pool
process imported the code location at its first step, which then started ~5 s after it was sent (4.5 s of
imports, 1 s for the job's first build; a later step's rebuild takes 45 ms). Bad settings stop the worker at start.
It also makes the local model's ONNX export before it forks: from nothing, the first step that needed the model made
it (~10 s) while every other worker's first such step waited on its lock.
"""

import logging
import multiprocessing
from pathlib import Path

from celery import Celery
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from pstuts_pipeline import embedding
from pstuts_pipeline.defs.executors import celery_config, reconstructable_job
from pstuts_pipeline.defs.reconcile import INGEST_JOB_NAME
from pstuts_pipeline.embedding import onnx
from pstuts_pipeline.settings import EmbeddingSettings, load, paths

log = logging.getLogger(__name__)


def worker_app() -> Celery:
    """dagster-celery's app (its defaults, then the `-y` file), then the project's Celery settings over them."""
    app = make_app()
    app.conf.update(celery_config()["config_source"])
    return app


def export_model() -> None:
    """The local model's ONNX export, made in a spawned process so no torch or ONNX Runtime state crosses the fork.

    Failures are logged and left to the first step that needs the model, which reports them as it always has.
    """
    spec = embedding.EmbeddingSpec.from_settings(load(EmbeddingSettings))
    if spec.provider != "local" or spec.backend == "torch":
        return  # nothing on disk to prepare: torch reads the weights as they ship, a server needs no file
    try:
        if onnx.export_folder(Path(spec.model_name), spec.backend, "embedder", paths().onnx_models_dir).exists():
            return  # made before (the step that loads it verifies it)
    except OSError as error:
        log.warning("the embedding model is not prepared: %s", error)
        return
    # Loading exports on first use. The target lives outside this module: the child imports it, not this worker app.
    child = multiprocessing.get_context("spawn").Process(
        target=embedding.load_embeddings, args=(spec,), name="pstuts-model-export"
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        log.warning(
            "preparing the embedding model failed (exit %s); the first step that needs it will say why", child.exitcode
        )


app = worker_app()
execute_plan = create_task(app)
reconstructable_job(INGEST_JOB_NAME).get_definition()
export_model()
