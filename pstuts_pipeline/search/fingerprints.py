"""What a video's stored points were built from, as one short hash (no Qdrant or Dagster imports)."""

import hashlib
from collections.abc import Callable
from pathlib import Path

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking.chunker import ChunkerSettings
from pstuts_pipeline.search.context import ContextSettings
from pstuts_pipeline.settings import ChunkingSettings, EmbeddingSettings
from pstuts_pipeline.sources import SourceVideo

# Bump when the points' layout changes (vectors, payload): every video is then ingested again.
SCHEMA_VERSION = 2
# An empty video: its fingerprint changes exactly when the model or the chunk settings do.
PROBE_VIDEO = SourceVideo(0, "", "", "", (), (), "", "")


def build_fingerprint(source_hash: str, model_id: str, settings: object, context: object = None) -> str:
    """What a video's points were built from: its content, the model, the chunking settings, our schema.

    `context`, the chunk-context settings, counts only when given (on): a collection built without it keeps
    its fingerprints, so turning nothing on re-ingests nothing.
    """
    parts = f"{SCHEMA_VERSION}|{source_hash}|{model_id}|{settings!r}"
    if context is not None:
        parts += f"|{context!r}"
    return hashlib.sha256(parts.encode("utf-8")).hexdigest()[:32]


def counted_context(chunking: ChunkingSettings) -> ContextSettings | None:
    """The context settings as the fingerprint counts them: None when off, so today's fingerprints hold."""
    context = ContextSettings.from_settings(chunking)
    return context if context.enabled else None


def fingerprint_function(embeddings: EmbeddingSettings, chunking: ChunkingSettings) -> Callable[[SourceVideo], str]:
    """How a video's fingerprint is computed now, to compare with the one stored beside its points."""
    spec = embedding.EmbeddingSpec.from_settings(embeddings)
    chunker = ChunkerSettings.from_settings(chunking, embedding.window_tokens(spec)[0])
    model_id, context = spec.model_id, counted_context(chunking)
    return lambda video: build_fingerprint(video.content_hash, model_id, chunker, context)


def settings_key(folder: Path, fingerprint_of: Callable[[SourceVideo], str]) -> str:
    """What the stored points of a data folder's videos depend on besides their files: the folder, model, settings."""
    return hashlib.sha256(f"{folder.resolve()}|{fingerprint_of(PROBE_VIDEO)}".encode()).hexdigest()[:32]
