"""The Qdrant collection: its schema, point layout (langchain-qdrant's payload), idempotent per-video writes."""

from __future__ import annotations

import sqlite3
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import QdrantClient, models

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.search import lexical

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


# Writes made through each client in this process, so a view of a collection held in memory knows it is stale.
_writes: weakref.WeakKeyDictionary[QdrantClient, int] = weakref.WeakKeyDictionary()


def writes_through(client: QdrantClient) -> int:
    """How many writes this process has made through the client (every write here goes through this module)."""
    return _writes.get(client, 0)


def _wrote(client: QdrantClient) -> None:
    _writes[client] = _writes.get(client, 0) + 1


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


def ensure_collection(client: QdrantClient, name: str, dimension: int, model_id: str) -> None:
    """Create the collection once, even with writers racing; refuse to mix vectors of different models in it."""
    if not client.collection_exists(name):
        _wrote(client)
        try:
            client.create_collection(
                name,
                vectors_config={
                    DENSE_VECTOR: models.VectorParams(size=dimension, distance=models.Distance.COSINE),
                    SENTENCE_VECTORS: models.VectorParams(
                        size=dimension,
                        distance=models.Distance.COSINE,
                        multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
                    ),
                },
                sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata={"embedding_model": model_id},
            )
        except Exception:
            # Another writer created it between our check and our create (server mode, parallel steps).
            if not client.collection_exists(name):
                raise
    info = client.get_collection(name)
    stored = (info.config.metadata or {}).get("embedding_model")
    if stored is not None and stored != model_id:
        raise ModelMismatchError(
            f"collection {name!r} was built with {stored}, not {model_id}: re-ingest into a new collection "
            "(PSTUTS_COLLECTION) or delete it first"
        )
    # Every write filters on the video id; a server indexes it (local mode scans anyway). Checked on every call,
    # so a writer that lost the creation race, or a creator that died before indexing, still gets the index.
    if is_server(client) and VIDEO_ID_FIELD not in (info.payload_schema or {}):
        client.create_payload_index(name, VIDEO_ID_FIELD, models.PayloadSchemaType.INTEGER, wait=True)


def is_server(client: QdrantClient) -> bool:
    """Whether the client talks to a Qdrant server rather than local mode (a path or :memory:)."""
    options = client.init_options
    return bool(options.get("url") or options.get("host") or str(options.get("location") or "").startswith("http"))


def collection_model(client: QdrantClient, name: str) -> str | None:
    """The embedding model a collection was built with, as recorded when it was created."""
    metadata = client.get_collection(name).config.metadata or {}
    return metadata.get("embedding_model")


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


def sync_local_writes_lazily(client: QdrantClient, collection: str) -> None:
    """Let local mode commit points without a disk sync each: SQLite WAL with synchronous=NORMAL.

    Local mode writes every point in its own SQLite transaction, synced to disk: about 70 points a second
    here, against some 3,000 with NORMAL. WAL with NORMAL never corrupts the file; a power cut may lose the
    last points, and their video's missing fingerprint then gets it ingested again. Servers are untouched.
    """
    local = getattr(client, "_client", None)
    persistence = getattr(getattr(local, "collections", {}).get(collection), "storage", None)
    connection = getattr(persistence, "storage", None)
    if isinstance(connection, sqlite3.Connection):
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")


def replace_video_points(
    client: QdrantClient,
    collection: str,
    video_id: int,
    points: list[models.PointStruct],
    existing: set[str] | None = None,
) -> int:
    """Upsert a video's new points, then delete its stale ones: a crash in between never leaves it empty.

    `existing`, the ids the video had before (from `points_of_videos` for all of a run's videos at once),
    spares a filtered count: local mode scans the whole collection for each, which grows with the square
    of the corpus when every video is written.
    """
    sync_local_writes_lazily(client, collection)
    _wrote(client)
    if points:
        client.upsert(collection, points=points, wait=True)
    if existing is not None:
        stale_ids = sorted(existing - {str(p.id) for p in points})
        if stale_ids:
            client.delete(collection, points_selector=models.PointIdsList(points=stale_ids), wait=True)
        return len(stale_ids)
    keep = [p.id for p in points]
    stale = models.Filter(
        must=video_filter(video_id).must,
        must_not=[models.HasIdCondition(has_id=keep)] if keep else None,
    )
    stale_count = client.count(collection, count_filter=stale, exact=True).count
    if stale_count:
        client.delete(collection, points_selector=models.FilterSelector(filter=stale), wait=True)
    return stale_count


def delete_video(client: QdrantClient, collection: str, video_id: int) -> int:
    """Remove every point of a video (it left the data folder)."""
    if not client.collection_exists(collection):
        return 0
    count = client.count(collection, count_filter=video_filter(video_id), exact=True).count
    if count:
        sync_local_writes_lazily(client, collection)
        _wrote(client)
        client.delete(collection, points_selector=models.FilterSelector(filter=video_filter(video_id)), wait=True)
    return count


def stored_fingerprints(client: QdrantClient, collection: str) -> dict[int, set[str]]:
    """What each stored video was built from, read off its points' payloads."""
    if not client.collection_exists(collection):
        return {}
    found: dict[int, set[str]] = {}
    offset = None
    while True:
        points, offset = client.scroll(
            collection,
            limit=1024,
            offset=offset,
            with_payload=["metadata.video_id", "metadata.fingerprint"],
            with_vectors=False,
        )
        for point in points:
            meta = (point.payload or {}).get("metadata", {})
            found.setdefault(meta.get("video_id"), set()).add(meta.get("fingerprint"))
        if offset is None:
            return found


def video_points(client: QdrantClient, collection: str, video_id: int) -> list[models.Record]:
    """Every point of a video with its payload, in chunk order."""
    return points_of_videos(client, collection, [video_id])[video_id]


def points_of_videos(
    client: QdrantClient, collection: str, video_ids: list[int], payload: bool = True
) -> dict[int, list[models.Record]]:
    """Every point of these videos, in chunk order, in one pass over the collection however many videos.

    Without `payload`, points carry only their video id and chunk index.
    """
    found: dict[int, list[models.Record]] = {v: [] for v in video_ids}
    if not video_ids or not client.collection_exists(collection):
        return found
    wanted = models.Filter(must=[models.FieldCondition(key=VIDEO_ID_FIELD, match=models.MatchAny(any=video_ids))])
    fields = True if payload else [VIDEO_ID_FIELD, "metadata.chunk_index"]
    offset = None
    while True:
        points, offset = client.scroll(
            collection, scroll_filter=wanted, limit=4096, offset=offset, with_payload=fields, with_vectors=False
        )
        for point in points:
            found[point.payload["metadata"]["video_id"]].append(point)
        if offset is None:
            break
    return {v: sorted(points, key=lambda p: p.payload["metadata"]["chunk_index"]) for v, points in found.items()}


def stored_videos(client: QdrantClient, collection: str) -> dict[int, dict[str, Any]]:
    """Each stored video's title, source file and point count, in one scroll of the payloads (`pstuts videos`)."""
    found: dict[int, dict[str, Any]] = {}
    if not client.collection_exists(collection):
        return found
    fields = [VIDEO_ID_FIELD, "metadata.title", "metadata.source_file"]
    offset = None
    while True:
        points, offset = client.scroll(collection, limit=4096, offset=offset, with_payload=fields, with_vectors=False)
        for point in points:
            meta = (point.payload or {}).get("metadata", {})
            video = found.setdefault(
                meta.get("video_id"), {"title": meta.get("title", ""), "source_file": meta.get("source_file", "")}
            )
            video["points"] = video.get("points", 0) + 1
        if offset is None:
            return dict(sorted(found.items(), key=lambda item: item[0]))
