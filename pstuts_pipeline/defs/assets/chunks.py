"""From a video's record to timestamped Kamradt chunks: one partition per video, many videos per run."""

import time
from collections.abc import Mapping, Sequence

import dagster as dg
import pandas as pd
from langchain_core.documents import Document

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.chunking.time_repair import Phrase, TimeRepairs, repair_times
from pstuts_pipeline.defs.dagster_private import add_metadata_by_partition
from pstuts_pipeline.defs.instance import RunTags, instance_home
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, TranscriptSource
from pstuts_pipeline.search import context as chunk_context
from pstuts_pipeline.sources import VIDEO_FIELDS, SourceVideo
from pstuts_pipeline.sources.reconciliation import own_videos_catalog

# Several videos in one run share one model load and one batch of embeddings.
SINGLE_RUN = dg.BackfillPolicy.single_run()
INGESTION_GROUP = "ingestion"
# Steps that call the embedding API or Qdrant retry transient failures (rate limits, 5xx, timeouts) with backoff.
TRANSIENT_RETRY = dg.RetryPolicy(max_retries=3, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


def video_metadata(documents: list[Document]) -> dict[str, object]:
    """The video-level fields a video's phrase Documents all carry, to pass on to its whole-video Documents."""
    return {k: documents[0].metadata[k] for k in VIDEO_FIELDS}


def phrases_of(documents: list[Document]) -> list[Phrase]:
    return [
        Phrase(d.metadata["sent_id"], d.page_content, d.metadata["time_start"], d.metadata["time_end"])
        for d in documents
    ]


def chunk_table(chunks: Sequence[chunking.TimedChunk | Document], rows: int = 20) -> dg.MetadataValue:
    """A preview of one video's chunks with their times, for the UI."""
    frame = pd.DataFrame(
        [
            {"chunk": c.index, "start": c.start, "stop": c.stop, "phrases": len(c.phrases), "text": c.text[:90]}
            if isinstance(c, chunking.TimedChunk)
            else {"chunk": i, "text": c.page_content[:90]}
            for i, c in enumerate(chunks[:rows])
        ]
    )
    return dg.MetadataValue.md(frame.to_markdown(index=False))


# A metadata value as the assets give it: Dagster shows numbers and text as they are.
Metadata = dg.MetadataValue | str | float


def report_partitions(
    context: dg.AssetExecutionContext,
    by_partition: Mapping[str, Mapping[str, Metadata]],
    totals: Mapping[str, Metadata],
) -> None:
    """Each partition gets its own video's metadata; the run's totals are an observation of the asset as a whole."""
    try:
        add_metadata_by_partition(context, by_partition)
    except AttributeError:  # Dagster 1.13: an asset invoked directly (unit tests) has no partitions to tag
        context.add_output_metadata(totals)
    else:
        context.log_event(
            dg.AssetObservation(asset_key=context.asset_key, metadata={"videos": len(by_partition), **totals})
        )
    summary = ", ".join(f"{name} {value}" for name, value in totals.items())
    context.log.info(f"{context.asset_key.to_user_string()}: {len(by_partition)} videos; {summary}")


def texts_to_embed(dense_texts: dict[str, list[str]], chunks: dict[str, list[chunking.TimedChunk]]) -> list[str]:
    """Every text the videos' points hold a vector of, once: each chunk's dense text, then each bare phrase.

    Each phrase is embedded alone, not with the neighbours the chunker saw: a question names one step, and the bare
    phrase ranks the answer's chunk better (dev, dense alone: hit@5 0.41 vs 0.35).
    """
    texts = [t for key in chunks for t in dense_texts[key]]
    texts += [p.text for key in chunks for c in chunks[key] for p in c.phrases if p.text]
    return list(dict.fromkeys(texts))


def embed_ahead(
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
    phrase_documents: dict[str, list[Document]],
    chunks: dict[str, list[chunking.TimedChunk]],
) -> dict[str, Metadata]:
    """Embed what qdrant_collection will store into the shared embedding cache now, outside the writers' pool.

    The local store admits one writer at a time (the `qdrant_writes` pool): with the vectors in the cache, the
    write step only reads and writes, and the embedding runs on whichever worker is free. With the cache off the
    vectors could not reach another process: the write step embeds them itself.
    """
    if embeddings.cache_path() is None:
        return {}
    started = time.perf_counter()
    model, counter = embeddings.get_embeddings()
    situating = chunker.context_settings()
    dense = {
        key: chunk_context.dense_texts(str(meta["title"]), str(meta["desc"]), [c.text for c in chunks[key]], situating)
        for key, meta in ((key, video_metadata(phrase_documents[key])) for key in chunks)
    }
    model.embed_documents(texts_to_embed(dense, chunks))
    return {"texts_embedded": counter.texts_embedded, "embed_seconds": round(time.perf_counter() - started, 2)}


@dg.asset(partitions_def=video_partitions, backfill_policy=SINGLE_RUN, group_name=INGESTION_GROUP, kinds={"json"})
def raw_transcripts(
    context: dg.AssetExecutionContext,
    transcript_source: TranscriptSource,
    run_tags: RunTags,  # its setup tags the run with its process (reclaimed if killed) and why it runs
) -> dict[str, SourceVideo]:
    """The video from the data folder, in whatever format, validated, with its file and content hash."""
    folder, wanted = transcript_source.path(), context.partition_keys
    wanted_ids = {int(k) for k in wanted}
    catalog = own_videos_catalog(folder, instance_home(context.instance), wanted_ids)
    # A summary line of a file with many bad records covers several videos: it is the reason for each of them.
    problems = [str(e) for e in catalog.errors if e.video_ids & wanted_ids]
    missing = [k for k in wanted if k not in catalog.videos and int(k) not in catalog.bad_video_ids]
    problems += [f"video {k} is in no file of {folder}" for k in missing]
    if problems:
        raise dg.Failure(description="\n".join(problems), allow_retries=False)
    videos = {k: catalog.videos[k] for k in wanted}
    report_partitions(
        context,
        {
            k: {
                "video_id": v.video_id,
                "title": v.title,
                "phrases": len(v.phrases),
                "qa_pairs": len(v.qa),
                "file": v.file,
                "content_hash": v.content_hash,
            }
            for k, v in videos.items()
        },
        {"phrases": sum(len(v.phrases) for v in videos.values()), "qa_pairs": sum(len(v.qa) for v in videos.values())},
    )
    return videos


@dg.asset(partitions_def=video_partitions, backfill_policy=SINGLE_RUN, group_name=INGESTION_GROUP)
def phrase_documents(
    context: dg.AssetExecutionContext, raw_transcripts: dict[str, SourceVideo]
) -> dict[str, list[Document]]:
    """One Document per phrase, with repaired `time_start`/`time_end` and the video's metadata."""
    result: dict[str, list[Document]] = {}
    repairs_by_video: dict[str, dict[str, int]] = {}
    for key, video in raw_transcripts.items():
        phrases, repairs = repair_times(video.phrases)
        repairs_by_video[key] = repairs.as_dict()
        base = video.metadata()
        result[key] = [
            Document(
                page_content=p.text,
                metadata={
                    **base,
                    "sent_id": p.sent_id,
                    "time_start": p.begin,
                    "time_end": p.end,
                    "raw_begin": r.begin,
                    "raw_end": r.end,
                },
            )
            for p, r in zip(phrases, video.phrases, strict=True)
        ]
    totals = {name: sum(r[name] for r in repairs_by_video.values()) for name in TimeRepairs().as_dict()}
    report_partitions(
        context,
        {
            key: {
                "phrases": len(docs),
                "empty_phrases": sum(1 for d in docs if not d.page_content),
                "time_repairs": sum(repairs_by_video[key].values()),
                **{f"repairs_{name}": count for name, count in repairs_by_video[key].items()},
            }
            for key, docs in result.items()
        },
        {"phrases": sum(len(d) for d in result.values()), "time_repairs": sum(totals.values())},
    )
    return result


@dg.asset(partitions_def=video_partitions, backfill_policy=SINGLE_RUN, group_name=INGESTION_GROUP)
def full_transcripts(
    context: dg.AssetExecutionContext, phrase_documents: dict[str, list[Document]]
) -> dict[str, Document]:
    """The whole transcript as one Document, phrases joined by newlines, for the semantic chunker."""
    result = {}
    for key, documents in phrase_documents.items():
        meta = video_metadata(documents)
        text = chunking.full_transcript(phrases_of(documents))
        result[key] = Document(page_content=text, metadata={**meta, "phrases": len(documents)})
    report_partitions(
        context,
        {key: {"phrases": doc.metadata["phrases"], "characters": len(doc.page_content)} for key, doc in result.items()},
        {"characters": sum(len(d.page_content) for d in result.values())},
    )
    return result


@dg.asset(
    partitions_def=video_partitions,
    backfill_policy=SINGLE_RUN,
    group_name=INGESTION_GROUP,
    kinds={"langchain"},
    retry_policy=TRANSIENT_RETRY,
)
def kamradt_chunks(
    context: dg.AssetExecutionContext,
    full_transcripts: dict[str, Document],
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
) -> dict[str, list[Document]]:
    """SemanticChunker over each full transcript, one phrase per 'sentence' so boundaries fall between phrases."""
    started = time.perf_counter()
    model, counter = embeddings.get_embeddings()
    settings = chunker.settings(embeddings.window()[0])
    # Embed every video's chunker windows in one batch (filling the cache) instead of one small batch each.
    windows_by_video = {
        key: chunking.chunker_windows(chunking.transcript_lines(doc.page_content), settings.buffer_size)
        for key, doc in full_transcripts.items()
    }
    windows = [w for ws in windows_by_video.values() for w in ws]
    model.embed_documents(windows)
    embedded = time.perf_counter()
    semantic_chunker = chunking.make_chunker(model, settings)
    result: dict[str, list[Document]] = {}
    per_video: dict[str, dict[str, Metadata]] = {}
    for done, (key, doc) in enumerate(full_transcripts.items(), 1):
        video_started = time.perf_counter()
        texts = chunking.semantic_chunks(semantic_chunker, doc.page_content)
        result[key] = [
            Document(page_content=t, metadata={**doc.metadata, "kamradt_index": i}) for i, t in enumerate(texts)
        ]
        per_video[key] = {
            "chunks": len(texts),
            "windows": len(windows_by_video[key]),
            "embedding_model": embeddings.model_id,
            # The windows of all the run's videos are embedded in one batch: only the split itself is this video's.
            "split_seconds": round(time.perf_counter() - video_started, 3),
            "preview": chunk_table(result[key]),
        }
        context.log.info(f"kamradt_chunks: {done}/{len(full_transcripts)} videos chunked")
    report_partitions(
        context,
        per_video,
        {
            "chunks": sum(len(c) for c in result.values()),
            "windows_embedded": counter.texts_embedded,
            "windows_from_cache": len(windows) - counter.texts_embedded,
            "embed_seconds": round(embedded - started, 2),
            "seconds": round(time.perf_counter() - started, 2),
            **embedding.process_metadata(),
        },
    )
    return result


@dg.asset(
    partitions_def=video_partitions,
    backfill_policy=SINGLE_RUN,
    group_name=INGESTION_GROUP,
    retry_policy=TRANSIENT_RETRY,  # it embeds the collection's texts ahead (embed_ahead)
)
def timestamped_chunks(
    context: dg.AssetExecutionContext,
    phrase_documents: dict[str, list[Document]],
    kamradt_chunks: dict[str, list[Document]],
    embeddings: EmbeddingsResource,
    chunker: ChunkerResource,
) -> dict[str, list[chunking.TimedChunk]]:
    """Each chunk linked to its phrases by character offsets, capped at the embedder's window."""
    window, special = embeddings.window()
    settings = chunker.settings(window)
    result: dict[str, list[chunking.TimedChunk]] = {}
    per_video: dict[str, dict[str, Metadata]] = {}
    for key, documents in phrase_documents.items():
        started = time.perf_counter()
        chunks = chunking.timed_chunks(
            [c.page_content for c in kamradt_chunks[key]],
            phrases_of(documents),
            embeddings.count_tokens,
            settings,
            special,
        )
        result[key] = chunks
        tokens = [embeddings.count_tokens(c.text) + special for c in chunks]
        per_video[key] = {
            "kamradt_chunks": len(kamradt_chunks[key]),
            "chunks": len(chunks),
            "max_chunk_tokens": max(tokens, default=0),
            "median_chunk_tokens": float(pd.Series(tokens).median()) if tokens else 0.0,
            "token_window": settings.max_tokens,
            "seconds": round(time.perf_counter() - started, 3),
            "preview": chunk_table(chunks),
        }
    ahead = embed_ahead(embeddings, chunker, phrase_documents, result)
    report_partitions(context, per_video, {"chunks": sum(len(c) for c in result.values()), **ahead})
    return result
