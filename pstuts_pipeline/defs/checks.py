"""Asset checks, visible in the UI: exact linking, sane times, bounded chunks, complete points in Qdrant.

Each check runs once per run but reports once per video partition, so the Checks tab of a partition shows that
video's verdict and problems, not the run's.
"""

from collections.abc import Callable, Iterator
from typing import cast

import dagster as dg
from langchain_core.documents import Document

from pstuts_pipeline.chunking import validation
from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.defs.assets.chunks import phrases_of, timestamped_chunks
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.dagster_private import AssetCheckEvaluationTargetMaterializationData
from pstuts_pipeline.defs.materializations import latest_by_partition
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource
from pstuts_pipeline.search import vectorstore

CheckEvents = Iterator[dg.AssetCheckEvaluation | dg.Output]
VideoCheck = Callable[[Callable[..., CheckEvents]], dg.AssetChecksDefinition]


def per_video_check(
    asset: dg.AssetsDefinition, additional_ins: dict[str, dg.AssetIn] | None = None, blocking: bool = False
) -> VideoCheck:
    """dg.asset_check over the video partitions, for a check that yields one verdict per video, then an Output.

    Dagster runs such a check (`per_partition`), though its decorator's type allows only a returned AssetCheckResult.
    """
    return cast(
        VideoCheck,
        dg.asset_check(asset=asset, partitions_def=video_partitions, additional_ins=additional_ins, blocking=blocking),
    )


def checked_materializations(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: list[str]
) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """Each partition's latest materialization, which the UI shows the verdict beside (two queries for the run)."""
    return {
        partition: AssetCheckEvaluationTargetMaterializationData(
            run_id=record.event_log_entry.run_id, storage_id=record.storage_id, timestamp=record.timestamp
        )
        for partition, record in latest_by_partition(instance, asset_key, partitions).items()
    }


def per_partition(
    context: dg.AssetCheckExecutionContext, problems_by_video: dict[str, list[str]], **metadata: int
) -> CheckEvents:
    """One evaluation per video partition, each with only that video's problems; then the check's own output."""
    spec = context.check_specs[0]
    checked = checked_materializations(context.instance, spec.asset_key, list(problems_by_video))
    failing = 0
    for key, problems in problems_by_video.items():
        failing += bool(problems)
        yield dg.AssetCheckEvaluation(
            asset_key=spec.asset_key,
            check_name=spec.name,
            passed=not problems,
            partition=key,
            blocking=spec.blocking,
            target_materialization_data=checked.get(key),
            metadata={
                "video_id": int(key),
                "problems": len(problems),
                "details": dg.MetadataValue.json(problems[:20]),
                **metadata,
            },
        )
    context.log.info(f"{spec.name}: {len(problems_by_video)} videos checked, {failing} failing")
    yield dg.Output(None)


def linking_problems(
    chunks_by_video: dict[str, list[TimedChunk]], phrase_documents: dict[str, list[Document]]
) -> dict[str, list[str]]:
    """Every phrase lands in exactly one chunk, in order."""
    return {
        key: validation.linking_problems(phrases_of(phrase_documents[key]), chunks)
        for key, chunks in chunks_by_video.items()
    }


def timing_problems(chunks_by_video: dict[str, list[TimedChunk]]) -> dict[str, list[str]]:
    """start <= stop, phrase times inside their chunk's span, chunk starts never going backwards."""
    return {key: validation.timing_problems(chunks) for key, chunks in chunks_by_video.items()}


def points_problems(chunks_by_video: dict[str, list[TimedChunk]], qdrant: QdrantResource) -> dict[str, list[str]]:
    """The video's point count equals its chunk count, and every point carries every payload field."""
    problems: dict[str, list[str]] = {}
    with qdrant.get_store() as store:
        stored = vectorstore.points_of_videos(store, [int(k) for k in chunks_by_video])
        for key, chunks in chunks_by_video.items():
            points = stored[int(key)]
            found = []
            if len(points) != len(chunks):
                found.append(f"{len(points)} points for {len(chunks)} chunks")
            for point in points:
                payload = point.payload or {}
                missing = [f for f in vectorstore.PAYLOAD_FIELDS if f not in payload.get("metadata", {})]
                if "page_content" not in payload:
                    missing.append("page_content")
                if missing:
                    found.append(f"point {point.id}: missing {missing}")
            problems[key] = found
    return problems


@per_video_check(timestamped_chunks, additional_ins={"phrase_documents": dg.AssetIn()}, blocking=True)
def phrases_linked_exactly_once(
    context: dg.AssetCheckExecutionContext,
    timestamped_chunks: dict[str, list[TimedChunk]],
    phrase_documents: dict[str, list[Document]],
) -> CheckEvents:
    """Every phrase lands in exactly one chunk, in order."""
    yield from per_partition(context, linking_problems(timestamped_chunks, phrase_documents))


@per_video_check(timestamped_chunks, blocking=True)
def chunk_times_ordered_and_bounded(
    context: dg.AssetCheckExecutionContext, timestamped_chunks: dict[str, list[TimedChunk]]
) -> CheckEvents:
    """start <= stop, phrase times inside their chunk's span, chunk starts never going backwards."""
    yield from per_partition(context, timing_problems(timestamped_chunks))


@per_video_check(timestamped_chunks, blocking=True)
def chunks_fit_token_window(
    context: dg.AssetCheckExecutionContext,
    timestamped_chunks: dict[str, list[TimedChunk]],
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
) -> CheckEvents:
    """No chunk is longer than the embedder's input window, so none is truncated when embedded."""
    window, special = embeddings.window()
    cap = chunker.settings(window).max_tokens
    problems = {
        key: validation.window_problems(chunks, embeddings.count_tokens, cap, special)
        for key, chunks in timestamped_chunks.items()
    }
    yield from per_partition(context, problems, token_window=cap)


@per_video_check(qdrant_collection, additional_ins={"timestamped_chunks": dg.AssetIn()})
def points_match_chunks(
    context: dg.AssetCheckExecutionContext, timestamped_chunks: dict[str, list[TimedChunk]], qdrant: QdrantResource
) -> CheckEvents:
    """The video's point count equals its chunk count, and every point carries every payload field."""
    yield from per_partition(context, points_problems(timestamped_chunks, qdrant))


pipeline_checks = [
    phrases_linked_exactly_once,
    chunk_times_ordered_and_bounded,
    chunks_fit_token_window,
    points_match_chunks,
]
