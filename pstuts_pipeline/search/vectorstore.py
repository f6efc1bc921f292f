"""The collection: its schema, point layout (langchain-qdrant's payload), idempotent per-video writes, on any `Store`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.search import lexical
from pstuts_pipeline.search.store import Store

DENSE_VECTOR = ""  # the default (unnamed) vector, so QdrantVectorStore(client, collection, embeddings) works
SENTENCE_VECTORS = "sentences"
SPARSE_VECTOR = "bm25"
VIDEO_ID_FIELD = "metadata.video_id"  # an integer payload field: an integer index serves exact matches
POINT_NAMESPACE = uuid.UUID("5b1f6c1e-3f5c-4a53-9a2f-6f0d8f1c2a77")
PAYLOAD_FIELDS = (
    "video_id",
    "title",
    "desc",
    "url",
    "chunk_index",
    "start",
    "stop",
    "sent_ids",
    "speech_start_stop_times",
)


class ModelMismatchError(RuntimeError):
    """The collection was built with another embedding model than the one asked to query or extend it."""


@dataclass(frozen=True)
class VideoInfo:
    """The video-level fields every chunk of a video carries."""

    video_id: int
    title: str
    desc: str
    url: str
    source_hash: str
    # The name of the file the video was read from: what a result without a url names instead of a link.
    source_file: str = ""


def point_id(video_id: int, chunk_index: int) -> str:
    """Deterministic, so re-ingesting a video overwrites its points instead of duplicating them."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{video_id}:{chunk_index}"))


def video_filter(video_id: int) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key=VIDEO_ID_FIELD, match=models.MatchValue(value=video_id))])


def ensure_collection(store: Store, dimension: int, model_id: str) -> None:
    """Create the collection once, even with writers racing; refuse to mix vectors of different models in it."""
    store.create(
        {
            DENSE_VECTOR: models.VectorParams(size=dimension, distance=models.Distance.COSINE),
            SENTENCE_VECTORS: models.VectorParams(
                size=dimension,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            ),
        },
        {SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        model_id,
        # Every write filters on the video id: an integer index serves its exact matches.
        VIDEO_ID_FIELD,
    )
    stored = store.model()
    if stored is not None and stored != model_id:
        raise ModelMismatchError(
            f"collection {store.collection!r} was built with {stored}, not {model_id}: re-ingest into a new "
            "collection (PSTUTS_COLLECTION) or delete it first"
        )


def chunk_payload(chunk: TimedChunk, video: VideoInfo, fingerprint: str) -> dict[str, Any]:
    """langchain-qdrant's layout: the text under page_content, everything else under metadata."""
    return {
        "page_content": chunk.text,
        "metadata": {
            "video_id": video.video_id,
            "title": video.title,
            "desc": video.desc,
            "url": video.url,
            **chunk.metadata(),
            "source_hash": video.source_hash,
            "source_file": video.source_file,
            "fingerprint": fingerprint,
        },
    }


def build_points(
    video: VideoInfo,
    chunks: Sequence[TimedChunk],
    chunk_vectors: Sequence[Sequence[float]],
    sentence_vectors: Sequence[Sequence[Sequence[float]]],
    fingerprint: str,
    bm25_texts: Sequence[str] | None = None,
) -> list[models.PointStruct]:
    """One point per chunk: a dense vector of the chunk, one vector per phrase, BM25 terms.

    `bm25_texts` (one per chunk) replaces the chunk's text for its BM25 terms, e.g. with a situating context.
    """
    points = []
    lexical_texts = bm25_texts if bm25_texts is not None else [chunk.text for chunk in chunks]
    for chunk, dense, sentences, words in zip(chunks, chunk_vectors, sentence_vectors, lexical_texts, strict=True):
        indices, values = lexical.document_vector(words)
        points.append(
            models.PointStruct(
                id=point_id(video.video_id, chunk.index),
                vector={
                    DENSE_VECTOR: list(dense),
                    SENTENCE_VECTORS: [list(v) for v in sentences],
                    SPARSE_VECTOR: models.SparseVector(indices=indices, values=values),
                },
                payload=chunk_payload(chunk, video, fingerprint),
            )
        )
    return points


def replace_video_points(
    store: Store, video_id: int, points: list[models.PointStruct], existing: set[str] | None = None
) -> int:
    """Upsert a video's new points, then delete its stale ones: a crash in between never leaves it empty.

    `existing`, the ids the video had before (from `points_of_videos` for all of a run's videos at once),
    spares a filtered count per video.
    """
    if points:
        store.upsert(points)
    if existing is not None:
        stale_ids = sorted(existing - {str(p.id) for p in points})
        if stale_ids:
            store.delete(stale_ids)
        return len(stale_ids)
    keep = [p.id for p in points]
    stale = models.Filter(
        must=video_filter(video_id).must,
        must_not=[models.HasIdCondition(has_id=keep)] if keep else None,
    )
    stale_count = store.count(stale)
    if stale_count:
        store.delete(stale)
    return stale_count


def delete_video(store: Store, video_id: int) -> int:
    """Remove every point of a video (it left the data folder)."""
    if not store.exists():
        return 0
    count = store.count(video_filter(video_id))
    if count:
        store.delete(video_filter(video_id))
    return count


def stored_fingerprints(store: Store) -> dict[int, set[str]]:
    """What each stored video was built from, read off its points' payloads."""
    if not store.exists():
        return {}
    found: dict[int, set[str]] = {}
    offset = None
    while True:
        points, offset = store.scroll(
            limit=4096, offset=offset, with_payload=[VIDEO_ID_FIELD, "metadata.fingerprint"], with_vectors=False
        )
        for point in points:
            meta = (point.payload or {}).get("metadata", {})
            found.setdefault(meta.get("video_id"), set()).add(meta.get("fingerprint"))
        if offset is None:
            return found


def video_points(store: Store, video_id: int) -> list[models.Record]:
    """Every point of a video with its payload, in chunk order."""
    return points_of_videos(store, [video_id])[video_id]


def points_of_videos(store: Store, video_ids: list[int], payload: bool = True) -> dict[int, list[models.Record]]:
    """Every point of these videos, in chunk order, in one filtered pass however many videos.

    Without `payload`, points carry only their video id and chunk index.
    """
    found: dict[int, list[models.Record]] = {v: [] for v in video_ids}
    if not video_ids or not store.exists():
        return found
    wanted = models.Filter(must=[models.FieldCondition(key=VIDEO_ID_FIELD, match=models.MatchAny(any=video_ids))])
    fields = True if payload else [VIDEO_ID_FIELD, "metadata.chunk_index"]
    offset = None
    while True:
        points, offset = store.scroll(wanted, limit=4096, offset=offset, with_payload=fields, with_vectors=False)
        for point in points:
            found[_metadata(point)["video_id"]].append(point)
        if offset is None:
            break
    return {v: sorted(points, key=lambda p: _metadata(p)["chunk_index"]) for v, points in found.items()}


def _metadata(point: models.Record) -> dict[str, Any]:
    return (point.payload or {})["metadata"]


def stored_videos(store: Store) -> dict[int, dict[str, Any]]:
    """Each stored video's title, source file and point count, in one scroll of the payloads (`pstuts videos`)."""
    found: dict[int, dict[str, Any]] = {}
    if not store.exists():
        return found
    fields = [VIDEO_ID_FIELD, "metadata.title", "metadata.source_file"]
    offset = None
    while True:
        points, offset = store.scroll(limit=4096, offset=offset, with_payload=fields, with_vectors=False)
        for point in points:
            meta = (point.payload or {}).get("metadata", {})
            video = found.setdefault(
                meta.get("video_id"), {"title": meta.get("title", ""), "source_file": meta.get("source_file", "")}
            )
            video["points"] = video.get("points", 0) + 1
        if offset is None:
            return dict(sorted(found.items(), key=lambda item: item[0]))
