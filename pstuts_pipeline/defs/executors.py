"""Where a run's steps execute: in the run's own process (the default) or on Celery workers (PSTUTS_EXECUTOR=celery).

A Celery worker rebuilds each step's job from the code pointer its run carries: `job_named` in
`pstuts_pipeline.definitions` (which every worker has installed; what `pstuts ingest` submits with PSTUTS_EXECUTOR=celery) or the file
deploy/celery/definitions.py (the daemon's code location in deploy/celery; the same path must exist on every worker).
"""

from typing import Any

import dagster as dg
import yaml

from pstuts_pipeline import settings

# What a worker imports and calls to rebuild a job: `pstuts_pipeline.definitions.job_named(name)`.
CODE_LOCATION_MODULE = "pstuts_pipeline.definitions"
JOB_BUILDER = "job_named"


def celery_config(visibility_timeout_s: int | None = None) -> dict[str, Any]:
    """The Celery settings the executor and every worker share (deploy/celery/celery.yaml is this, written out)."""
    timeout = (
        settings.load(settings.OperationsSettings).celery_visibility_timeout_s
        if visibility_timeout_s is None
        else visibility_timeout_s
    )
    return {
        "broker": {"env": settings.CELERY_BROKER_VAR},
        "backend": "rpc://",
        "config_source": {
            # A step takes seconds to minutes: a worker takes one at a time and prefetches none.
            "worker_prefetch_multiplier": 1,
            # A step is acknowledged when it ends. A pool process killed mid-step: its worker gives the step back at
            # once (reject on worker lost). A whole worker lost: the broker hands the step to another worker when the
            # connection drops (AMQP) or, with Redis, once the visibility timeout has passed; Redis checks every
            # 10 s with throttle 1 (kombu's default 10 makes it every 100 s).
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "broker_transport_options": {"visibility_timeout": timeout, "unacked_restore_throttle": 1},
        },
    }


def worker_config_yaml(visibility_timeout_s: int | None = None) -> str:
    """The `-y` file of `dagster-celery worker start`: the same settings, so workers and runs agree."""
    return yaml.safe_dump({"execution": {"config": celery_config(visibility_timeout_s)}}, sort_keys=False)


def celery_executor() -> dg.ExecutorDefinition:
    """Dagster's Celery executor with the project's settings: each step is a task a worker runs."""
    from dagster_celery import celery_executor  # the `celery` extra

    return celery_executor.configured(celery_config(), name="celery")


def executor_from_settings() -> dg.ExecutorDefinition:
    """In-process (torch and the model load once per run) unless PSTUTS_EXECUTOR=celery (each step on a worker)."""
    return (
        dg.in_process_executor
        if settings.load(settings.OperationsSettings).executor == "in_process"
        else celery_executor()
    )


def steps_run_in_run_process(executor: dg.ExecutorDefinition) -> bool:
    """Whether an executor runs steps in the process that runs the run (in-process), or elsewhere (Celery, pods)."""
    return executor.name == dg.in_process_executor.name


def reconstructable_job(job_name: str) -> Any:
    """A job of the code location as a pointer that other processes (Celery workers) rebuild it from."""
    return dg.build_reconstructable_job(CODE_LOCATION_MODULE, JOB_BUILDER, reconstructable_args=(job_name,))
