"""Plain helpers the tests share: the sample data, stand-in embedders, stored points, running the CLI."""

import hashlib
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from qdrant_client import models

from pstuts_pipeline.cli import app as cli
from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.cli.report import IngestReport
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.edge_store import EdgeStore
from pstuts_pipeline_tests.support import REPO

SAMPLE_DIR = REPO / "data"
SAMPLE: list[dict] = json.loads((SAMPLE_DIR / "sample_videos.json").read_text())
COLLECTION = "pstuts_transcripts"


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


def light_copy(source: str, target: str) -> None:
    """Copy one file of a store for a test: ONNX exports hard-linked (read-only, 87 MB), zero runs left as holes.

    Qdrant Edge preallocates its write-ahead log as sparse files; a plain copy writes their zeros out, and with the
    exports each test's copy of an ingested store took 330 MB of disk, enough to fill it over the slow tier.
    """
    if "onnx_models" in Path(source).parts:
        os.link(source, target)
        return
    with open(source, "rb") as inp, open(target, "wb") as out:
        while block := inp.read(1 << 20):
            if block.strip(b"\0"):
                out.write(block)
            else:
                out.seek(len(block), os.SEEK_CUR)
        out.truncate()
    shutil.copystat(source, target)


def copy_storage(source: Path, target: Path) -> None:
    """A private copy of a storage folder (or any tree) that costs little disk: see `light_copy`."""
    shutil.copytree(source, target, dirs_exist_ok=True, copy_function=light_copy)


def settled(path: Path, seconds_ago: float = 60) -> None:
    """Date a file back, as a copy that finished a while ago: the sensor reads only files left unwritten a moment."""
    past = time.time() - seconds_ago
    os.utime(path, (past, past), follow_symlinks=False)


def write_data(folder: Path, a: list[dict] | None = None, b: list[dict] | None = None) -> None:
    """A data folder of two files: a.json (9001, 9002) and b.json (9003) unless given other videos."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.json").write_text(json.dumps(SAMPLE[:2] if a is None else a, indent=1), encoding="utf-8")
    (folder / "b.json").write_text(json.dumps(SAMPLE[2:] if b is None else b, indent=1), encoding="utf-8")


def local_points(folder: Path, collection: str = COLLECTION, vectors: bool = False) -> list[models.Record]:
    """Every point of a local collection with its payload, read under the store's lock as any user does."""
    store = EdgeStore(folder, collection, lock_timeout_s=60)
    try:
        return store.scroll(limit=100_000, with_payload=True, with_vectors=vectors)[0]
    finally:
        store.close()


def small_collection(folder: Path, collection: str = COLLECTION, points: int = 1) -> None:
    """A local collection of a few 2-d points, for what needs a store but no model."""
    store = EdgeStore(folder, collection, lock_timeout_s=5)
    try:
        vector = models.VectorParams(size=2, distance=models.Distance.COSINE)
        store.create({"": vector}, {}, "test-model", "metadata.video_id")
        store.upsert([models.PointStruct(id=i, vector=[1.0, float(i)], payload={"a": i}) for i in range(1, points + 1)])
    finally:
        store.close()


def chunk_point(
    rng: random.Random, video_id: int, index: int, fingerprint: str = "f1", dimension: int = 8
) -> models.PointStruct:
    """A chunk with 1-6 phrase vectors and a few BM25 terms of a small vocabulary, so queries share terms."""
    phrases = [[rng.gauss(0, 1) for _ in range(dimension)] for _ in range(rng.randint(1, 6))]
    terms = sorted(rng.sample(range(40), rng.randint(1, 8)))
    return models.PointStruct(
        id=vectorstore.point_id(video_id, index),
        vector={
            vectorstore.DENSE_VECTOR: [rng.gauss(0, 1) for _ in range(dimension)],
            vectorstore.SENTENCE_VECTORS: phrases,
            vectorstore.SPARSE_VECTOR: models.SparseVector(indices=terms, values=[rng.random() for _ in terms]),
        },
        payload={
            "page_content": f"chunk {video_id}/{index}",
            "metadata": {"video_id": video_id, "chunk_index": index, "fingerprint": fingerprint},
        },
    )


def stored_points(storage: Path) -> list[dict]:
    """Every point in the local collection, as plain data: id, payload and vectors."""
    points = local_points(storage / "qdrant", vectors=True)
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


def run_observations(instance: dg.DagsterInstance, run_id: str, asset: str) -> list[dict]:
    """An asset's totals as each of its steps in one run logged them: the observation beside each partition's own."""
    records = instance.fetch_observations(dg.AssetKey(asset), limit=1000).records
    return [{k: v.value for k, v in r.asset_observation.metadata.items()} for r in records if r.run_id == run_id]


def run_metadata(instance: dg.DagsterInstance, run_id: str, asset: str) -> dict:
    """An asset's totals in one run, which its one step reported once."""
    found = run_observations(instance, run_id, asset)
    assert len(found) == 1, f"{asset} reported its totals {len(found)} times in run {run_id}"
    return found[0]
