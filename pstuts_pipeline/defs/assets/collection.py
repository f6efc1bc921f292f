"""Embeds timestamped chunks and writes them to Qdrant, replacing each video's points idempotently."""

import time
from pathlib import Path

import dagster as dg

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.defs.assets.chunks import (
    INGESTION_GROUP,
    SINGLE_RUN,
    TRANSIENT_RETRY,
    Metadata,
    report_partitions,
    texts_to_embed,
)
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource, fingerprint_function
from pstuts_pipeline.search import context as chunk_context
from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.sources import SourceVideo

# Local-mode Qdrant admits one client per folder: one writer at a time (limit set in dagster.yaml).
QDRANT_POOL = "qdrant_writes"


@dg.asset(
    partitions_def=video_partitions,
    backfill_policy=SINGLE_RUN,
    group_name=INGESTION_GROUP,
    kinds={"qdrant"},
    pool=QDRANT_POOL,
    retry_policy=TRANSIENT_RETRY,
)
def qdrant_collection(
    context: dg.AssetExecutionContext,
    raw_transcripts: dict[str, SourceVideo],
    timestamped_chunks: dict[str, list[TimedChunk]],
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
    qdrant: QdrantResource,
) -> dg.MaterializeResult:
    """Embeds each video's chunks (whole chunk, each phrase, BM25 terms) and replaces its points in Qdrant."""
    started = time.perf_counter()
    model, counter = embeddings.get_embeddings()
    situating = chunker.context_settings()
    chunks = timestamped_chunks
    # Each chunk's text with its situating context (the text alone when off), for its dense vector and/or BM25 terms.
    contextual = {
        key: chunk_context.contextual_texts(
            raw_transcripts[key].title, raw_transcripts[key].desc, [c.text for c in chunks[key]], situating
        )
        for key in chunks
    }
    dense_texts = {
        key: chunk_context.dense_texts(video.title, video.desc, [c.text for c in chunks[key]], situating)
        for key, video in ((key, raw_transcripts[key]) for key in chunks)
    }
    # The fingerprint stored beside the points is the one every reconcile compares against.
    fingerprint_of = fingerprint_function(embeddings, chunker)
    # Read from the embedding cache, where timestamped_chunks put them outside this step's one-writer pool (with the
    # cache off, embedded here).
    unique = texts_to_embed(dense_texts, chunks)
    vectors = dict(zip(unique, model.embed_documents(unique), strict=True))
    embedded_at = time.perf_counter()
    per_video: dict[str, dict[str, Metadata]] = {}
    written = deleted = 0
    with qdrant.get_store() as store:
        vectorstore.ensure_collection(store, len(next(iter(vectors.values()))), embeddings.model_id)
        video_ids = [raw_transcripts[key].video_id for key in chunks]
        existing = vectorstore.points_of_videos(store, video_ids, payload=False)
        for key, video_chunks in chunks.items():
            video = raw_transcripts[key]
            info = vectorstore.VideoInfo(
                **video.metadata(), source_hash=video.content_hash, source_file=Path(video.file).name
            )
            fingerprint = fingerprint_of(video)
            points = vectorstore.build_points(
                info,
                video_chunks,
                [vectors[t] for t in dense_texts[key]],
                [[vectors[p.text] for p in c.phrases if p.text] for c in video_chunks],
                fingerprint,
                contextual[key] if situating.bm25 else None,
            )
            before = {str(p.id) for p in existing[video.video_id]}
            stale = vectorstore.replace_video_points(store, video.video_id, points, before)
            written, deleted = written + len(points), deleted + stale
            per_video[key] = {
                "video_id": video.video_id,
                "title": info.title,
                "points_written": len(points),
                "stale_points_deleted": stale,
                "fingerprint": fingerprint,
                "collection": qdrant.collection,
                "embedding_model": embeddings.model_id,
            }
        total_points = store.count()
    for metadata in per_video.values():
        metadata["collection_points"] = total_points
    report_partitions(
        context,
        per_video,
        {
            "points_written": written,
            "stale_points_deleted": deleted,
            "collection_points": total_points,
            "texts_embedded": counter.texts_embedded,
            "texts_from_cache": len(vectors) - counter.texts_embedded,
            "embed_seconds": round(embedded_at - started, 2),
            "write_seconds": round(time.perf_counter() - embedded_at, 2),
            **embedding.process_metadata(),
        },
    )
    return dg.MaterializeResult()
