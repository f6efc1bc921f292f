"""Configuration in one place: the settings package alone reads the environment, each default is declared once in
its typed model, the resources' fields are the models', docs/configuration.md's tables are made from them, and
secrets reach resources as dg.EnvVar (the UI shows their source, never their value)."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline import settings
from pstuts_pipeline.cli.report import IngestSettings
from pstuts_pipeline.defs.reconcile import fingerprint_function
from pstuts_pipeline.defs.resources import RESOURCE_TYPES, SettingsResource, resources_from_env
from pstuts_pipeline.search import fingerprints
from pstuts_pipeline.settings import table
from pstuts_pipeline.settings.base import default
from pstuts_pipeline.sources import load_catalog

PACKAGE = Path(settings.__file__).parent.parent
CONFIGURATION = PACKAGE.parent / "docs" / "configuration.md"
# Setting up the process, not reading a setting: DAGSTER_HOME for the processes the CLI starts.
WRITES = {"cli/commands/dev.py", "defs/instance.py"}


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
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] != "settings" and p.relative_to(PACKAGE).as_posix() not in WRITES
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
    first_cells = re.findall(r"^\| (`[^|]+`) \|", CONFIGURATION.read_text(encoding="utf-8"), flags=re.MULTILINE)
    listed = {name for cell in first_cells for name in re.findall(r"`([A-Z0-9_]+)`", cell)}
    # The PostgreSQL password is read by deploy/dagster.yaml, and documented with it.
    assert sorted(names - listed - {"DAGSTER_PG_PASSWORD"}) == []


def test_the_configuration_tables_are_made_from_the_settings_models():
    """Stale tables fail here: `python -m pstuts_pipeline.settings.table` rewrites them."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert table.BEGIN in text and text == table.with_tables(text)


def test_each_resource_declares_exactly_its_settings_fields_with_their_defaults():
    """A resource's fields are its settings model's: same names, defaults and descriptions, none declared twice."""
    for name, resource in RESOURCE_TYPES.items():
        if not issubclass(resource, SettingsResource):
            continue
        model = resource.SETTINGS
        assert list(resource.model_fields) == list(model.model_fields), name
        for field, info in resource.model_fields.items():
            declared = model.model_fields[field]
            assert info.description == declared.description, (name, field)
            if declared.default_factory is None:
                assert info.default == declared.default, (name, field)
    made = resources_from_env()
    for name, resource in made.items():
        if isinstance(resource, SettingsResource):
            assert resource.typed() == settings.load(resource.SETTINGS), name


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
            "environment variable PSTUTS_MAX_CHUNK_TOKENS is '1'; it must be 0 (the model's window) or at least 16, "
            "room for a few words beside the model's special tokens",
        ),
        (
            "PSTUTS_CHUNKER_BUFFER_SIZE",
            "-1",
            "environment variable PSTUTS_CHUNKER_BUFFER_SIZE is '-1'; input should be greater than or equal to 0",
        ),
        (
            "PSTUTS_CHUNK_CONTEXT",
            "titel",
            "environment variable PSTUTS_CHUNK_CONTEXT is 'titel'; input should be '', 'title', 'neighbours' or "
            "'title+neighbours'",
        ),
    ],
)
def test_chunker_settings_that_cannot_work_are_refused_naming_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingsError) as refused:
        resources_from_env()
    assert str(refused.value) == message


def test_the_folder_sensor_looks_as_often_as_configured(monkeypatch):
    from pstuts_pipeline.definitions import build_definitions

    interval = lambda: build_definitions().resolve_sensor_def("transcript_folder_sensor").minimum_interval_seconds
    assert interval() == default(settings.OperationsSettings, "sensor_interval_s") == 15
    monkeypatch.setenv("PSTUTS_SENSOR_INTERVAL_S", "5")
    assert interval() == 5
    monkeypatch.setenv("PSTUTS_SENSOR_INTERVAL_S", "0")
    with pytest.raises(ValueError, match="PSTUTS_SENSOR_INTERVAL_S is '0'; input should be greater than or equal to 1"):
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
def test_the_no_op_ingest_decides_from_the_settings_the_resources_hold(monkeypatch, environment):
    """`pstuts ingest` with nothing to do reads the settings without Dagster: the same the resources hold."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    plain, resources = IngestSettings.from_env(), resources_from_env()
    assert plain == IngestSettings.of(resources)
    assert plain.store.folder() == resources["qdrant"].local_path
    video = next(iter(load_catalog(PACKAGE.parent / "data").videos.values()))
    wanted = fingerprint_function(resources["embeddings"], resources["chunker"])(video)
    assert fingerprints.fingerprint_function(plain.embeddings, plain.chunking)(video) == wanted
