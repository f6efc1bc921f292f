"""What only the local engine needs: the project's lock before any open (an engine defect depends on it), and an
older pstuts's local-mode folder found and migrated, never silently ignored."""

import random
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import Timeout
from qdrant_client import QdrantClient, models

from pstuts_pipeline.cli import project
from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.client_store import ClientStore
from pstuts_pipeline.search.edge_store import EdgeStore, LocalModeFolderError
from pstuts_pipeline_tests.support.helpers import COLLECTION, chunk_point, run_main

DIMENSION = 8


def written_then_deleted_by_filter(folder: Path) -> EdgeStore:
    """The state the engine defect needs: a payload index (the video id's) and a delete-by-filter not yet flushed."""
    store = EdgeStore(folder, COLLECTION, lock_timeout_s=5)
    vectorstore.ensure_collection(store, DIMENSION, "test-model")
    rng = random.Random(0)
    for video in (1, 2, 3):
        vectorstore.replace_video_points(store, video, [chunk_point(rng, video, i) for i in range(20)])
    store.flush()  # in the same session as the index: after a reopen the defect does not show
    assert vectorstore.delete_video(store, 2) == 20
    return store


def open_in_another_process(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_second_opener_waits_on_the_lock_and_never_reaches_the_engine(tmp_path) -> None:
    holder = written_then_deleted_by_filter(tmp_path / "qdrant")
    second = open_in_another_process(
        "from pstuts_pipeline.defs.resources import QdrantResource\n"
        f"with QdrantResource(path={str(tmp_path / 'qdrant')!r}).get_store(lock_timeout_s=0.5): pass\n"
    )
    assert second.returncode == 1 and "filelock._error.Timeout" in second.stderr.replace("_core._errors", "_error")
    holder.close()  # flushes: broken if the second process had called EdgeShard.load()
    with QdrantResource(path=str(tmp_path / "qdrant")).get_store() as store:
        assert store.count() == 40 and sorted(vectorstore.stored_fingerprints(store)) == [1, 3]
    with pytest.raises(Timeout):  # within one process too: a second handle waits for the first
        with (
            QdrantResource(path=str(tmp_path / "qdrant")).get_store(),
            QdrantResource(path=str(tmp_path / "qdrant")).get_store(lock_timeout_s=0.2),
        ):
            pass


def test_the_engine_defect_the_lock_guards_against_is_still_there(tmp_path) -> None:
    """qdrant-edge-py 0.9.0: a refused second EdgeShard.load() breaks the holder's next flush. When this fails, the
    engine was fixed: the lock is still needed (one handle per folder), but docs/architecture.md's note can go."""
    holder = written_then_deleted_by_filter(tmp_path / "qdrant")
    second = open_in_another_process(
        f"import qdrant_edge\nqdrant_edge.EdgeShard.load({str(tmp_path / 'qdrant' / COLLECTION)!r})\n"
    )
    assert second.returncode == 1 and "WouldBlock" in second.stderr  # refused by the engine's WAL lock
    with pytest.raises(Exception, match="shorter than expected"):
        holder.close()
    with QdrantResource(path=str(tmp_path / "qdrant")).get_store() as store:  # the WAL restores the data
        assert store.count() == 40


def local_mode_folder(folder: Path) -> ClientStore:
    """A store as an older pstuts wrote it: qdrant-client's local mode, the project's layout, 3 videos."""
    store = ClientStore(QdrantClient(path=str(folder)), COLLECTION)
    vectorstore.ensure_collection(store, DIMENSION, "test-model")
    rng = random.Random(1)
    for video in (1, 2, 3):
        vectorstore.replace_video_points(store, video, [chunk_point(rng, video, i) for i in range(15)])
    return store


def test_a_local_mode_folder_is_refused_in_one_line_naming_the_command(tmp_path, monkeypatch, capsys) -> None:
    local_mode_folder(tmp_path / "qdrant").close()
    with pytest.raises(LocalModeFolderError, match="run `pstuts migrate-store`"):
        with QdrantResource(path=str(tmp_path / "qdrant")).get_store():
            pass
    monkeypatch.setenv("PSTUTS_QDRANT_PATH", str(tmp_path / "qdrant"))
    monkeypatch.setattr(project, "definitions", project.definitions.__wrapped__)
    code, out, err = run_main(monkeypatch, capsys, "search", "How do I crop?")
    assert code == 1 and out == ""
    assert err == (
        f"error: {tmp_path / 'qdrant'} holds a qdrant-client local-mode store from an older pstuts: run `pstuts "
        "migrate-store` to copy it into Qdrant Edge (the old folder is kept beside it as a backup)\n"
    )


def test_migrate_store_copies_every_point_and_keeps_the_old_folder(tmp_path, monkeypatch, capsys) -> None:
    old = local_mode_folder(tmp_path / "qdrant")
    before = {str(p.id): p for p in old.scroll(limit=1000, with_vectors=True)[0]}
    requests = [
        models.QueryRequest(query=[[0.5] * DIMENSION], using=vectorstore.SENTENCE_VECTORS, limit=10),
        models.QueryRequest(
            query=models.SparseVector(indices=[3, 7], values=[1.0, 1.0]), using=vectorstore.SPARSE_VECTOR, limit=10
        ),
    ]
    ranked_before = [[(p.id, round(p.score, 4)) for p in r] for r in old.query_batch(requests)]
    old.close()
    monkeypatch.setenv("PSTUTS_QDRANT_PATH", str(tmp_path / "qdrant"))
    monkeypatch.setattr(project, "definitions", project.definitions.__wrapped__)
    code, _, err = run_main(monkeypatch, capsys, "migrate-store")
    assert code in (None, 0), err
    assert f"{COLLECTION}: 45 points copied into Qdrant Edge" in err
    assert (tmp_path / "qdrant.local-mode" / "meta.json").is_file()
    with QdrantResource(path=str(tmp_path / "qdrant")).get_store() as store:
        assert isinstance(store, EdgeStore) and store.model() == "test-model"
        after = {str(p.id): p for p in store.scroll(limit=1000, with_vectors=True)[0]}
        assert [[(p.id, round(p.score, 4)) for p in r] for r in store.query_batch(requests)] == ranked_before
    assert sorted(after) == sorted(before)
    assert all(after[i].payload == before[i].payload for i in before)
    assert vectorstore.stored_fingerprints(
        ClientStore(QdrantClient(path=str(tmp_path / "qdrant.local-mode")), COLLECTION)
    ) == {
        1: {"f1"},
        2: {"f1"},
        3: {"f1"},
    }
    code, _, err = run_main(monkeypatch, capsys, "migrate-store")  # nothing left to migrate: said, not done twice
    assert code == 1 and "is not a qdrant-client local-mode folder: nothing to migrate" in err


def test_reading_leaves_the_ledgers_stamps_alone_and_any_write_moves_them(tmp_path) -> None:
    """The no-op ingest skips the store while these stamps hold: a read must keep them, every kind of write move them."""
    from pstuts_pipeline.sources.ledger import qdrant_local_files, stamps

    folder = tmp_path / "qdrant"
    written_then_deleted_by_filter(folder).close()
    watched = qdrant_local_files(folder, COLLECTION)
    before = stamps(watched)
    with QdrantResource(path=str(folder)).get_store() as store:  # a reconcile's read: Edge rewrites its own config
        assert vectorstore.stored_fingerprints(store) == {1: {"f1"}, 3: {"f1"}}
    assert stamps(watched) == before
    for write in (
        lambda store: vectorstore.delete_video(store, 3),
        lambda store: store.upsert([chunk_point(random.Random(5), 9, 0)]),
    ):
        with QdrantResource(path=str(folder)).get_store() as store:
            write(store)
        assert stamps(watched) != before
        before = stamps(watched)
