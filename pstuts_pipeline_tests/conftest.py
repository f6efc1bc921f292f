"""Shared fixtures and helpers: the PsTuts-VQA splits (PSTUTS_VQA_DIR), isolated storage and Dagster instance, the
sample and dev videos ingested once per module, the keyed embedding server, fake embedders, stored points."""

import hashlib
import json
import os
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from qdrant_client import QdrantClient
from servers import embedding_server, skip_or_fail

from benchmarks.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline import cli, evaluation
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.ingest import IngestReport, ingest
from pstuts_pipeline.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.resources import resources_from_env
from pstuts_pipeline.transcripts import load_catalog

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DIR = REPO / "data"
SAMPLE: list[dict] = json.loads((SAMPLE_DIR / "sample_videos.json").read_text())
COLLECTION = "pstuts_transcripts"

warnings.filterwarnings("ignore", module="dagster")


def pytest_report_header() -> str:
    found = (
        "found" if (PSTUTS_DIR / "train.json").exists() else "missing: the tests that need it skip (fail under CI=true)"
    )
    return f"PsTuts-VQA data (PSTUTS_VQA_DIR): {PSTUTS_DIR} ({found})"


def bag_of_words(texts: list[str], size: int = 256) -> np.ndarray:
    """A stand-in encoder: hashed word counts, normalized, so questions lean towards phrases sharing their words."""
    vectors = np.zeros((len(texts), size))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % size] += 1
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


class HashEmbeddings(Embeddings):
    """A fast deterministic stand-in for unit tests: bag-of-words hashed into a normalized vector."""

    def __init__(self, size: int = 64):
        self.size = size
        self.calls: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return bag_of_words(texts, self.size).tolist()

    def embed_query(self, text: str) -> list[float]:
        return bag_of_words([text], self.size)[0].tolist()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def flip_byte(path: Path, offset: int) -> None:
    """Tamper with a file by one bit, as a corrupted download or a swapped file would."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def write_data(folder: Path, a: list[dict] | None = None, b: list[dict] | None = None) -> None:
    """A data folder of two files: a.json (9001, 9002) and b.json (9003) unless given other videos."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.json").write_text(json.dumps(SAMPLE[:2] if a is None else a, indent=1), encoding="utf-8")
    (folder / "b.json").write_text(json.dumps(SAMPLE[2:] if b is None else b, indent=1), encoding="utf-8")


def stored_points(storage: Path) -> list[dict]:
    """Every point in the local collection, as plain data: id, payload and vectors."""
    client = QdrantClient(path=str(storage / "qdrant"))
    try:
        points, _ = client.scroll(COLLECTION, limit=10_000, with_payload=True, with_vectors=True)
    finally:
        client.close()
    return sorted((json.loads(p.model_dump_json()) for p in points), key=lambda p: p["id"])


def run_ingest() -> IngestReport:
    """`pstuts ingest` in this process, on the instance in DAGSTER_HOME, closed again before returning."""
    with dg.DagsterInstance.get() as instance:
        return ingest(build_definitions(resources_from_env()), instance)


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """`pstuts ARGS` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["pstuts", *args])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def files_containing(root: Path, needle: str) -> list[str]:
    """Every file under root whose bytes contain needle (SQLite stores event JSON as plain text)."""
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def events_text(home: Path) -> str:
    """Every event, run config and tag of the instance, serialized, as the UI would read them."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        runs = instance.get_runs()
        parts = [json.dumps(run.run_config) + json.dumps(dict(run.tags)) for run in runs]
        parts += [dg.serialize_value(event) for run in runs for event in instance.all_logs(run.run_id)]
    assert runs and parts
    return "\n".join(parts)


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
def hash_embeddings() -> HashEmbeddings:
    return HashEmbeddings()


@pytest.fixture(scope="module")
def ingested_once(tmp_path_factory) -> Path:
    """The sample videos ingested with the real model, once per module; tests start from a copy (`ingested`)."""
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
    shutil.copytree(ingested_once / "storage", storage, dirs_exist_ok=True)
    shutil.copytree(ingested_once / "data", tmp_path / "data")
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


SEARCHABLE_VIDEOS = 3


@pytest.fixture(scope="module")
def searchable(tmp_path_factory, pstuts_files) -> Iterator[dict]:
    """The three shortest dev videos ingested through the pipeline (real model, local Qdrant), and their questions.

    The instance is passed to whoever needs it, never entered with `with`: an entered instance is Dagster's current
    one (its defs-state storage in a context variable) for as long as it stays entered, here every test of the module.
    """
    videos = sorted(json.loads(pstuts_files[1].read_text()), key=lambda v: len(v["transcripts"]))[:SEARCHABLE_VIDEOS]
    root = tmp_path_factory.mktemp("retrieval")
    data = root / "data"
    data.mkdir()
    (data / "dev_subset.json").write_text(json.dumps(videos))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_DATA_DIR", str(data))
        env.setenv("PSTUTS_STORAGE_DIR", str(root / "storage"))
        env.setenv("DAGSTER_HOME", str(root / "storage" / "dagster_home"))
        (root / "storage" / "dagster_home").mkdir(parents=True)
        resources = resources_from_env()
        instance = dg.DagsterInstance.get()
        try:
            report = ingest(build_definitions(resources), instance)
            assert report.ok and report.points_in_collection > 0
            yield {
                "resources": resources,
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
