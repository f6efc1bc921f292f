"""Qdrant server mode (QDRANT_URL): one collection however many writers race to create it, an integer index on the
video id, writers in parallel, and the whole pipeline without any local Qdrant folder.

No Qdrant server can be installed on the machines these tests were written on; they run wherever QDRANT_URL
reaches one (e.g. `docker run -p 6333:6333 qdrant/qdrant` and QDRANT_URL=http://127.0.0.1:6333)."""

import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase
from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import QdrantResource, resources_from_env
from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.client_store import ClientStore
from pstuts_pipeline.search.edge_store import EdgeStore
from pstuts_pipeline_tests.support.servers import REPO

pytestmark = pytest.mark.server
URL = os.environ.get("QDRANT_URL", "")
WRITERS = 6
DIMENSION = 8
MODEL_ID = "test:server-mode"


def connect() -> QdrantClient:
    return QdrantClient(url=URL, api_key=os.environ.get("QDRANT_API_KEY") or None, timeout=30)


@pytest.fixture(scope="module")
def server() -> None:
    reason = "no Qdrant server at QDRANT_URL (none can be installed here)"
    if not URL:
        pytest.skip(reason)
    try:
        with connect() as client:
            client.get_collections()
    except Exception as error:  # noqa: BLE001 - any failure to reach it means: skip, saying why
        pytest.skip(f"{reason}: {URL}: {type(error).__name__}")


@pytest.fixture
def collection(server) -> Iterator[str]:
    name = f"pstuts_test_{uuid.uuid4().hex[:10]}"
    yield name
    with connect() as client:
        client.delete_collection(name)


def all_at_once(work: Callable[[int], None], count: int) -> None:
    """Run work(i) in `count` threads released together, each with its own client; re-raise the first error."""
    barrier, errors = threading.Barrier(count), []

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except Exception as error:  # noqa: BLE001 - collected and re-raised below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_parallel_writers_create_the_collection_once_with_a_video_id_index(collection):
    created = []

    def writer(_: int) -> None:
        with connect() as client:
            create = client.create_collection

            def counted(*args, **kwargs):
                result = create(*args, **kwargs)
                created.append(result)
                return result

            client.create_collection = counted
            vectorstore.ensure_collection(client, collection, DIMENSION, MODEL_ID)

    all_at_once(writer, WRITERS)
    assert len(created) == 1  # the others lost the race and got "already exists"
    with connect() as client:
        info = client.get_collection(collection)
        assert info.config.metadata["embedding_model"] == MODEL_ID
        assert info.payload_schema[vectorstore.VIDEO_ID_FIELD].data_type == models.PayloadSchemaType.INTEGER
        with pytest.raises(vectorstore.ModelMismatchError):
            vectorstore.ensure_collection(client, collection, DIMENSION, "another:model")


def video_points(video_id: int, chunks: int) -> list[models.PointStruct]:
    rng = np.random.default_rng(video_id)
    timed = [
        TimedChunk(
            i,
            (
                Phrase(2 * i, f"phrase {2 * i} of {video_id}", 2.0 * i, 2.0 * i + 1),
                Phrase(2 * i + 1, f"phrase {2 * i + 1} of {video_id}", 2.0 * i + 1, 2.0 * i + 2),
            ),
        )
        for i in range(chunks)
    ]
    info = vectorstore.VideoInfo(video_id, f"video {video_id}", "", f"https://example.com/{video_id}", "hash")
    return vectorstore.build_points(
        info, timed, rng.random((chunks, DIMENSION)).tolist(), rng.random((chunks, 2, DIMENSION)).tolist(), "fp"
    )


def test_writers_of_different_videos_run_in_parallel(collection):
    qdrant = QdrantResource(url=URL, api_key=os.environ.get("QDRANT_API_KEY") or None, collection=collection)
    with qdrant.get_store() as store:
        vectorstore.ensure_collection(store, DIMENSION, MODEL_ID)
    inside = threading.Barrier(WRITERS, timeout=60)

    def writer(i: int) -> None:
        with qdrant.get_store() as store:
            inside.wait()  # every writer holds the collection at once: no lock serializes them, unlike Edge
            vectorstore.replace_video_points(store, 1000 + i, video_points(1000 + i, 5 + i))

    all_at_once(writer, WRITERS)
    with connect() as client:
        for i in range(WRITERS):
            count = client.count(collection, count_filter=vectorstore.video_filter(1000 + i), exact=True).count
            assert count == 5 + i
        # A re-ingest with fewer chunks leaves no stale points.
        assert vectorstore.replace_video_points(ClientStore(client, collection), 1000, video_points(1000, 2)) == 3
        assert client.count(collection, count_filter=vectorstore.video_filter(1000), exact=True).count == 2


class VersionOnly(BaseHTTPRequestHandler):
    """Answers the client's version probe, so its background compatibility check has nothing to warn about."""

    probed = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = json.dumps({"title": "qdrant - vector search engine", "version": metadata.version("qdrant-client")})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())
        self.probed.set()

    def log_message(self, *args: object) -> None:
        pass


def test_server_mode_needs_no_local_path(tmp_path, monkeypatch):
    """With a URL, no storage folder, lock file or path is touched: any machine can run any step."""
    not_a_folder = tmp_path / "a-file"  # nothing can be created below a file, not even by root
    not_a_folder.write_text("")
    monkeypatch.setenv("PSTUTS_STORAGE_DIR", str(not_a_folder / "storage"))
    probe = ThreadingHTTPServer(("127.0.0.1", 0), VersionOnly)
    threading.Thread(target=probe.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{probe.server_address[1]}"
    monkeypatch.setenv("QDRANT_URL", url)
    try:
        qdrant = resources_from_env()["qdrant"]
        assert qdrant.url == url
        with qdrant.get_store() as store:
            assert isinstance(store, ClientStore)
        VersionOnly.probed.wait(timeout=30)  # the client checks the version in a thread of its own
    finally:
        probe.shutdown()
        probe.server_close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    with QdrantResource(path=str(tmp_path / "local")).get_store() as store:
        assert isinstance(store, EdgeStore)


@pytest.mark.slow
def test_the_pipeline_in_server_mode_keeps_nothing_of_qdrant_locally(server, storage, instance, monkeypatch):
    name = f"pstuts_test_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("PSTUTS_COLLECTION", name)
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(REPO / "data"))
    try:
        report = ingest(build_definitions(resources_from_env()), instance)
        assert report.ok and report.points_in_collection == report.chunks > 0
    finally:
        with connect() as client:
            client.delete_collection(name)
    assert not (storage / "qdrant").exists()
