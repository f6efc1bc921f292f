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
from pstuts_pipeline.embedding.models import bundled_model_path
from pstuts_pipeline.embedding.onnx import MANIFEST, verify_export
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


def test_the_workers_app_takes_its_visibility_timeout_from_the_same_setting_as_the_executor(tmp_path):
    """What `dagster-celery worker start -A pstuts_pipeline.defs.celery_app -y ...` runs, in a fresh process as a worker
    is, with a `-y` file (dagster_celery_config) that says 3600: the setting wins, and the step task is there."""
    (tmp_path / "dagster_celery_config.py").write_text(
        "broker_url = 'redis://127.0.0.1:1/0'\nbroker_transport_options = {'visibility_timeout': 3600}\n"
    )
    show = (
        "from pstuts_pipeline.defs.celery_app import app\n"
        "conf = app.conf\n"
        "print(conf.broker_url, conf.broker_transport_options['visibility_timeout'], conf.task_acks_late,"
        " conf.task_reject_on_worker_lost, conf.worker_prefetch_multiplier, 'execute_plan' in app.tasks)"
    )
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", str(REPO))])
    # On torch a worker has no model export to make at start (the next test's subject).
    env = {
        **os.environ,
        "PSTUTS_CELERY_VISIBILITY_TIMEOUT_S": "42",
        "PYTHONPATH": path,
        "PSTUTS_EMBEDDING_BACKEND": "torch",
        "PSTUTS_STORAGE_DIR": str(tmp_path / "storage"),
    }
    done = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["redis://127.0.0.1:1/0", "42", "True", "True", "1", "True"]
    assert not (tmp_path / "storage").exists()


@pytest.mark.slow
def test_a_worker_makes_the_model_export_before_it_takes_steps_and_only_once(tmp_path):
    """From nothing, the first step that needed the ONNX model made it (~10 s) while other workers' steps waited."""
    storage = tmp_path / "storage"
    start_worker_app = "import pstuts_pipeline.defs.celery_app; print('ready')"
    env = {**os.environ, "PSTUTS_STORAGE_DIR": str(storage), "PSTUTS_EMBEDDING_BACKEND": "onnx"}
    env.pop("PSTUTS_ONNX_MODELS_DIR", None)
    first = subprocess.run(
        [sys.executable, "-c", start_worker_app], env=env, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0 and first.stdout.split() == ["ready"], first.stderr
    [export] = [p.parent for p in (storage / "onnx_models").rglob(MANIFEST)]
    assert export.name == "embedder-onnx"
    verify_export(export, bundled_model_path())
    made = export.stat().st_mtime_ns
    again = subprocess.run(
        [sys.executable, "-c", start_worker_app], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert export.stat().st_mtime_ns == made and "Loading weights" not in again.stderr


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
