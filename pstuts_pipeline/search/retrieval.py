"""Hybrid search over the collection, and the sentence inside each chunk that a link should land on.

A chunk is ranked by its best-matching phrase (the "sentences" multivector, MAX_SIM) and by BM25 over its text
(the "bm25" sparse vector), fused client-side with weights; the link then goes to the phrase of the chunk that
best matches the question. Weights were chosen on PsTuts-VQA train questions and checked on dev
(benchmarks/retrieval_benchmark.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from qdrant_client import models

from pstuts_pipeline import settings as env_settings
from pstuts_pipeline.search import confidence, lexical, reranking, temporal, vectorstore
from pstuts_pipeline.search.store import Store
from pstuts_pipeline.settings.base import default

# Candidates asked of each ranking; the fused top-k comes from their union.
CANDIDATES = 100
# Weight of the BM25 ranking against the best-phrase ranking, both standardised over their candidates.
LEXICAL_WEIGHT = 0.8
# Weight of the whole-chunk dense vector's ranking; 0 leaves it out (measured on dev, docs/retrieval-experiments.md).
CHUNK_WEIGHT: float = default(env_settings.SearchSettings, "chunk_vector_weight")
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
class SearchSettings:
    """First-stage knobs beyond the fixed fusion: the whole-chunk vector's weight and the temporal signal."""

    chunk_weight: float = CHUNK_WEIGHT
    temporal: temporal.TemporalSettings = temporal.TemporalSettings()

    @classmethod
    def from_env(cls) -> SearchSettings:
        """PSTUTS_CHUNK_VECTOR_WEIGHT, PSTUTS_TEMPORAL_WEIGHT, PSTUTS_TEMPORAL_SIGMA_S, PSTUTS_TEMPORAL_RELINK."""
        tuning = env_settings.load(env_settings.SearchSettings)
        return cls(
            chunk_weight=tuning.chunk_vector_weight,
            temporal=temporal.TemporalSettings(tuning.temporal_weight, tuning.temporal_sigma_s, tuning.temporal_relink),
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
    source_file: str = ""
    # Each phrase of the chunk as (begin seconds, text), so an answer can quote a phrase and cite its own moment.
    phrases: list[tuple[float, str]] = field(default_factory=list)
    # How likely this chunk holds the answer (0-1, `search.confidence`), and the first-stage signals it comes from.
    confidence: float = 0.0
    signals: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def dense_query_text(question: str) -> str:
    """The question without its interrogative lead-in, which is what gets embedded."""
    stripped = _QUESTION_LEAD.sub("", question).strip().rstrip("?").strip()
    return stripped or question


def phrase_signals(
    question_vector: np.ndarray, sentence_vectors: np.ndarray, sentence_texts: list[str], question: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each phrase's cosine to the question and the share of the question's terms it contains."""
    return sentence_vectors @ question_vector, np.asarray(lexical.term_share(question, sentence_texts))


def sentence_scores(
    question_vector: np.ndarray, sentence_vectors: np.ndarray, sentence_texts: list[str], question: str
) -> np.ndarray:
    """How well each phrase of a chunk answers the question: dense similarity plus a share of shared terms."""
    dense, share = phrase_signals(question_vector, sentence_vectors, sentence_texts, question)
    return dense + LINK_TERM_WEIGHT * share


def best_sentence(
    question_vector: np.ndarray, sentence_vectors: np.ndarray, sentence_texts: list[str], question: str
) -> int:
    """The phrase of a chunk that best answers the question."""
    return int(np.argmax(sentence_scores(question_vector, sentence_vectors, sentence_texts, question)))


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


def moment_link(url: str, seconds: float) -> str:
    """The url at the moment (a media fragment); no url, no link: `#t=1.0` alone leads nowhere."""
    return f"{url.split('#')[0]}#t={seconds:.1f}" if url else ""


@dataclass
class Candidate:
    """A first-stage candidate chunk: its record, fused score, and its spoken phrases scored for the link."""

    record: models.Record
    score: float
    spoken: list[int]  # positions of the phrases with words, in the chunk's phrase lists
    texts: list[str]
    link_scores: np.ndarray  # one per spoken phrase; empty when the record has no phrase vectors
    choice: int = 0  # the linked phrase, a position in `spoken`
    link_from: Candidate | None = None  # a neighbour whose phrase the link moved to (temporal relink)
    # The linked phrase's cosine and term share, which `confidence` reads (fixed when the candidate is made).
    cosine: float = 0.0
    term_share: float = 0.0


def candidate(record: models.Record, score: float, question_vector: np.ndarray, question: str) -> Candidate:
    """Score a retrieved chunk's phrases for the link and pick the best one."""
    meta = (record.payload or {})["metadata"]
    text = (record.payload or {})["page_content"]
    spans = meta["phrase_char_spans"]
    spoken = [i for i, (a, b) in enumerate(spans) if b > a] or [0]
    texts = [text[slice(*spans[i])] for i in spoken]
    named = record.vector if isinstance(record.vector, dict) else {}
    vectors = np.asarray(named.get(vectorstore.SENTENCE_VECTORS) or [], dtype=np.float32)
    if len(vectors) != len(spoken):
        return Candidate(record, score, spoken, texts, np.zeros(0), 0)
    dense, share = phrase_signals(question_vector, vectors, texts, question)
    scores = dense + LINK_TERM_WEIGHT * share
    best = int(np.argmax(scores))
    return Candidate(
        record, score, spoken, texts, scores, best, cosine=float(dense[best]), term_share=float(share[best])
    )


def to_result(found: Candidate, rank: int = 1) -> SearchResult:
    """Shape a candidate as a result linked to its chosen phrase, with its confidence at this rank."""
    payload = found.record.payload or {}
    meta = payload["metadata"]
    text = payload["page_content"]
    linked = found.link_from or found
    link_meta, link_text = (linked.record.payload or {})["metadata"], (linked.record.payload or {})["page_content"]
    choice = linked.spoken[linked.choice]
    link_time = float(link_meta["speech_start_stop_times"][choice][0])
    a, b = link_meta["phrase_char_spans"][choice]
    signals = confidence.signals(found.cosine, found.term_share, rank)
    return SearchResult(
        video_id=meta["video_id"],
        title=meta["title"],
        url=meta["url"],
        start=meta["start"],
        stop=meta["stop"],
        link_time=link_time,
        link=moment_link(meta["url"], link_time),
        score=float(found.score),
        text=text,
        chunk_index=meta["chunk_index"],
        link_sent_id=link_meta["sent_ids"][choice],
        link_sentence=link_text[a:b],
        source_file=meta.get("source_file", ""),
        phrases=[
            (float(t[0]), text[a:b]) for t, (a, b) in zip(meta["speech_start_stop_times"], meta["phrase_char_spans"])
        ],
        confidence=confidence.probability(signals) if len(found.link_scores) else 0.0,
        signals=signals,
    )


def rerank(
    reranker: reranking.Reranker, questions: Sequence[str], pools: list[list[Candidate]], top_k: int
) -> list[list[Candidate]]:
    """Rescore each question's candidates with the cross-encoder; keep the top-k by the combined score.

    A chunk's cross-encoder score is that of its best phrase among its top few by the link score; the link stays on
    the link score's phrase unless the settings say `relink`. Each question's pairs are scored on their own: int8
    quantises each batch with its own scale, so pairs batched across questions would make one question's ranking
    depend on what else was asked.
    """
    settings = reranker.settings
    reranked: list[list[Candidate]] = []
    for question, pool in zip(questions, pools, strict=True):
        if not pool:
            reranked.append([])
            continue
        query = dense_query_text(question)
        pairs, owners = [], []
        for slot, found in enumerate(pool):
            for position in reranking.top_phrases(found.link_scores, settings.phrases) or [found.choice]:
                pairs.append((query, found.texts[position]))
                owners.append((slot, position))
        best: dict[int, tuple[float, int]] = {}
        for (slot, position), value in zip(owners, reranker.score(pairs), strict=True):
            if slot not in best or value > best[slot][0]:
                best[slot] = (float(value), position)
        cross = reranking.standardised(np.array([best[slot][0] for slot in range(len(pool))]))
        for slot, found in enumerate(pool):
            found.score += settings.weight * float(cross[slot])
            if settings.relink:
                found.choice = best[slot][1]
        reranked.append(sorted(pool, key=lambda c: c.score, reverse=True)[:top_k])
    return reranked


def check_model(store: Store, model_id: str) -> None:
    """Refuse to query a collection with vectors of another model than the one that built it."""
    stored_model = store.model()
    if stored_model is not None and stored_model != model_id:
        raise vectorstore.ModelMismatchError(
            f"collection {store.collection!r} was built with {stored_model}; this query would be embedded with "
            f"{model_id}"
        )


def _requests(question: str, vector: list[float], limit: int, chunk_weight: float) -> dict[str, models.QueryRequest]:
    """A question's first-stage requests, by the vector each searches."""
    queries: dict[str, models.QueryInterface] = {vectorstore.SENTENCE_VECTORS: [vector]}
    indices, values = lexical.query_vector(question)
    if indices:
        queries[vectorstore.SPARSE_VECTOR] = models.SparseVector(indices=indices, values=values)
    if chunk_weight:
        queries[vectorstore.DENSE_VECTOR] = vector
    return {using: models.QueryRequest(query=query, using=using, limit=limit) for using, query in queries.items()}


# A question's rankings by the vector that made each ("sentences", "bm25", "" for the whole chunk), with weights.
Rankings = dict[str, tuple[Sequence[models.ScoredPoint], float]]


def first_stage(
    store: Store,
    questions: Sequence[str],
    vectors: Sequence[Sequence[float]],
    limit: int,
    query_filter: models.Filter | None = None,
    settings: SearchSettings = SearchSettings(),
) -> list[Rankings]:
    """Each question's weighted rankings (best phrase, BM25, and the whole chunk if weighted), in one Qdrant batch."""
    weights = {vectorstore.SENTENCE_VECTORS: 1.0, vectorstore.SPARSE_VECTOR: LEXICAL_WEIGHT}
    weights[vectorstore.DENSE_VECTOR] = settings.chunk_weight
    requests: list[models.QueryRequest] = []
    owners: list[tuple[int, str]] = []
    for number, (question, vector) in enumerate(zip(questions, vectors, strict=True)):
        for using, request in _requests(question, list(vector), limit, settings.chunk_weight).items():
            request.filter = query_filter
            requests.append(request)
            owners.append((number, using))
    answers = store.query_batch(requests)
    rankings: list[Rankings] = [{} for _ in questions]
    for (number, using), points in zip(owners, answers, strict=True):
        rankings[number][using] = (points, weights[using])
    return rankings


def places_of(store: Store, ids: Sequence[Any]) -> dict[Any, temporal.Place]:
    """Each point's video and time span, read from its payload alone."""
    fields = [vectorstore.VIDEO_ID_FIELD, "metadata.start", "metadata.stop"]
    records = store.retrieve(list(ids), with_payload=fields, with_vectors=False)
    return {record.id: place_of(record) for record in records}


def place_of(record: Any) -> temporal.Place:  # noqa: ANN401 - a Qdrant Record or ScoredPoint
    """A point's video and time span, from its payload."""
    meta = (record.payload or {})["metadata"]
    return temporal.Place(meta["video_id"], float(meta["start"]), float(meta["stop"]))


def relink_to_neighbours(
    pool: list[Candidate], neighbours: dict[Any, list[Candidate]], settings: temporal.TemporalSettings
) -> None:
    """Move a chunk's link to a near neighbour's best phrase when that phrase, discounted by the kernel, scores higher.

    `neighbours` maps a pool chunk's point id to its candidate neighbours. The chunk keeps its rank and span; only
    where the link lands changes.
    """
    for found in pool:
        own = float(found.link_scores.max()) if len(found.link_scores) else -np.inf
        middle = place_of(found.record).midpoint
        for other in neighbours.get(found.record.id, []):
            if not len(other.link_scores):
                continue
            weight = float(temporal.kernel(middle - place_of(other.record).midpoint, settings.sigma_s))
            if weight * float(other.link_scores.max()) > own:
                own, found.link_from = weight * float(other.link_scores.max()), other


def second_stage(
    store: Store,
    questions: Sequence[str],
    vectors: Sequence[Sequence[float]],
    rankings: Sequence[Rankings],
    top_k: int,
    settings: SearchSettings = SearchSettings(),
    reranker: reranking.Reranker | None = None,
) -> list[list[SearchResult]]:
    """Fuse each question's rankings, add the temporal signal, fetch the best chunks and link each to a phrase."""
    depth = max(reranker.settings.depth, top_k) if reranker else top_k
    fused = [dict(fuse(list(r.values()))) for r in rankings]
    signal = settings.temporal
    places: dict[Any, temporal.Place] = {}
    if signal.enabled:
        places = places_of(store, list(dict.fromkeys(pid for scores in fused for pid in scores)))
        fused = [temporal.smoothed(scores, places, signal) for scores in fused]
    chosen = [sorted(scores.items(), key=lambda item: item[1], reverse=True)[:depth] for scores in fused]
    near: list[dict[Any, list[Any]]] = [{} for _ in questions]
    if signal.relink:
        for number, hits in enumerate(chosen):
            for pid, _ in hits:
                here = places[pid]
                near[number][pid] = [
                    other
                    for other in fused[number]
                    if other != pid
                    and places[other].video_id == here.video_id
                    and abs(places[other].midpoint - here.midpoint) <= 2 * signal.sigma_s
                ]
    wanted = [pid for hits in chosen for pid, _ in hits] + [o for n in near for others in n.values() for o in others]
    records = {
        r.id: r
        for r in store.retrieve(
            list(dict.fromkeys(wanted)), with_payload=True, with_vectors=[vectorstore.SENTENCE_VECTORS]
        )
    }
    pools = []
    for number, (question, vector, hits) in enumerate(zip(questions, vectors, chosen, strict=True)):
        query = np.asarray(vector, dtype=np.float32)
        pool = [candidate(records[pid], score, query, question) for pid, score in hits]
        if signal.relink:
            by_id = {found.record.id: found for found in pool}
            others = {o for pid in near[number] for o in near[number][pid]}
            scored = {o: by_id.get(o) or candidate(records[o], fused[number][o], query, question) for o in others}
            relink_to_neighbours(pool, {pid: [scored[o] for o in near[number][pid]] for pid in by_id}, signal)
        pools.append(pool)
    if reranker:
        pools = rerank(reranker, questions, pools, top_k)
    return [[to_result(found, rank) for rank, found in enumerate(pool, 1)] for pool in pools]


def search_many(
    store: Store,
    embeddings: Embeddings,
    model_id: str,
    questions: Sequence[str],
    top_k: int = 5,
    query_filter: models.Filter | None = None,
    reranker: reranking.Reranker | None = None,
    settings: SearchSettings | None = None,
) -> list[list[SearchResult]]:
    """Answer many questions with one embedding batch, one batch of Qdrant queries and one payload fetch.

    With a reranker, the first stage's top `reranker.settings.depth` candidates of each question are rescored.
    Settings not given are read from the environment (`SearchSettings.from_env`).
    """
    check_model(store, model_id)
    if not questions:
        return []
    settings = settings or SearchSettings.from_env()
    vectors = embeddings.embed_documents([dense_query_text(q) for q in questions])
    rankings = first_stage(store, questions, vectors, max(CANDIDATES, top_k), query_filter, settings)
    return second_stage(store, questions, vectors, rankings, top_k, settings, reranker)


def search(
    store: Store,
    embeddings: Embeddings,
    model_id: str,
    question: str,
    top_k: int = 5,
    reranker: reranking.Reranker | None = None,
) -> list[SearchResult]:
    """The top-k distinct chunks for one question, each linked to its best phrase."""
    return search_many(store, embeddings, model_id, [question], top_k, reranker=reranker)[0]
