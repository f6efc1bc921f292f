"""One contract, two real engines: Qdrant Edge (the local default) and qdrant-client (a server; its local mode stands
in here, since no Qdrant server installs on this machine). The same writes must give the same points, counts,
fingerprints and rankings through either."""

import random
from collections.abc import Iterator

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.client_store import ClientStore
from pstuts_pipeline.search.edge_store import EdgeStore
from pstuts_pipeline.search.store import Store
from pstuts_pipeline_tests.support.helpers import chunk_point

DIMENSION = 8

VIDEOS = (1, 2, 3, 4, 5)


def open_store(engine: str, tmp_path, name: str = "c") -> Store:
    if engine == "edge":
        return EdgeStore(tmp_path / "edge", name, lock_timeout_s=1)
    return ClientStore(QdrantClient(path=str(tmp_path / "client")), name)


@pytest.fixture(params=["edge", "client"])
def store(request, tmp_path) -> Iterator[Store]:
    opened = open_store(request.param, tmp_path)
    yield opened
    opened.close()


def fill(store: Store, chunks: int = 60, seed: int = 0) -> None:
    vectorstore.ensure_collection(store, DIMENSION, "test-model")
    rng = random.Random(seed)
    for video in VIDEOS:
        points = [chunk_point(rng, video, i) for i in range(chunks)]
        vectorstore.replace_video_points(store, video, points)


def test_a_new_collection_records_its_model_and_refuses_another(store) -> None:
    assert not store.exists() and store.model() is None and store.count() == 0
    vectorstore.ensure_collection(store, DIMENSION, "test-model")
    vectorstore.ensure_collection(store, DIMENSION, "test-model")  # again: a no-op
    assert store.exists() and store.model() == "test-model"
    with pytest.raises(vectorstore.ModelMismatchError, match="built with test-model, not other-model"):
        vectorstore.ensure_collection(store, DIMENSION, "other-model")


def test_rewriting_a_video_deletes_only_its_stale_points(store) -> None:
    fill(store, chunks=5)
    rng = random.Random(1)
    fewer = [chunk_point(rng, 2, i, "f2") for i in range(3)]
    assert vectorstore.replace_video_points(store, 2, fewer) == 2  # by filter: chunks 3 and 4 of video 2
    before = {str(p.id) for p in vectorstore.points_of_videos(store, [3], payload=False)[3]}
    assert vectorstore.replace_video_points(store, 3, [chunk_point(rng, 3, 0, "f2")], before) == 4  # by id
    assert store.count() == 5 * 5 - 2 - 4
    assert store.count(vectorstore.video_filter(2)) == 3
    fingerprints = vectorstore.stored_fingerprints(store)
    assert fingerprints == {1: {"f1"}, 2: {"f2"}, 3: {"f2"}, 4: {"f1"}, 5: {"f1"}}
    assert vectorstore.delete_video(store, 4) == 5 and vectorstore.delete_video(store, 4) == 0
    assert 4 not in vectorstore.stored_fingerprints(store)


def test_points_come_back_whole_with_string_ids_in_chunk_order(store) -> None:
    fill(store, chunks=7)
    rng = random.Random(0)
    written = [chunk_point(rng, 1, i) for i in range(7)]  # the same draws as fill's first video
    found = vectorstore.video_points(store, 1)
    assert [p.id for p in found] == [str(p.id) for p in written]
    assert [p.payload for p in found] == [p.payload for p in written]
    back = store.retrieve([found[2].id], with_payload=True, with_vectors=[vectorstore.SENTENCE_VECTORS])
    phrases = np.asarray(written[2].vector[vectorstore.SENTENCE_VECTORS])
    unit = phrases / np.linalg.norm(phrases, axis=1, keepdims=True)  # cosine vectors are stored at unit length
    assert np.allclose(back[0].vector[vectorstore.SENTENCE_VECTORS], unit, atol=1e-6)
    assert store.retrieve([vectorstore.point_id(99, 0)]) == []


def test_scrolling_pages_through_every_point_once(store) -> None:
    fill(store, chunks=30)
    seen, offset = [], None
    while True:
        page, offset = store.scroll(limit=17, offset=offset, with_payload=False)
        seen += [p.id for p in page]
        if offset is None:
            break
    assert len(seen) == len(set(seen)) == store.count() == 150


def requests_for(rng: random.Random, limit: int) -> list[models.QueryRequest]:
    vector = [rng.gauss(0, 1) for _ in range(DIMENSION)]
    terms = sorted(rng.sample(range(45), 3))  # 40-44: terms no chunk has
    video_filters = [
        None,
        vectorstore.video_filter(rng.choice(VIDEOS)),
        models.Filter(must=[models.FieldCondition(key=vectorstore.VIDEO_ID_FIELD, match=models.MatchAny(any=[2, 4]))]),
    ]
    return [
        models.QueryRequest(query=query, using=using, limit=limit, filter=video_filter)
        for query, using in (
            ([vector], vectorstore.SENTENCE_VECTORS),
            (models.SparseVector(indices=terms, values=[1.0] * 3), vectorstore.SPARSE_VECTOR),
            (vector, vectorstore.DENSE_VECTOR),
        )
        for video_filter in video_filters
    ]


@pytest.mark.parametrize("limit", [10, 100, 1000])
def test_both_engines_rank_every_request_alike(tmp_path, limit) -> None:
    """MaxSim over phrases, BM25 with IDF and the chunk vector: the same ids in the same order, the same scores."""
    edge_store, client_store = open_store("edge", tmp_path), open_store("client", tmp_path)
    try:
        fill(edge_store)
        fill(client_store)
        rng = random.Random(limit)
        for _ in range(5):
            requests = requests_for(rng, limit)
            for request, a, b in zip(
                requests, edge_store.query_batch(requests), client_store.query_batch(requests), strict=True
            ):
                assert [p.score for p in a] == pytest.approx([p.score for p in b], abs=1e-5), request.using
                # Ties may come in either order; anything scored apart must be ranked alike.
                assert sorted(zip((round(p.score, 4) for p in a), (p.id for p in a), strict=True)) == sorted(
                    zip((round(p.score, 4) for p in b), (p.id for p in b), strict=True)
                )
                assert a, request
    finally:
        edge_store.close()
        client_store.close()
