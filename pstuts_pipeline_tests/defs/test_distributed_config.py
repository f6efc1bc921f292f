"""The distributed settings without servers: the executor switch, the worker config kept equal to the executor's, a
job rebuilt from the module pointer Celery workers receive, and the Kubernetes values in step with the pinned Dagster."""

import os
import re
import subprocess
import sys
from importlib.metadata import version

import dagster as dg
import pytest
import yaml

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.executors import celery_config, executor_from_settings
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline_tests.support.servers import REPO

DEPLOY = REPO / "deploy"


def test_the_executor_is_in_process_unless_celery_is_asked_for(monkeypatch):
    monkeypatch.delenv("PSTUTS_EXECUTOR", raising=False)
    assert executor_from_settings() is dg.in_process_executor
    monkeypatch.setenv("PSTUTS_EXECUTOR", "celery")
    assert executor_from_settings().name == "celery"
    assert build_definitions(resources_from_env()).resolve_job_def("ingest_videos").executor_def.name == "celery"
    monkeypatch.setenv("PSTUTS_EXECUTOR", "kubernetes")
    with pytest.raises(ValueError, match="PSTUTS_EXECUTOR is 'kubernetes'; input should be 'in_process' or 'celery'"):
        executor_from_settings()


def test_workers_start_with_the_settings_the_executor_sends_steps_with(monkeypatch):
    monkeypatch.delenv("PSTUTS_CELERY_VISIBILITY_TIMEOUT_S", raising=False)
    worker = yaml.safe_load((DEPLOY / "celery" / "celery.yaml").read_text())["execution"]["config"]
    assert worker == celery_config()
    assert worker["config_source"]["task_acks_late"] is True
    monkeypatch.setenv("PSTUTS_CELERY_VISIBILITY_TIMEOUT_S", "900")
    assert celery_config()["config_source"]["broker_transport_options"]["visibility_timeout"] == 900
    monkeypatch.setenv("PSTUTS_CELERY_VISIBILITY_TIMEOUT_S", "0")
    with pytest.raises(
        ValueError, match="PSTUTS_CELERY_VISIBILITY_TIMEOUT_S is '0'; input should be greater than or equal to 1"
    ):
        celery_config()


def test_a_job_rebuilt_from_the_module_pointer_keeps_the_celery_executor():
    """What a worker does with a step of a run `pstuts ingest` submitted: rebuild its job from the module.

    In a fresh process, as a worker is: this one's `pstuts_pipeline.definitions` was imported with other settings.
    """
    rebuild = (
        "from pstuts_pipeline.defs.executors import reconstructable_job\n"
        "job = reconstructable_job('remove_videos').get_definition()\n"
        "print(job.name, job.executor_def.name)"
    )
    env = {**os.environ, "PSTUTS_EXECUTOR": "celery"}
    done = subprocess.run([sys.executable, "-c", rebuild], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["remove_videos", "celery"]


def test_the_kubernetes_values_match_the_pinned_dagster_and_the_docs():
    """What is checked: the chart version in docs/operations.md and values.yaml, the image tags, dagster-k8s's."""
    pinned = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().split() if "==" in line)
    dagster = pinned["dagster"]
    assert version("dagster") == dagster
    _, minor, patch = dagster.split(".")
    library = f"0.{int(minor) + 16}.{patch}"  # dagster-k8s, dagster-celery, dagster-postgres release with dagster
    assert pinned["dagster-postgres"] == pinned["dagster-celery"] == library

    text = (DEPLOY / "k8s" / "values.yaml").read_text()
    helm = r"helm upgrade --install dagster dagster/dagster --version (\S+)"
    assert set(re.findall(helm, text)) == {dagster}
    assert set(re.findall(helm, (REPO / "docs" / "operations.md").read_text())) == {dagster}
    assert set(re.findall(r"dagster-k8s==([0-9.]+)", text)) == {library}
    values = yaml.safe_load(text)
    for service in ("dagsterWebserver", "dagsterDaemon"):
        assert values[service]["image"]["tag"] == dagster, service
