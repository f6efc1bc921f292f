"""No single-machine assumption: intermediate assets on any fsspec URL, deployment examples that match the code."""

import importlib
import re
import uuid

import dagster as dg
import fsspec
import yaml
from dagster._core.instance.config import dagster_instance_config

from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline_tests.support.servers import REPO

DEPLOY = REPO / "deploy"


def test_intermediate_assets_go_to_an_object_store_url(storage, monkeypatch):
    """PSTUTS_IO_PATH as a URL (memory:// here, s3:// or gs:// in production): nothing lands on local disk."""
    bucket = f"pstuts-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PSTUTS_IO_PATH", f"memory://{bucket}/io")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(REPO / "data"))
    defs = build_definitions(resources_from_env())
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("videos", ["9001", "9002"])
    selection = [dg.AssetKey(name) for name in ("raw_transcripts", "phrase_documents", "full_transcripts")]
    job = defs.resolve_job_def("ingest_videos")
    for key in ("9001", "9002"):
        assert job.execute_in_process(instance=instance, partition_key=key, asset_selection=selection).success

    memory = fsspec.filesystem("memory")
    stored = sorted(p.split(f"/{bucket}/io/", 1)[1] for p in memory.find(f"/{bucket}/io"))
    assert stored == sorted(f"{asset.path[0]}/{key}.json" for asset in selection for key in ("9001", "9002"))
    assert not (storage / "io").exists()
    memory.rm(f"/{bucket}", recursive=True)


def test_the_production_instance_yaml_is_valid_dagster_config(tmp_path, monkeypatch):
    for name, value in {
        "DAGSTER_PG_HOST": "db",
        "DAGSTER_PG_PORT": "5432",
        "DAGSTER_PG_DB": "dagster",
        "DAGSTER_PG_USERNAME": "dagster",
        "DAGSTER_PG_PASSWORD": "x",
    }.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text())
    config, _ = dagster_instance_config(str(tmp_path))
    for name in ("run_storage", "event_log_storage", "schedule_storage"):
        storage = config[name]
        assert storage["module"] == "pstuts_pipeline.defs.postgres_storage", name
        assert hasattr(importlib.import_module(storage["module"]), storage["class"]), name
        assert storage["config"]["postgres_db"]["scheme"] == "postgresql+psycopg2", name
    assert config["concurrency"]["pools"]["default_limit"] == 1


def settings_read_by_the_code() -> set[str]:
    source = "\n".join(p.read_text() for p in (REPO / "pstuts_pipeline").rglob("*.py"))
    return set(re.findall(r"\b((?:PSTUTS|QDRANT|OPENAI)_[A-Z_]+)\b", source))


def test_deployment_examples_use_only_settings_the_code_reads_and_hold_no_secrets():
    known = settings_read_by_the_code() | {"PSTUTS_CELERY_BROKER"}  # the Celery example's own broker setting
    files = [DEPLOY / "dagster.yaml", DEPLOY / "k8s" / "values.yaml", DEPLOY / "celery" / "celery.yaml"]
    for path in files:
        text = path.read_text()
        assert yaml.safe_load(text), f"{path}: empty or not YAML"
        unknown = set(re.findall(r"\b((?:PSTUTS|QDRANT|OPENAI)_[A-Z_]+)\b", text)) - known
        assert not unknown, f"{path}: settings no code reads: {sorted(unknown)}"
        literal = re.findall(r"^[ \t]*(?:password|api_key|postgresqlPassword)[ \t]*:[ \t]*(?!\{)\S+", text, re.M)
        assert not literal, f"{path}: a literal secret: {literal}"
    values = yaml.safe_load((DEPLOY / "k8s" / "values.yaml").read_text())
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    deployment = values["dagster-user-deployments"]["deployments"][0]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "pstuts_pipeline.definitions"]
    assert {e["name"] for e in deployment["env"]} >= {"QDRANT_URL", "PSTUTS_IO_PATH"}
    assert values["postgresql"]["postgresqlScheme"] == "postgresql+psycopg2"
    compile((DEPLOY / "celery" / "definitions.py").read_text(), "deploy/celery/definitions.py", "exec")
