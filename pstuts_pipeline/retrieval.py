"""Hybrid search over the collection, and the sentence inside each chunk that a link should land on."""

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from qdrant_client import QdrantClient, models

from pstuts_pipeline import lexical, vectorstore

PREFETCH_LIMIT = 50


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


def best_sentence(question_vector: np.ndarray, sentence_vectors: np.ndarray, sentence_texts: list[str], question: str) -> int:
    """The phrase of a chunk that best answers the question: dense similarity plus a share of shared terms."""
    dense = sentence_vectors @ question_vector
    terms = set(lexical.tokenize(question))
    overlap = np.array([len(terms & set(lexical.tokenize(t))) / (len(terms) or 1) for t in sentence_texts])
    return int(np.argmax(dense + 0.5 * overlap))


def _link(url: str, seconds: float) -> str:
    return f"{url.split('#')[0]}#t={seconds:.1f}"


def to_result(point: models.ScoredPoint, question_vector: np.ndarray, question: str) -> SearchResult:
    """Pick the link sentence inside a retrieved chunk and shape the result."""
    payload = point.payload or {}
    meta = payload["metadata"]
    text = payload["page_content"]
    spoken = [i for i, (a, b) in enumerate(meta["phrase_char_spans"]) if b > a]
    vectors = np.asarray((point.vector or {}).get(vectorstore.SENTENCE_VECTORS) or [], dtype=np.float32)
    texts = [text[slice(*meta["phrase_char_spans"][i])] for i in spoken]
    choice = spoken[best_sentence(question_vector, vectors, texts, question)] if len(vectors) == len(spoken) else 0
    link_time = float(meta["speech_start_stop_times"][choice][0])
    a, b = meta["phrase_char_spans"][choice]
    return SearchResult(
        video_id=meta["video_id"],
        title=meta["title"],
        url=meta["url"],
        start=meta["start"],
        stop=meta["stop"],
        link_time=link_time,
        link=_link(meta["url"], link_time),
        score=float(point.score),
        text=text,
        chunk_index=meta["chunk_index"],
        link_sent_id=meta["sent_ids"][choice],
        link_sentence=text[a:b],
    )


def search(
    client: QdrantClient,
    collection: str,
    embeddings: Embeddings,
    model_id: str,
    question: str,
    top_k: int = 5,
) -> list[SearchResult]:
    """Fuse three rankings (whole chunk, best phrase, BM25 terms) and link each hit to its best phrase."""
    stored_model = vectorstore.collection_model(client, collection)
    if stored_model is not None and stored_model != model_id:
        raise vectorstore.ModelMismatchError(
            f"collection {collection!r} was built with {stored_model}; this query would be embedded with {model_id}"
        )
    question_vector = np.asarray(embeddings.embed_query(question), dtype=np.float32)
    indices, values = lexical.query_vector(question)
    limit = max(PREFETCH_LIMIT, top_k)
    prefetch = [
        models.Prefetch(query=question_vector.tolist(), using=vectorstore.DENSE_VECTOR, limit=limit),
        models.Prefetch(query=[question_vector.tolist()], using=vectorstore.SENTENCE_VECTORS, limit=limit),
    ]
    if indices:
        prefetch.append(
            models.Prefetch(
                query=models.SparseVector(indices=indices, values=values), using=vectorstore.SPARSE_VECTOR, limit=limit
            )
        )
    response = client.query_points(
        collection,
        prefetch=prefetch,
        query=models.FusionQuery(fusion=models.Fusion.RRF),
        limit=top_k,
        with_payload=True,
        with_vectors=[vectorstore.SENTENCE_VECTORS],
    )
    return [to_result(point, question_vector, question) for point in response.points]
