"""The in-process first stage against qdrant-client's local mode itself, on the collection schema search uses."""

import random

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from pstuts_pipeline.search import local_index, vectorstore

DIMENSION = 8
VIDEOS = (1, 2, 3, 4, 5)


def random_point(rng: random.Random, number: int, video_id: int) -> models.PointStruct:
    """A chunk with 1-6 phrase vectors and a few BM25 terms of a small vocabulary, so queries share terms."""
    phrases = [[rng.gauss(0, 1) for _ in range(DIMENSION)] for _ in range(rng.randint(1, 6))]
    terms = sorted(rng.sample(range(40), rng.randint(1, 8)))
    return models.PointStruct(
        id=number,
        vector={
            vectorstore.DENSE_VECTOR: [rng.gauss(0, 1) for _ in range(DIMENSION)],
            vectorstore.SENTENCE_VECTORS: phrases,
            vectorstore.SPARSE_VECTOR: models.SparseVector(indices=terms, values=[rng.random() for _ in terms]),
        },
        payload={"page_content": f"chunk {number}", "metadata": {"video_id": video_id, "chunk_index": number}},
    )


@pytest.fixture
def client(tmp_path):
    store = QdrantClient(path=str(tmp_path / "qdrant"))
    vectorstore.ensure_collection(store, "c", DIMENSION, "test-model")
    vectorstore.sync_local_writes_lazily(store, "c")
    rng = random.Random(0)
    store.upsert("c", points=[random_point(rng, n, VIDEOS[n % len(VIDEOS)]) for n in range(300)], wait=True)
    yield store
    store.close()


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
        )
        for video_filter in video_filters
    ]


@pytest.mark.parametrize("limit", [10, 100, 1000])
def test_the_index_ranks_every_request_as_local_mode_does(client, limit):
    index = local_index.LocalIndex.read(client, "c")
    rng = random.Random(limit)
    for _ in range(10):
        requests = requests_for(rng, limit)
        expected = client.query_batch_points("c", requests=requests)
        for request, response in zip(requests, expected, strict=True):
            found = index.query(request)
            assert [p.id for p in found] == [p.id for p in response.points], request
            assert np.allclose([p.score for p in found], [p.score for p in response.points], rtol=1e-5, atol=1e-6)


def test_requests_for_other_vectors_or_filters_are_left_to_qdrant(client):
    index = local_index.LocalIndex.read(client, "c")
    dense = models.QueryRequest(query=[0.1] * DIMENSION, using=vectorstore.DENSE_VECTOR, limit=5)
    by_title = models.QueryRequest(
        query=[[0.1] * DIMENSION],
        using=vectorstore.SENTENCE_VECTORS,
        limit=5,
        filter=models.Filter(must=[models.FieldCondition(key="metadata.title", match=models.MatchValue(value="x"))]),
    )
    excluding = models.QueryRequest(
        query=[[0.1] * DIMENSION], using=vectorstore.SENTENCE_VECTORS, limit=5, filter=models.Filter(must_not=[])
    )
    assert [index.query(r) for r in (dense, by_title, excluding)] == [None, None, None]
    for _ in range(local_index.BUILD_AFTER_QUESTIONS):
        assert local_index.query_batch(client, "c", [dense], 1) is None


def test_a_client_builds_its_index_after_a_few_questions_and_again_after_each_write(client):
    rng = random.Random(5)
    requests = requests_for(rng, 5)[:1]
    asked = [local_index.query_batch(client, "c", requests, 1) for _ in range(local_index.BUILD_AFTER_QUESTIONS)]
    assert asked[:-1] == [None] * (local_index.BUILD_AFTER_QUESTIONS - 1) and asked[-1] is not None
    # A chunk whose phrase is the question itself: written through vectorstore, it ranks first at once.
    question = requests[0].query[0]
    planted = random_point(rng, 1000, 9)
    planted.vector[vectorstore.SENTENCE_VECTORS] = [question]
    vectorstore.replace_video_points(client, "c", 9, [planted], existing=set())
    assert local_index.query_batch(client, "c", requests, 1)[0][0].id == 1000
    vectorstore.delete_video(client, "c", 9)
    assert local_index.query_batch(client, "c", requests, 1)[0][0].id != 1000


def test_a_server_is_always_asked_directly():
    server = QdrantClient(url="http://127.0.0.1:9", check_compatibility=False)
    request = models.QueryRequest(query=[[0.1] * DIMENSION], using=vectorstore.SENTENCE_VECTORS, limit=5)
    assert local_index.query_batch(server, "c", [request], 100) is None
