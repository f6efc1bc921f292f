"""Asset checks, visible in the UI: exact linking, sane times, bounded chunks, complete points in Qdrant."""

import dagster as dg
from langchain_core.documents import Document

from pstuts_pipeline.chunking import validation
from pstuts_pipeline.defs.assets.chunks import phrases_of, timed_chunk_of, timestamped_chunks
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource
from pstuts_pipeline.search import vectorstore


def _result(problems_by_video: dict[str, list[str]], **metadata: object) -> dg.AssetCheckResult:
    failing = {k: v for k, v in problems_by_video.items() if v}
    return dg.AssetCheckResult(
        passed=not failing,
        metadata={
            "videos_checked": len(problems_by_video),
            "videos_failing": len(failing),
            "problems": dg.MetadataValue.json({k: v[:20] for k, v in failing.items()}),
            **metadata,
        },
    )


@dg.asset_check(
    asset=timestamped_chunks,
    partitions_def=video_partitions,
    additional_ins={"phrase_documents": dg.AssetIn()},
    blocking=True,
)
def phrases_linked_exactly_once(
    timestamped_chunks: dict[str, list[Document]], phrase_documents: dict[str, list[Document]]
) -> dg.AssetCheckResult:
    """Every phrase lands in exactly one chunk, in order, and chunk text is exactly its phrases' text."""
    problems = {}
    for key, docs in timestamped_chunks.items():
        chunks = [timed_chunk_of(d) for d in docs]
        problems[key] = validation.linking_problems(phrases_of(phrase_documents[key]), chunks) + [
            f"chunk {c.index}: its text is not exactly its phrases' text"
            for d, c in zip(docs, chunks, strict=True)
            if d.page_content != c.text
        ]
    return _result(problems)


@dg.asset_check(asset=timestamped_chunks, partitions_def=video_partitions, blocking=True)
def chunk_times_ordered_and_bounded(timestamped_chunks: dict[str, list[Document]]) -> dg.AssetCheckResult:
    """start <= stop, phrase times inside their chunk's span, chunk starts never going backwards."""
    problems = {}
    for key, docs in timestamped_chunks.items():
        chunks = [timed_chunk_of(d) for d in docs]
        # The stored start/stop are what users jump to: they must be the span of the chunk's phrases.
        problems[key] = validation.timing_problems(chunks) + [
            f"chunk {c.index}: start/stop {d.metadata.get('start')}/{d.metadata.get('stop')}, "
            f"not its phrases' span {c.start}/{c.stop}"
            for d, c in zip(docs, chunks, strict=True)
            if (d.metadata.get("start"), d.metadata.get("stop")) != (c.start, c.stop)
        ]
    return _result(problems)


@dg.asset_check(asset=timestamped_chunks, partitions_def=video_partitions, blocking=True)
def chunks_fit_token_window(
    timestamped_chunks: dict[str, list[Document]], embeddings: EmbeddingsResource, chunker: ChunkerResource
) -> dg.AssetCheckResult:
    """No chunk is longer than the embedder's input window, so none is truncated when embedded."""
    window, special = embeddings.window()
    cap = chunker.settings(window).max_tokens
    problems = {
        key: validation.window_problems([timed_chunk_of(d) for d in docs], embeddings.count_tokens, cap, special)
        for key, docs in timestamped_chunks.items()
    }
    return _result(problems, token_window=cap)


@dg.asset_check(
    asset=qdrant_collection,
    partitions_def=video_partitions,
    additional_ins={"timestamped_chunks": dg.AssetIn()},
)
def points_match_chunks(timestamped_chunks: dict[str, list[Document]], qdrant: QdrantResource) -> dg.AssetCheckResult:
    """The video's point count equals its chunk count, and every point carries every payload field."""
    problems: dict[str, list[str]] = {}
    with qdrant.get_client() as client:
        stored = vectorstore.points_of_videos(client, qdrant.collection, [int(k) for k in timestamped_chunks])
        for key, docs in timestamped_chunks.items():
            points = stored[int(key)]
            found = []
            if len(points) != len(docs):
                found.append(f"{len(points)} points for {len(docs)} chunks")
            for point in points:
                payload = point.payload or {}
                missing = [f for f in vectorstore.PAYLOAD_FIELDS if f not in payload.get("metadata", {})]
                if "page_content" not in payload:
                    missing.append("page_content")
                if missing:
                    found.append(f"point {point.id}: missing {missing}")
            problems[key] = found
    return _result(problems)


pipeline_checks = [
    phrases_linked_exactly_once,
    chunk_times_ordered_and_bounded,
    chunks_fit_token_window,
    points_match_chunks,
]
