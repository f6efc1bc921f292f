"""The ask page's copy of a local store: kept open while the store is unchanged, renewed when an ingest wrote it,
and still answering while an ingest holds the store."""

import os
from pathlib import Path

import pytest
from filelock import FileLock, Timeout
from qdrant_client import QdrantClient, models

from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline.web.store import StoreCopy


def write_points(resource: QdrantResource, ids: list[int]) -> None:
    """Write as `pstuts ingest` does: under the store's lock, through a client of the folder itself."""
    with resource.get_client() as client:
        if not client.collection_exists("c"):
            client.create_collection("c", vectors_config=models.VectorParams(size=2, distance="Cosine"))
        client.upsert("c", points=[models.PointStruct(id=i, vector=[1.0, float(i)]) for i in ids], wait=True)


def count(copy: StoreCopy) -> int:
    with copy.client() as client:
        return client.count("c").count if client.collection_exists("c") else -1


def test_the_copy_stays_open_until_the_store_changes_then_shows_the_new_points(tmp_path) -> None:
    resource = QdrantResource(path=str(tmp_path / "qdrant"))
    copy = StoreCopy(resource.local_path, lock_timeout_s=1)
    assert count(copy) == -1  # no store yet: an empty copy, the engine says "run pstuts ingest"
    write_points(resource, [1, 2])
    assert [count(copy), count(copy), count(copy)] == [2, 2, 2]
    assert copy.copies == 2  # one for the empty folder, one after the write; none for unchanged questions
    with copy.client() as first:
        pass
    write_points(resource, [3])
    with copy.client() as second:
        assert second is not first and second.count("c").count == 3
    copy.close()


def test_while_an_ingest_holds_the_store_questions_are_answered_from_the_last_copy(tmp_path) -> None:
    resource = QdrantResource(path=str(tmp_path / "qdrant"))
    write_points(resource, [1, 2])
    copy = StoreCopy(resource.local_path, lock_timeout_s=0.2)
    with FileLock(str(resource.local_path) + ".lock"):  # as `pstuts ingest` holds it while writing
        with pytest.raises(Timeout):  # no copy yet: the engine answers 503, naming the lock
            count(copy)
    assert count(copy) == 2
    with FileLock(str(resource.local_path) + ".lock"):
        store = QdrantClient(path=str(resource.local_path))  # the ingest writes a point
        store.upsert("c", points=[models.PointStruct(id=3, vector=[1.0, 3.0])], wait=True)
        store.close()
        assert count(copy) == 2  # the store as it was before the ingest, not a wait
    assert count(copy) == 3
    copy.close()


def test_a_store_this_process_may_not_write_is_copied_without_a_lock(tmp_path, monkeypatch) -> None:
    resource = QdrantResource(path=str(tmp_path / "qdrant"))
    write_points(resource, [1])
    before = sorted(p.name for p in tmp_path.rglob("*") if p.suffix != ".lock")
    real_access = os.access
    # As root every folder is writable, so the read-only mount is simulated where the copy asks.
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == resource.local_path else real_access(p, mode))
    (tmp_path / "qdrant.lock").unlink()
    copy = StoreCopy(resource.local_path, lock_timeout_s=0.2)
    assert count(copy) == 1
    copy.close()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no lock file written beside or inside it
