"""Shared fixtures: the PsTuts-VQA splits (PSTUTS_VQA_DIR), isolated storage and Dagster instance, the sample and dev
videos ingested once per session (tests and modules get copies), the keyed embedding server (plain helpers are in
support/helpers.py)."""

import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.search import evaluation
from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline_tests.support.helpers import (
    SAMPLE,
    HashEmbeddings,
    copy_storage,
    run_ingest,
    write_data,
)
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.servers import embedding_server, skip_or_fail

warnings.filterwarnings("ignore", module="dagster")


def pytest_report_header() -> str:
    found = (
        "found" if (PSTUTS_DIR / "train.json").exists() else "missing: the tests that need it skip (fail under CI=true)"
    )
    return f"PsTuts-VQA data (PSTUTS_VQA_DIR): {PSTUTS_DIR} ({found})"


@pytest.fixture(scope="session")
def pstuts_files() -> list[Path]:
    """The PsTuts-VQA train and dev splits; the test skips when they are absent (fails under CI=true)."""
    files = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
    if not all(f.is_file() for f in files):
        skip_or_fail(f"PsTuts-VQA data not found at {PSTUTS_DIR} (set PSTUTS_VQA_DIR)")
    return files


@pytest.fixture(scope="session")
def pstuts_catalog(pstuts_files):
    catalog = load_catalog(pstuts_files)
    assert len(catalog.videos) == 65 and not catalog.errors
    return catalog


@pytest.fixture(scope="session")
def pstuts_records(pstuts_files) -> list[dict]:
    return [v for f in pstuts_files for v in json.loads(f.read_text())]


@pytest.fixture
def storage(tmp_path, monkeypatch) -> Path:
    """A private storage folder (Qdrant, caches, IO) and Dagster home for one test."""
    root = tmp_path / "storage"
    monkeypatch.setenv("PSTUTS_STORAGE_DIR", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    (root / "dagster_home").mkdir(parents=True)
    return root


@pytest.fixture
def files_written_long_ago(monkeypatch):
    """Ticks that stand for ones long after the files were written: read them at once (settling has its own tests)."""
    monkeypatch.setenv("PSTUTS_SETTLE_S", "0")


@pytest.fixture
def hash_embeddings() -> HashEmbeddings:
    return HashEmbeddings()


@pytest.fixture(scope="session")
def ingested_once(tmp_path_factory) -> Path:
    """The sample videos ingested with the real model, once per session; tests start from a copy (`ingested`)."""
    root = tmp_path_factory.mktemp("ingested")
    write_data(root / "data")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_STORAGE_DIR", str(root / "storage"))
        env.setenv("DAGSTER_HOME", str(root / "storage" / "dagster_home"))
        env.setenv("PSTUTS_DATA_DIR", str(root / "data"))
        (root / "storage" / "dagster_home").mkdir(parents=True)
        (root / "storage" / "dagster_home" / "dagster.yaml").write_text(DEFAULT_INSTANCE_YAML)
        report = run_ingest()
    assert report.ok and report.plan.to_ingest == sorted(str(v["video_id"]) for v in SAMPLE)
    return root


@pytest.fixture
def ingested(ingested_once, storage, tmp_path, monkeypatch) -> Path:
    """A private copy of the ingested state; returns its data folder."""
    copy_storage(ingested_once / "storage", storage)
    shutil.copytree(ingested_once / "data", tmp_path / "data")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


SEARCHABLE_VIDEOS = 3


@pytest.fixture(scope="session")
def searchable_once(tmp_path_factory, pstuts_files) -> Path:
    """The three shortest dev videos ingested through the pipeline (real model, local Qdrant), once per session."""
    videos = sorted(json.loads(pstuts_files[1].read_text()), key=lambda v: len(v["transcripts"]))[:SEARCHABLE_VIDEOS]
    root = tmp_path_factory.mktemp("retrieval_once")
    (root / "data").mkdir()
    (root / "data" / "dev_subset.json").write_text(json.dumps(videos))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_DATA_DIR", str(root / "data"))
        env.setenv("PSTUTS_STORAGE_DIR", str(root / "storage"))
        env.setenv("DAGSTER_HOME", str(root / "storage" / "dagster_home"))
        (root / "storage" / "dagster_home").mkdir(parents=True)
        resources = resources_from_env()
        instance = dg.DagsterInstance.get()
        try:
            report = ingest(build_definitions(resources), instance)
        finally:
            instance.dispose()
    assert report.ok and report.points_in_collection > 0
    return root


@pytest.fixture(scope="module")
def searchable(searchable_once, tmp_path_factory) -> Iterator[dict]:
    """A module's own copy of `searchable_once`, its resources and instance, and the videos' questions.

    The instance is passed to whoever needs it, never entered with `with`: an entered instance is Dagster's current
    one (its defs-state storage in a context variable) for as long as it stays entered, here every test of the module.
    """
    root = tmp_path_factory.mktemp("retrieval")
    copy_storage(searchable_once, root)
    data = root / "data"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_DATA_DIR", str(data))
        env.setenv("PSTUTS_STORAGE_DIR", str(root / "storage"))
        env.setenv("DAGSTER_HOME", str(root / "storage" / "dagster_home"))
        instance = dg.DagsterInstance.get()
        try:
            yield {
                "resources": resources_from_env(),
                "instance": instance,
                "questions": evaluation.load_questions([data / "dev_subset.json"]),
                "qa_file": data / "dev_subset.json",
                "env": {"PSTUTS_DATA_DIR": str(data), "PSTUTS_STORAGE_DIR": str(root / "storage")},
            }
        finally:
            instance.dispose()


@pytest.fixture
def instance(storage: Path) -> Iterator[dg.DagsterInstance]:
    """The test's Dagster instance, in its storage folder: entered for the test and closed when it ends.

    Entering an instance makes it Dagster's current one (its defs-state storage, in a context variable, is what
    `resolve_job_def` reads). Entered and closed here, in one fixture, nothing of it outlives the test; an instance
    entered and left to the garbage collector, if collected on another thread (a run's), would stay current on this
    one after it is gone: "Attempted to resolve undefined DagsterInstance weakref" in a later test.
    """
    with dg.DagsterInstance.get() as instance:
        yield instance


@pytest.fixture(scope="session")
def keyed_server(tmp_path_factory) -> Iterator[tuple[str, str]]:
    """(base URL, the key it accepts): infinity-emb on a free port requiring a key, for every module that asks."""
    key = f"pstuts-secret-{os.urandom(8).hex()}"
    with embedding_server(tmp_path_factory.mktemp("keyed_embedding_server"), api_key=key) as url:
        yield url, key
