"""Shared fixtures: the real PsTuts-VQA splits beside the checkout, isolated storage, real and fake embedders."""

import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from pstuts_pipeline.transcripts import load_catalog

REPO = Path(__file__).resolve().parents[1]
PSTUTS_DIR = Path(os.environ.get("PSTUTS_SHARED_DIR", REPO.parent / "shared" / "pstuts"))
SAMPLE_DIR = REPO / "data"

warnings.filterwarnings("ignore", module="dagster")


def pytest_configure(config: pytest.Config) -> None:
    if not (PSTUTS_DIR / "train.json").exists():
        raise pytest.UsageError(f"PsTuts-VQA data not found at {PSTUTS_DIR} (set PSTUTS_SHARED_DIR)")


class HashEmbeddings(Embeddings):
    """A fast deterministic stand-in for unit tests: bag-of-words hashed into a normalized vector."""

    def __init__(self, size: int = 64):
        self.size = size
        self.calls: list[int] = []

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.size)
        for word in text.lower().split():
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.size] += 1.0
        norm = np.linalg.norm(vector)
        return (vector / norm if norm else vector).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.fixture(scope="session")
def pstuts_files() -> list[Path]:
    return [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]


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


@pytest.fixture(autouse=True)
def no_current_dagster_instance_from_earlier_tests():
    """Each test starts with no 'current' Dagster instance state left by another test.

    Entering an instance (`with instance:`) makes its defs-state storage the current one in a context variable;
    an instance entered in one test and torn down elsewhere (pytest finalizers run in another context) stays
    current, and once it is garbage-collected every later `Definitions.resolve_job_def` fails with "Attempted
    to resolve undefined DagsterInstance weakref". Dagster offers no public way to reset it.
    """
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield
