"""Embedding models behind one seam: a spec names the model, a provider per kind embeds with it.

Providers: `local` (a sentence-transformers folder, default the bundled all-MiniLM-L6-v2, checked against
known sha256s: models.py) and `openai` (OpenAI's API or a compatible server). cache.py wraps any of them.
Domain code: errors are plain exceptions; resources.py turns them into Dagster failures.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from langchain_core.embeddings import Embeddings

from pstuts_pipeline.embedding.cache import CountingEmbeddings, cache_namespace, cached
from pstuts_pipeline.embedding.local import LocalProvider, model_loads
from pstuts_pipeline.embedding.models import (
    OFFICIAL_MINILM,
    OFFICIAL_MINILM_SHA256,
    ModelIntegrityError,
    bundled_model_path,
    known_checksums,
    resolve_model,
    verify_bundled_model,
    verify_model_folder,
)
from pstuts_pipeline.embedding.openai_compatible import (
    OpenAICompatibleProvider,
    ProviderConfigError,
    ProviderError,
    ProviderRefusedError,
)
from pstuts_pipeline.settings import DEFAULT_BACKEND, EmbeddingSettings
from pstuts_pipeline.settings.base import default

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class EmbeddingSpec:
    """Everything that identifies an embedding model; two specs that are equal embed identically."""

    provider: str = default(EmbeddingSettings, "provider")
    model: str = default(EmbeddingSettings, "model")
    base_url: str | None = None
    batch_size: int = default(EmbeddingSettings, "batch_size")
    # Local models only: "bfloat16" runs the matrix products in bfloat16 (AMX/AVX-512 CPUs: twice as fast;
    # vectors differ by up to 2e-3, so it is another model id, with its own fingerprints and cache).
    precision: str = default(EmbeddingSettings, "precision")
    # Local models only: "torch", or ONNX Runtime on an export of the same weights ("onnx", "onnx-int8"); each
    # backend other than torch is another model id (embedding/onnx.py).
    backend: str = DEFAULT_BACKEND

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings, model: str | None = None) -> EmbeddingSpec:
        """The model these settings name (`model` names another with the same settings: a folder, `latest`, '')."""
        return cls(
            settings.provider,
            resolve_model(settings.model if model is None else model),
            settings.openai_base_url or None,
            settings.batch_size,
            settings.precision,
            settings.backend,
        )

    @property
    def model_name(self) -> str:
        """The model as its provider knows it: a resolved folder (local) or a model name (openai)."""
        return provider_for(self).model_name(self)

    @property
    def model_id(self) -> str:
        """A short, stable name for the model, used for cache keys and stored beside every vector."""
        return provider_for(self).model_id(self)


class EmbeddingProvider(Protocol):
    """One kind of embedding model: how it is named, loaded, and how it counts tokens."""

    name: str

    def model_name(self, spec: EmbeddingSpec) -> str: ...

    def model_id(self, spec: EmbeddingSpec) -> str: ...

    def load(self, spec: EmbeddingSpec, api_key: str | None = None) -> Embeddings:
        """The model, once per process (or per key); plain exceptions name what is wrong."""
        ...

    def preload(self, spec: EmbeddingSpec) -> None:
        """Start any slow load in the background; errors surface at first use."""
        ...

    def token_counter(self, spec: EmbeddingSpec) -> TokenCounter: ...

    def window(self, spec: EmbeddingSpec) -> tuple[int, int]:
        """(input window in tokens, special tokens spent of it)."""
        ...


PROVIDERS: dict[str, EmbeddingProvider] = {p.name: p for p in (LocalProvider(), OpenAICompatibleProvider())}


def provider_for(spec: EmbeddingSpec) -> EmbeddingProvider:
    """The provider a spec names, or a ValueError listing the known ones."""
    try:
        return PROVIDERS[spec.provider]
    except KeyError:
        known = " or ".join(repr(name) for name in PROVIDERS)
        raise ValueError(f"PSTUTS_EMBEDDING_PROVIDER is {spec.provider!r}; expected {known}") from None


def load_embeddings(spec: EmbeddingSpec, api_key: str | None = None) -> Embeddings:
    """The model for a spec, loaded once per process (loading the local model costs seconds)."""
    return provider_for(spec).load(spec, api_key)


def preload(spec: EmbeddingSpec) -> None:
    """Start loading the model in the background, so the load overlaps the run's first steps."""
    provider_for(spec).preload(spec)


def cached_embeddings(
    spec: EmbeddingSpec, cache_dir: Path | None, api_key: str | None = None
) -> tuple[Embeddings, CountingEmbeddings]:
    """The model behind a cache keyed by model and text; returns (what to embed with, the counter)."""
    return cached(spec, lambda: load_embeddings(spec, api_key), cache_dir)


def process_metadata() -> dict[str, int]:
    """Which process embedded and how many local model loads it has made: steps on workers must not reload it."""
    return {"process_id": os.getpid(), "model_loads_in_process": model_loads()}


@functools.cache
def token_counter(spec: EmbeddingSpec) -> TokenCounter:
    """Count tokens the way the model will (without its special tokens)."""
    return provider_for(spec).token_counter(spec)


@functools.cache
def window_tokens(spec: EmbeddingSpec) -> tuple[int, int]:
    """The model's input window and how many special tokens it spends of it."""
    return provider_for(spec).window(spec)


__all__ = [
    "OFFICIAL_MINILM",
    "OFFICIAL_MINILM_SHA256",
    "PROVIDERS",
    "CountingEmbeddings",
    "EmbeddingProvider",
    "EmbeddingSpec",
    "ModelIntegrityError",
    "ProviderConfigError",
    "ProviderError",
    "ProviderRefusedError",
    "TokenCounter",
    "bundled_model_path",
    "cache_namespace",
    "cached_embeddings",
    "known_checksums",
    "load_embeddings",
    "preload",
    "process_metadata",
    "provider_for",
    "resolve_model",
    "token_counter",
    "verify_bundled_model",
    "verify_model_folder",
    "window_tokens",
]
