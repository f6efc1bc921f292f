"""Hybrid search over the collection, and the sentence inside each chunk that a link should land on.

A chunk is ranked by its best-matching phrase (the "sentences" multivector, MAX_SIM) and by BM25 over its text
(the "bm25" sparse vector), fused client-side with weights; the link then goes to the phrase of the chunk that
best matches the question. Weights were chosen on PsTuts-VQA train questions and checked on dev
(benchmarks/retrieval_benchmark.py).
"""

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from qdrant_client import QdrantClient, models

from pstuts_pipeline import lexical, vectorstore

# Candidates asked of each ranking; the fused top-k comes from their union.
CANDIDATES = 100
# Weight of the BM25 ranking against the best-phrase ranking, both standardised over their candidates.
LEXICAL_WEIGHT = 0.8
# Inside a chunk: cosine of each phrase plus this much of the share of the question's terms it contains.
LINK_TERM_WEIGHT = 0.3
# "How do I", "what did he", "how to": the model matches them against narration that has no such words.
_QUESTION_LEAD = re.compile(
    r"^\s*(how|what|which|where|why|when|who)\b"
    r"(\s+(do|does|did|can|could|should|would|will|is|are|was|were|to|much|many|kind of|type of))*"
    r"(\s+(i|you|he|she|we|they|one|u))?\b\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SearchResult:
    """One retrieved chunk, with the moment to jump to."""

    video_id: int
    title: str
    url: str
    start: float
    stop: float
    link_time: float
    link: str
    score: float
    text: str
    chunk_index: int
    link_sent_id: int
    link_sentence: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def dense_query_text(question: str) -> str:
    """The question without its interrogative lead-in, which is what gets embedded."""
    stripped = _QUESTION_LEAD.sub("", question).strip().rstrip("?").strip()
    return stripped or question


def best_sentence(question_vector: np.ndarray, sentence_vectors: np.ndarray, sentence_texts: list[str], question: str) -> int:
    """The phrase of a chunk that best answers the question: dense similarity plus a share of shared terms."""
    dense = sentence_vectors @ question_vector
    share = np.asarray(lexical.term_share(question, sentence_texts))
    return int(np.argmax(dense + LINK_TERM_WEIGHT * share))


def fuse(rankings: Sequence[tuple[Sequence[models.ScoredPoint], float]]) -> list[tuple[Any, float]]:
    """Weighted sum of standardised scores; a candidate missing from a ranking gets that ranking's lowest score."""
    fused: dict[Any, float] = {}
    for points, _ in rankings:
        for point in points:
            fused.setdefault(point.id, 0.0)
    for points, weight in rankings:
        if not points:
            continue
        scores = {p.id: p.score for p in points}
        values = np.fromiter(scores.values(), dtype=np.float64)
        mean, spread, floor = values.mean(), values.std() or 1.0, values.min()
        for pid in fused:
            fused[pid] += weight * (scores.get(pid, floor) - mean) / spread
    return sorted(fused.items(), key=lambda item: item[1], reverse=True)


def _link(url: str, seconds: float) -> str:
    return f"{url.split('#')[0]}#t={seconds:.1f}"


def to_result(record: models.Record, score: float, question_vector: np.ndarray, question: str) -> SearchResult:
    """Pick the link sentence inside a retrieved chunk and shape the result."""
    payload = record.payload or {}
    meta = payload["metadata"]
    text = payload["page_content"]
    spans = meta["phrase_char_spans"]
    spoken = [i for i, (a, b) in enumerate(spans) if b > a]
    vectors = np.asarray((record.vector or {}).get(vectorstore.SENTENCE_VECTORS) or [], dtype=np.float32)
    if spoken and len(vectors) == len(spoken):
        choice = spoken[best_sentence(question_vector, vectors, [text[slice(*spans[i])] for i in spoken], question)]
    else:
        choice = spoken[0] if spoken else 0
    link_time = float(meta["speech_start_stop_times"][choice][0])
    a, b = spans[choice]
    return SearchResult(
        video_id=meta["video_id"],
        title=meta["title"],
        url=meta["url"],
        start=meta["start"],
        stop=meta["stop"],
        link_time=link_time,
        link=_link(meta["url"], link_time),
        score=float(score),
        text=text,
        chunk_index=meta["chunk_index"],
        link_sent_id=meta["sent_ids"][choice],
        link_sentence=text[a:b],
    )


def check_model(client: QdrantClient, collection: str, model_id: str) -> None:
    """Refuse to query a collection with vectors of another model than the one that built it."""
    stored_model = vectorstore.collection_model(client, collection)
    if stored_model is not None and stored_model != model_id:
        raise vectorstore.ModelMismatchError(
            f"collection {collection!r} was built with {stored_model}; this query would be embedded with {model_id}"
        )


def _requests(question: str, vector: list[float], limit: int) -> list[models.QueryRequest]:
    requests = [models.QueryRequest(query=[vector], using=vectorstore.SENTENCE_VECTORS, limit=limit)]
    indices, values = lexical.query_vector(question)
    if indices:
        sparse = models.SparseVector(indices=indices, values=values)
        requests.append(models.QueryRequest(query=sparse, using=vectorstore.SPARSE_VECTOR, limit=limit))
    return requests


def search_many(
    client: QdrantClient,
    collection: str,
    embeddings: Embeddings,
    model_id: str,
    questions: Sequence[str],
    top_k: int = 5,
    query_filter: models.Filter | None = None,
) -> list[list[SearchResult]]:
    """Answer many questions with one embedding batch, one batch of Qdrant queries and one payload fetch."""
    check_model(client, collection, model_id)
    if not questions:
        return []
    vectors = embeddings.embed_documents([dense_query_text(q) for q in questions])
    limit = max(CANDIDATES, top_k)
    requests, owners = [], []
    for number, (question, vector) in enumerate(zip(questions, vectors, strict=True)):
        for request in _requests(question, list(vector), limit):
            request.filter = query_filter
            requests.append(request)
            owners.append(number)
    responses = client.query_batch_points(collection, requests=requests)
    rankings: list[list[tuple[Sequence[models.ScoredPoint], float]]] = [[] for _ in questions]
    for number, request, response in zip(owners, requests, responses, strict=True):
        weight = 1.0 if request.using == vectorstore.SENTENCE_VECTORS else LEXICAL_WEIGHT
        rankings[number].append((response.points, weight))
    chosen = [fuse(r)[:top_k] for r in rankings]
    ids = list(dict.fromkeys(pid for hits in chosen for pid, _ in hits))
    records = {
        r.id: r
        for r in client.retrieve(collection, ids=ids, with_payload=True, with_vectors=[vectorstore.SENTENCE_VECTORS])
    }
    return [
        [to_result(records[pid], score, np.asarray(vector, dtype=np.float32), question) for pid, score in hits]
        for question, vector, hits in zip(questions, vectors, chosen, strict=True)
    ]


def search(
    client: QdrantClient,
    collection: str,
    embeddings: Embeddings,
    model_id: str,
    question: str,
    top_k: int = 5,
) -> list[SearchResult]:
    """The top-k distinct chunks for one question, each linked to its best phrase."""
    return search_many(client, collection, embeddings, model_id, [question], top_k)[0]
