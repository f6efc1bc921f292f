"""Every resource's fields as the environment sets them, and what they mean, without Dagster.

`defs.resources.resources_from_env` builds the Dagster resources from these fields and the resources' methods call
the functions below, so `pstuts ingest` with nothing to do can decide from the same fields without importing Dagster
(half of its start-up).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking.chunker import ChunkerSettings
from pstuts_pipeline.redaction import has_credentials
from pstuts_pipeline.search import reranking
from pstuts_pipeline.search.context import ContextSettings
from pstuts_pipeline.search.fingerprints import build_fingerprint
from pstuts_pipeline.settings import (
    data_dir,
    embedding_backend,
    embedding_precision,
    env,
    env_int,
    env_limit,
    env_set,
    max_chunk_tokens,
    reranker_backend,
    storage_dir,
)
from pstuts_pipeline.sources import SourceVideo
from pstuts_pipeline.training import reranker as reranker_training

Fields = Mapping[str, Any]


@dataclass(frozen=True)
class EnvSecret:
    """A value kept out of the run config: the resource gets it as dg.EnvVar(name), shown in the UI as "from NAME"."""

    name: str


def revealed(value: Any) -> Any:
    """A field's value as code outside a run uses it: a secret's from its variable (Dagster resolves one only in runs)."""
    if isinstance(value, EnvSecret):
        return env(value.name) or None
    get_value = getattr(value, "get_value", None)  # a dg.EnvVar, as the resources hold secrets
    return get_value() if callable(get_value) else value


def url_setting(name: str) -> str | EnvSecret | None:
    """A URL setting; one that carries credentials is a secret, so Dagster stores its name, not them."""
    value = env(name)
    if not value:
        return None
    return EnvSecret(name) if has_credentials(value) else value


def resource_fields_from_env() -> dict[str, dict[str, Any]]:
    """Each resource's fields from the environment variables in docs/configuration.md."""
    return {
        "transcript_source": {"data_dir": env("PSTUTS_DATA_DIR")},
        "embeddings": {
            "provider": env("PSTUTS_EMBEDDING_PROVIDER", "local"),
            "model": embedding.resolve_model(env("PSTUTS_EMBEDDING_MODEL")),
            "openai_base_url": url_setting("OPENAI_BASE_URL"),
            "batch_size": env_limit("PSTUTS_EMBEDDING_BATCH_SIZE", 32),
            "precision": embedding_precision(),
            "backend": embedding_backend(),
            # Set but empty turns the cache off; unset keeps the default folder.
            "cache_dir": env("PSTUTS_EMBEDDING_CACHE_DIR") if env_set("PSTUTS_EMBEDDING_CACHE_DIR") else None,
            "openai_api_key": EnvSecret("OPENAI_API_KEY") if env("OPENAI_API_KEY") else None,
        },
        "reranker": {
            "model": reranker_training.resolve_reranker(env("PSTUTS_RERANKER")),
            "depth": env_int("PSTUTS_RERANK_DEPTH", reranking.DEPTH),
            "phrases": env_int("PSTUTS_RERANK_PHRASES", reranking.PHRASES_PER_CHUNK),
            "backend": reranker_backend(),
        },
        "chunker": {
            "breakpoint_threshold_type": ChunkerSettings.breakpoint_threshold_type,
            "breakpoint_threshold_amount": ChunkerSettings.breakpoint_threshold_amount,
            "buffer_size": env_limit("PSTUTS_CHUNKER_BUFFER_SIZE", ChunkerSettings.buffer_size, minimum=0),
            "max_chunk_tokens": max_chunk_tokens(),
            "min_chunk_tokens": env_limit("PSTUTS_MIN_CHUNK_TOKENS", 8, minimum=0),
            "context": env("PSTUTS_CHUNK_CONTEXT"),
            "context_use": env("PSTUTS_CHUNK_CONTEXT_USE", "bm25"),
        },
        "qdrant": {
            "path": env("PSTUTS_QDRANT_PATH"),
            "url": url_setting("QDRANT_URL"),
            "api_key": EnvSecret("QDRANT_API_KEY") if env("QDRANT_API_KEY") else None,
            "collection": env("PSTUTS_COLLECTION", "pstuts_transcripts"),
        },
        "chat_model": {
            "model": env("PSTUTS_CHAT_MODEL"),
            "base_url": url_setting("PSTUTS_CHAT_BASE_URL") or url_setting("OPENAI_BASE_URL"),
            "api_key": next((EnvSecret(k) for k in ("PSTUTS_CHAT_API_KEY", "OPENAI_API_KEY") if env(k)), None),
            "timeout_s": float(env("PSTUTS_CHAT_TIMEOUT_S") or 60),
            "max_tokens": env_int("PSTUTS_CHAT_MAX_TOKENS", 120),
            "json_schema": env("PSTUTS_CHAT_JSON_SCHEMA", "1") != "0",
        },
    }


def as_held(fields: Fields) -> dict[str, Any]:
    """The fields as a resource holds them outside a run: a secret as its variable's name (what dg.EnvVar is)."""
    return {key: value.name if isinstance(value, EnvSecret) else value for key, value in fields.items()}


def source_folder(source: Fields) -> Path:
    """The data folder the partitions are read from."""
    return Path(source["data_dir"]) if source["data_dir"] else data_dir()


def embedding_spec(embeddings: Fields) -> embedding.EmbeddingSpec:
    """The embedding model these fields name."""
    return embedding.EmbeddingSpec(
        embeddings["provider"],
        embeddings["model"],
        revealed(embeddings["openai_base_url"]) or None,
        embeddings["batch_size"],
        embeddings["precision"],
        embeddings["backend"],
    )


def context_settings(chunker: Fields) -> ContextSettings:
    return ContextSettings(source=chunker["context"], use=chunker["context_use"])


def fingerprint_context(chunker: Fields) -> ContextSettings | None:
    """The context settings as the fingerprint counts them: None when off, so today's fingerprints hold."""
    settings = context_settings(chunker)
    return settings if settings.enabled else None


def chunker_settings(chunker: Fields, window: int) -> ChunkerSettings:
    """The chunker's settings, its cap never above the embedder's input window."""
    cap = min(chunker["max_chunk_tokens"], window) if chunker["max_chunk_tokens"] else window
    return ChunkerSettings(
        breakpoint_threshold_type=chunker["breakpoint_threshold_type"],
        breakpoint_threshold_amount=chunker["breakpoint_threshold_amount"],
        buffer_size=chunker["buffer_size"],
        max_tokens=cap,
        min_tokens=chunker["min_chunk_tokens"],
    )


def qdrant_folder(qdrant: Fields) -> Path:
    """The local-mode folder (unused when a server URL is set)."""
    return Path(qdrant["path"]) if qdrant["path"] else storage_dir() / "qdrant"


def fingerprint_function(embeddings: Fields, chunker: Fields) -> Callable[[SourceVideo], str]:
    """How a video's fingerprint is computed now, to compare with the one stored beside its points."""
    spec = embedding_spec(embeddings)
    settings = chunker_settings(chunker, embedding.window_tokens(spec)[0])
    model_id, context = spec.model_id, fingerprint_context(chunker)
    return lambda video: build_fingerprint(video.content_hash, model_id, settings, context)
