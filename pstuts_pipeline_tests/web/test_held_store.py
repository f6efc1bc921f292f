"""The ask page's store: kept open between questions, handed to another process that waits for it, then opened again
to see what that process wrote."""

import os
import subprocess
import sys
import threading

from pstuts_pipeline.defs.resources import QdrantResource
from pstuts_pipeline.search.edge_store import others_waiting
from pstuts_pipeline.web.held_store import HeldStore
from pstuts_pipeline_tests.support.helpers import COLLECTION, small_collection

WRITER = """
import sys
from qdrant_client import models
from pstuts_pipeline.defs.resources import QdrantResource
with QdrantResource(path=sys.argv[1]).get_store(lock_timeout_s=30) as store:  # as `pstuts ingest` writes
    store.upsert([models.PointStruct(id=99, vector=[1.0, 9.0], payload={"a": 99})])
"""


def held(folder) -> HeldStore:
    qdrant = QdrantResource(path=str(folder))
    return HeldStore(
        lambda: qdrant.get_store(read_only=True, lock_timeout_s=10), lambda: others_waiting(folder, COLLECTION)
    )


def test_the_store_stays_open_between_questions_and_threads_share_it(tmp_path) -> None:
    small_collection(tmp_path / "qdrant", points=3)
    page = held(tmp_path / "qdrant")
    try:
        counts = []

        def question() -> None:
            with page.use() as store:
                counts.append(store.count())

        threads = [threading.Thread(target=question) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counts == [3] * 8 and page.opens == 1
    finally:
        page.close()


def test_a_writer_waiting_for_the_store_gets_it_and_the_next_question_sees_its_write(tmp_path) -> None:
    folder = tmp_path / "qdrant"
    small_collection(folder, points=3)
    page = held(folder)
    try:
        with page.use() as store:
            assert store.count() == 3
        # The page is idle but holds the store: the writer waits on the lock, says so, and the page lets go.
        writer = subprocess.run([sys.executable, "-c", WRITER, str(folder)], capture_output=True, text=True, timeout=60)
        assert writer.returncode == 0, writer.stderr
        with page.use() as store:
            assert store.count() == 4
        assert page.opens == 2 and not others_waiting(folder, COLLECTION)
    finally:
        page.close()


def test_a_marker_left_by_a_waiter_that_died_is_not_waited_for(tmp_path) -> None:
    folder = tmp_path / "qdrant"
    small_collection(folder)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    marker = folder / f"{COLLECTION}.wanted.{int(dead.stdout)}.1"
    marker.touch()
    assert not others_waiting(folder, COLLECTION) and not marker.exists()
    (folder / f"{COLLECTION}.wanted.{os.getpid()}.1").touch()
    assert others_waiting(folder, COLLECTION)
