"""Configuration in one place: settings.py alone reads the environment, docs/configuration.md's table lists every
variable the code reads, and secrets reach resources as dg.EnvVar (the UI shows their source, never their value)."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline import resource_fields, settings
from pstuts_pipeline.defs.reconcile import fingerprint_function
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.sources import load_catalog

PACKAGE = Path(settings.__file__).parent
CONFIGURATION = PACKAGE.parent / "docs" / "configuration.md"
# Setting up the process, not reading a setting: DAGSTER_HOME for the processes the CLI starts.
WRITES = {"cli/app.py", "defs/instance.py"}


def environment_uses(path: Path) -> list[str]:
    """Every `os.environ`/`os.getenv` in a module, as 'file:line'."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("environ", "getenv")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ]


def test_only_settings_reads_the_environment():
    modules = [
        p for p in PACKAGE.rglob("*.py") if p.name != "settings.py" and p.relative_to(PACKAGE).as_posix() not in WRITES
    ]
    assert [use for path in modules for use in environment_uses(path)] == []


def variable_names(path: Path) -> set[str]:
    """The string constants of a module that name one of our environment variables."""
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"(PSTUTS|OPENAI|QDRANT|DAGSTER)_[A-Z0-9_]+", node.value)
    }


def test_every_variable_the_code_reads_is_in_the_configuration_table():
    names = set().union(*(variable_names(path) for path in PACKAGE.rglob("*.py")))
    assert {"PSTUTS_EMBEDDING_CACHE_DIR", "PSTUTS_REINGEST_CRON", "PSTUTS_TUNED_MODELS_DIR", "OPENAI_API_KEY"} <= names
    table = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", CONFIGURATION.read_text(encoding="utf-8"), flags=re.MULTILINE))
    # The PostgreSQL password is read by deploy/dagster.yaml, and documented with it.
    assert sorted(names - table - {"DAGSTER_PG_PASSWORD"}) == []


def test_the_openai_key_reaches_the_resource_as_an_env_var(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-settings-test-0123456789")
    embeddings = resources_from_env()["embeddings"]
    assert isinstance(embeddings.openai_api_key, dg.EnvVar)
    assert embeddings.openai_api_key.env_var_name == "OPENAI_API_KEY"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert resources_from_env()["embeddings"].openai_api_key is None


def test_an_empty_cache_dir_turns_the_disk_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("PSTUTS_STORAGE_DIR", str(tmp_path))
    monkeypatch.delenv("PSTUTS_EMBEDDING_CACHE_DIR", raising=False)
    assert resources_from_env()["embeddings"].cache_path() == tmp_path / "embedding_cache"
    monkeypatch.setenv("PSTUTS_EMBEDDING_CACHE_DIR", "")
    assert resources_from_env()["embeddings"].cache_path() is None


def test_importing_the_code_location_reads_no_setting():
    """Dagster's tools call `defs` when they load the location; importing it must not fail on a bad setting."""
    env = {**os.environ, "PSTUTS_EMBEDDING_PROVIDER": "no-such-provider"}
    code = "import pstuts_pipeline.definitions as d; print('imported'); d.defs()"
    loaded = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert loaded.stdout.strip() == "imported"
    assert loaded.returncode != 0 and "PSTUTS_EMBEDDING_PROVIDER" in loaded.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "PSTUTS_MAX_CHUNK_TOKENS",
            "1",
            "PSTUTS_MAX_CHUNK_TOKENS is 1; it must be 0 (the model's window) or at least 16",
        ),
        ("PSTUTS_CHUNKER_BUFFER_SIZE", "-1", "PSTUTS_CHUNKER_BUFFER_SIZE is -1; it must be at least 0"),
        ("PSTUTS_MIN_CHUNK_TOKENS", "-3", "PSTUTS_MIN_CHUNK_TOKENS is -3; it must be at least 0"),
    ],
)
def test_chunker_settings_that_cannot_work_are_refused_naming_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        resources_from_env()


def test_the_folder_sensor_looks_as_often_as_configured(monkeypatch):
    from pstuts_pipeline.definitions import build_definitions

    interval = lambda: build_definitions().resolve_sensor_def("transcript_folder_sensor").minimum_interval_seconds
    assert interval() == settings.DEFAULT_SENSOR_INTERVAL_S == 15
    monkeypatch.setenv("PSTUTS_SENSOR_INTERVAL_S", "5")
    assert interval() == 5
    monkeypatch.setenv("PSTUTS_SENSOR_INTERVAL_S", "0")
    with pytest.raises(ValueError, match="PSTUTS_SENSOR_INTERVAL_S is 0; it must be at least 1"):
        build_definitions()


@pytest.mark.parametrize(
    "environment",
    [
        {},
        {
            "PSTUTS_EMBEDDING_BACKEND": "torch",
            "PSTUTS_MAX_CHUNK_TOKENS": "128",
            "PSTUTS_CHUNK_CONTEXT": "title",
            "PSTUTS_QDRANT_PATH": "/elsewhere/qdrant",
            "PSTUTS_DATA_DIR": "/elsewhere/data",
            "OPENAI_BASE_URL": "https://user:secret@llm.example/v1",
        },
    ],
)
def test_the_no_op_ingest_decides_from_the_fields_the_resources_hold(monkeypatch, environment):
    """`pstuts ingest` with nothing to do reads `resource_fields_from_env` without Dagster: the same as the resources."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    plain = {name: resource_fields.as_held(f) for name, f in resource_fields.resource_fields_from_env().items()}
    resources = resources_from_env()
    for name, held in plain.items():
        assert {k: v for k, v in resources[name].model_dump().items() if k in held} == held, name
    assert resource_fields.source_folder(plain["transcript_source"]) == resources["transcript_source"].path()
    assert resource_fields.qdrant_folder(plain["qdrant"]) == resources["qdrant"].local_path
    fields = resource_fields.resource_fields_from_env()  # a secret URL in the spec is its value, either way
    assert resource_fields.embedding_spec(fields["embeddings"]) == resources["embeddings"].spec
    video = next(iter(load_catalog(PACKAGE.parent / "data").videos.values()))
    wanted = fingerprint_function(resources["embeddings"], resources["chunker"])(video)
    assert resource_fields.fingerprint_function(fields["embeddings"], fields["chunker"])(video) == wanted
