"""The first stage in process for a local-mode store: the rankings Qdrant's query API gives, scored with numpy.

Local mode scores every point in Python on each query (a MAX_SIM over each chunk's phrase matrix, a sparse merge
per chunk for BM25): some 20 ms a question on train + dev. Held as one phrase matrix and BM25 postings, the same
rankings take a fraction of a millisecond. Reading every vector back costs about as much as four local-mode
queries, so a client builds the index only once it has been asked that many questions, and builds it again after
a write through `vectorstore`. A Qdrant server scores with its own indexes and is always asked directly.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from pstuts_pipeline.search import vectorstore

# Questions a client answers through Qdrant before it reads the collection into an index (that read costs about
# four local-mode queries): a one-off `pstuts search` never pays for it.
BUILD_AFTER_QUESTIONS = 4
_SCROLL_PAGE = 1024


@dataclass(frozen=True)
class LocalIndex:
    """One collection's phrase vectors and BM25 terms, laid out for whole-collection scoring."""

    ids: list[Any]
    video_ids: np.ndarray
    phrases: np.ndarray  # every chunk's phrase vectors at unit length, chunk after chunk
    phrase_starts: np.ndarray  # the first row in `phrases` of each chunk that has phrases
    phrase_chunks: np.ndarray  # those chunks (positions in `ids`)
    postings: dict[int, tuple[np.ndarray, np.ndarray]]  # term -> (chunk positions, BM25 weights)
    sparse_documents: int  # chunks with a BM25 vector: the corpus Qdrant's IDF counts

    @classmethod
    def read(cls, client: QdrantClient, collection: str) -> LocalIndex:
        """Every point's phrase vectors, BM25 terms and video id, read through the client's public API."""
        ids: list[Any] = []
        video_ids: list[int] = []
        matrices: list[np.ndarray] = []
        owners: list[int] = []
        terms: dict[int, tuple[list[int], list[float]]] = {}
        sparse_documents = 0
        offset = None
        while True:
            points, offset = client.scroll(
                collection,
                limit=_SCROLL_PAGE,
                offset=offset,
                with_payload=[vectorstore.VIDEO_ID_FIELD],
                with_vectors=[vectorstore.SENTENCE_VECTORS, vectorstore.SPARSE_VECTOR],
            )
            for point in points:
                position = len(ids)
                ids.append(point.id)
                video_ids.append(int((point.payload or {})["metadata"]["video_id"]))
                vectors = point.vector if isinstance(point.vector, dict) else {}
                if phrases := vectors.get(vectorstore.SENTENCE_VECTORS):
                    matrices.append(np.asarray(phrases, dtype=np.float32))
                    owners.extend([position] * len(phrases))
                if (sparse := vectors.get(vectorstore.SPARSE_VECTOR)) is not None:
                    sparse_documents += 1
                    for term, weight in zip(sparse.indices, sparse.values, strict=True):
                        chunks, weights = terms.setdefault(term, ([], []))
                        chunks.append(position)
                        weights.append(weight)
            if offset is None:
                break
        phrases = np.concatenate(matrices) if matrices else np.zeros((0, 0), dtype=np.float32)
        norms = np.linalg.norm(phrases, axis=1, keepdims=True) if len(phrases) else np.ones((0, 1), np.float32)
        owner = np.asarray(owners, dtype=np.int64)
        starts = np.flatnonzero(np.diff(owner, prepend=-1)) if len(owner) else np.zeros(0, dtype=np.int64)
        return cls(
            ids=ids,
            video_ids=np.asarray(video_ids, dtype=np.int64),
            phrases=phrases / np.where(norms > 0, norms, 1.0),
            phrase_starts=starts,
            phrase_chunks=owner[starts],
            postings={
                t: (np.asarray(c, dtype=np.int64), np.asarray(w, dtype=np.float64)) for t, (c, w) in terms.items()
            },
            sparse_documents=sparse_documents,
        )

    def max_sim(self, vector: Sequence[float]) -> np.ndarray:
        """Each chunk's best phrase cosine with the question (Qdrant's MAX_SIM of one query vector); -inf: none."""
        query = np.asarray(vector, dtype=np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        scores = np.full(len(self.ids), -np.inf, dtype=np.float64)
        if len(self.phrases):
            scores[self.phrase_chunks] = np.maximum.reduceat(self.phrases @ query, self.phrase_starts)
        return scores

    def bm25(self, indices: Sequence[int], values: Sequence[float]) -> np.ndarray:
        """Each chunk's BM25 score with Qdrant's IDF (`Modifier.IDF`); -inf for a chunk sharing no term."""
        scores = np.zeros(len(self.ids), dtype=np.float64)
        shared = np.zeros(len(self.ids), dtype=bool)
        documents = self.sparse_documents
        for term, value in zip(indices, values, strict=True):
            if term not in self.postings:
                continue
            chunks, weights = self.postings[term]
            idf = np.log((documents - len(chunks) + 0.5) / (len(chunks) + 0.5) + 1)
            np.add.at(scores, chunks, value * idf * weights)
            shared[chunks] = True
        return np.where(shared, scores.astype(np.float32), -np.inf)

    def allowed(self, query_filter: models.Filter | None) -> np.ndarray | None:
        """The chunks a filter admits, for a filter on the video id alone; None for any other filter."""
        if query_filter is None:
            return np.ones(len(self.ids), dtype=bool)
        if query_filter.should or query_filter.must_not or query_filter.min_should:
            return None
        must = query_filter.must if isinstance(query_filter.must, list) else [query_filter.must]
        admitted = np.ones(len(self.ids), dtype=bool)
        for condition in must:
            if not isinstance(condition, models.FieldCondition) or condition.key != vectorstore.VIDEO_ID_FIELD:
                return None
            if isinstance(condition.match, models.MatchValue):
                admitted &= self.video_ids == condition.match.value
            elif isinstance(condition.match, models.MatchAny):
                admitted &= np.isin(self.video_ids, list(condition.match.any))
            else:
                return None
        return admitted

    def query(self, request: models.QueryRequest) -> list[models.ScoredPoint] | None:
        """What Qdrant answers to one of search's requests; None for a request of another kind."""
        admitted = self.allowed(request.filter)
        if admitted is None or request.offset or request.score_threshold is not None or request.prefetch:
            return None
        if request.using == vectorstore.SENTENCE_VECTORS and isinstance(request.query, list):
            if len(request.query) != 1:
                return None
            scores = self.max_sim(request.query[0])
        elif request.using == vectorstore.SPARSE_VECTOR and isinstance(request.query, models.SparseVector):
            scores = self.bm25(request.query.indices, request.query.values)
        else:
            return None
        scores = np.where(admitted, scores, -np.inf)
        limit = request.limit or 10
        top = np.argsort(-scores, kind="stable")[:limit]
        return [
            models.ScoredPoint.model_construct(id=self.ids[i], version=0, score=float(scores[i]))
            for i in top
            if scores[i] > -np.inf
        ]


@dataclass
class _Entry:
    asked: int = 0
    writes: int = -1
    index: LocalIndex | None = None


_entries: weakref.WeakKeyDictionary[QdrantClient, dict[str, _Entry]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def query_batch(
    client: QdrantClient, collection: str, requests: Sequence[models.QueryRequest], questions: int
) -> list[list[models.ScoredPoint]] | None:
    """The answers to search's requests from this client's index; None where Qdrant should answer them itself.

    None for a server, for a client that has not yet asked `BUILD_AFTER_QUESTIONS` questions, and for a request
    the index does not answer (another vector, another filter).
    """
    if vectorstore.is_server(client):
        return None
    with _lock:
        entry = _entries.setdefault(client, {}).setdefault(collection, _Entry())
        entry.asked += questions
        writes = vectorstore.writes_through(client)
        if entry.index is None or entry.writes != writes:
            if entry.asked < BUILD_AFTER_QUESTIONS:
                return None
            entry.index, entry.writes = LocalIndex.read(client, collection), writes
        index = entry.index
    answers = [index.query(request) for request in requests]
    return None if any(answer is None for answer in answers) else answers  # type: ignore[return-value]
