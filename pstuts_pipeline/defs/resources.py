"""Dagster resources: the embedding model, the Qdrant store, and the chunking settings."""

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from filelock import Timeout
from langchain_core.embeddings import Embeddings
from pydantic import Field

from pstuts_pipeline import embedding
from pstuts_pipeline import resource_fields as fields
from pstuts_pipeline.answers.chat import ChatSettings
from pstuts_pipeline.chunking.chunker import ChunkerSettings
from pstuts_pipeline.redaction import redact, strip_credentials
from pstuts_pipeline.search import reranking
from pstuts_pipeline.search.context import ContextSettings
from pstuts_pipeline.settings import (
    DEFAULT_BACKEND,
    DEFAULT_RERANKER_BACKEND,
    storage_dir,
)
from pstuts_pipeline.sources import SourceVideo

if TYPE_CHECKING:  # imported when a client is made: it costs a second, which `pstuts ingest` with nothing to do saves
    from pstuts_pipeline.search.store import Store


class TranscriptSource(dg.ConfigurableResource):
    """The folder of video files (PsTuts-VQA JSON, SRT or WebVTT captions) that partitions are read from."""

    data_dir: str = Field(
        default="", description="Folder of video files, *.json, *.srt, *.vtt (default: data/ in the project)."
    )

    def path(self) -> Path:
        return fields.source_folder(self.model_dump())


class EmbeddingsResource(dg.ConfigurableResource):
    """The embedding model shared by the chunker, the collection and search; loaded once per process."""

    provider: str = Field(default="local", description="'local' (bundled all-MiniLM-L6-v2) or 'openai'.")
    model: str = Field(
        default="",
        description="Local: a sentence-transformers folder (empty = bundled all-MiniLM-L6-v2). "
        "OpenAI: a model name (empty = text-embedding-3-small).",
    )
    openai_base_url: str | None = Field(default=None, description="An OpenAI-compatible server's base URL.")
    batch_size: int = Field(default=32, description="Texts per forward pass or API request.")
    precision: str = Field(
        default="float32",
        description="Local models: 'float32', or 'bfloat16' (twice as fast on AMX/AVX-512 CPUs; another model id).",
    )
    backend: str = Field(
        default=DEFAULT_BACKEND,
        description="Local models: 'torch', 'onnx' or 'onnx-int8' (ONNX Runtime on an export; another model id).",
    )
    cache_dir: str | None = Field(
        default=None, description="Embedding cache folder (empty string disables; default under the storage dir)."
    )
    openai_api_key: str | None = Field(
        default=None,
        description="OpenAI provider: the key, as dg.EnvVar('OPENAI_API_KEY') (unset: read from the environment).",
    )

    @property
    def spec(self) -> embedding.EmbeddingSpec:
        return fields.embedding_spec(self.model_dump())

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    def cache_path(self) -> Path | None:
        if self.cache_dir == "":
            return None
        return Path(self.cache_dir) if self.cache_dir else storage_dir() / "embedding_cache"

    def get_embeddings(self) -> tuple[Embeddings, embedding.CountingEmbeddings]:
        """(cached embeddings to use, the counter of texts that actually reached the model)."""
        model, counter = embedding.cached_embeddings(self.spec, self.cache_path(), _secret(self.openai_api_key))
        return DagsterFailures(model), counter

    def preload(self) -> None:
        """Start loading the local model in the background (it overlaps the steps that need no model)."""
        embedding.preload(self.spec)

    def query_embeddings(self, model: str | None = None) -> Embeddings:
        """The model for queries; `model` (a folder, `latest`, empty: bundled) swaps in another with these settings."""
        return DagsterFailures(embedding.load_embeddings(self.spec_for(model), _secret(self.openai_api_key)))

    def spec_for(self, model: str | None) -> embedding.EmbeddingSpec:
        """This resource's spec, or the same settings with another model (e.g. base vs tuned)."""
        return self.spec if model is None else dataclasses.replace(self.spec, model=embedding.resolve_model(model))

    def count_tokens(self, text: str) -> int:
        return embedding.token_counter(self.spec)(text)

    def window(self) -> tuple[int, int]:
        """(input window in tokens, special tokens spent of it)."""
        return embedding.window_tokens(self.spec)


class DagsterFailures(Embeddings):
    """The resource boundary: a provider's refusal becomes a Dagster Failure that forbids retries.

    A refused key or a malformed request is not transient, and each retry only waits longer; any other error
    passes unchanged, so the step's RetryPolicy may run it again. The message is the provider's one line,
    which names the server and never the key.
    """

    def __init__(self, inner: Embeddings):
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            return self.inner.embed_documents(texts)
        except embedding.ProviderRefusedError as error:
            raise ProviderRefusedFailure(str(error)) from None

    def embed_query(self, text: str) -> list[float]:
        try:
            return self.inner.embed_query(text)
        except embedding.ProviderRefusedError as error:
            raise ProviderRefusedFailure(str(error)) from None


class ProviderRefusedFailure(dg.Failure):
    """The embeddings server refused our credentials or our request (embedding.ProviderRefusedError), not retried."""

    def __init__(self, description: str):
        super().__init__(description=description, allow_retries=False)


def _secret(value: str | None) -> str | None:
    """A secret field's value: Dagster resolves a dg.EnvVar inside a run; the CLI uses resources outside one."""
    return fields.revealed(value)


class RerankerResource(dg.ConfigurableResource):
    """The cross-encoder that rescores search's best candidates (PSTUTS_RERANKER); search runs without it when unset."""

    model: str = Field(default="", description="A folder written by `pstuts tune-reranker` (empty: no reranker).")
    depth: int = Field(default=reranking.DEPTH, ge=1, description="First-stage candidates rescored per question.")
    phrases: int = Field(default=reranking.PHRASES_PER_CHUNK, ge=1, description="Phrases of each candidate it reads.")
    weight: float = Field(default=reranking.WEIGHT, description="Weight of its standardised score in the sum.")
    backend: str = Field(default=DEFAULT_RERANKER_BACKEND, description="'torch', 'onnx' or 'onnx-int8'.")

    def get(self) -> reranking.Reranker | None:
        """The reranker, loaded once per process, or None when none is configured."""
        if not self.model:
            return None
        return reranking.load_reranker(
            self.model, reranking.RerankSettings(self.depth, self.phrases, self.weight), self.backend
        )


class ChunkerResource(dg.ConfigurableResource):
    """How Kamradt chunks are cut and bounded."""

    breakpoint_threshold_type: str = Field(
        default=ChunkerSettings.breakpoint_threshold_type,
        description="SemanticChunker breakpoint rule: percentile, standard_deviation, ...",
    )
    breakpoint_threshold_amount: float | None = Field(
        default=ChunkerSettings.breakpoint_threshold_amount, description="Its amount (None = LangChain's)."
    )
    buffer_size: int = Field(
        default=ChunkerSettings.buffer_size,
        ge=0,
        description="Neighbouring phrases on each side embedded with a phrase to find breakpoints (Kamradt's: 1).",
    )
    max_chunk_tokens: int = Field(
        default=0, description="Cap on a chunk's tokens, special tokens included (0 = the model's input window)."
    )
    min_chunk_tokens: int = Field(default=8, description="A chunk smaller than this joins a neighbour if it fits.")
    context: str = Field(
        default="", description="Situating context per chunk: '', title, neighbours or title+neighbours."
    )
    context_use: str = Field(default="bm25", description="Where the context goes: dense, bm25 or both.")

    def context_settings(self) -> ContextSettings:
        return fields.context_settings(self.model_dump())

    def fingerprint_context(self) -> ContextSettings | None:
        return fields.fingerprint_context(self.model_dump())

    def settings(self, window: int) -> ChunkerSettings:
        return fields.chunker_settings(self.model_dump(), window)


class QdrantResource(dg.ConfigurableResource):
    """The collection in a local folder (Qdrant Edge, in-process) or on a Qdrant server (QDRANT_URL), opened while in use."""

    path: str = Field(default="", description="Local store folder (default: qdrant/ under the storage dir).")
    url: str | None = Field(default=None, description="A Qdrant server; when set, the local folder is not used.")
    api_key: str | None = Field(default=None, description="The server's API key.")
    collection: str = Field(default="pstuts_transcripts", description="Collection name.")
    timeout_s: int = Field(default=60, description="Server request timeout.")
    lock_timeout_s: float = Field(default=1800, description="How long to wait for another user of the local store.")

    @property
    def local_path(self) -> Path:
        return fields.qdrant_folder(self.model_dump())

    @property
    def server_url(self) -> str | None:
        """The server's URL, credentials included (a URL with them is held as dg.EnvVar), or None for local mode."""
        return _secret(self.url) or None

    @contextlib.contextmanager
    def get_store(
        self, read_only: bool = False, lock_timeout_s: float | None = None, collection: str | None = None
    ) -> Iterator["Store"]:
        """The collection for one step (`collection` names another one). Edge holds a local folder's shard in one
        process at a time, so the store's lock is taken before it is opened and held until the block ends.

        `read_only` (search): a folder this process may not write is opened from a private copy, since Edge and
        our lock both need to write there. Errors name the server or the folder.
        `lock_timeout_s` overrides how long to wait for another user (filelock.Timeout when it runs out).
        """
        name = collection or self.collection
        if self.server_url:
            with self._server_store(name) as store:
                yield store
            return
        if read_only and self.local_path.is_dir() and not os.access(self.local_path, os.W_OK):
            with tempfile.TemporaryDirectory(prefix="pstuts-qdrant-") as copy:
                copy_store(self.local_path, Path(copy))
                with self._local_store(Path(copy), name, 0) as store:
                    yield store
            return
        timeout = self.lock_timeout_s if lock_timeout_s is None else lock_timeout_s
        with self._local_store(self.local_path, name, timeout) as store:
            yield store

    @contextlib.contextmanager
    def _server_store(self, collection: str) -> Iterator["Store"]:
        from qdrant_client import QdrantClient
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        from pstuts_pipeline.search.client_store import ClientStore

        store = ClientStore(
            QdrantClient(url=self.server_url, api_key=_secret(self.api_key) or None, timeout=self.timeout_s), collection
        )
        try:
            yield store
        except (ResponseHandlingException, UnexpectedResponse) as error:
            # "[Errno 111] Connection refused" alone does not say which server; the reply may echo the API key.
            where = strip_credentials(self.server_url or "")
            raise QdrantUnavailableError(f"Qdrant server at {where} (QDRANT_URL): {redact(str(error))}") from None
        finally:
            store.close()

    @contextlib.contextmanager
    def _local_store(self, folder: Path, collection: str, lock_timeout_s: float) -> Iterator["Store"]:
        from pstuts_pipeline.search.edge_store import EdgeStore

        where = f"local Qdrant folder {folder} (PSTUTS_QDRANT_PATH)"
        try:
            store = EdgeStore(folder, collection, lock_timeout_s)
        except Timeout:
            raise  # another user holds the collection: its message names the lock file
        except OSError as error:
            raise QdrantStorageError(f"{where}: cannot be opened for writing: {error}") from None
        except Exception as error:
            if type(error) is not Exception:
                raise  # the store's own errors (a local-mode folder) already say what to do
            # The engine raises bare Exceptions ("Service runtime error: ..."), which do not name the folder.
            raise QdrantStorageError(f"{where}: {error}") from None
        try:
            yield store
        finally:
            store.close()


def copy_store(folder: Path, target: Path) -> None:
    """A private copy of a local folder that this process may open (the folder's owner writes it, not us)."""
    # Plain copies, owner-writable: copied permission bits would keep the copy read-only too. Lock files stay behind.
    shutil.copytree(
        folder, target, copy_function=shutil.copyfile, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.lock")
    )
    for path in [target, *target.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)


class QdrantUnavailableError(RuntimeError):
    """The Qdrant server could not be reached or refused a request; names the server (retried by Dagster)."""


class QdrantStorageError(RuntimeError):
    """The local Qdrant folder could not be written or read; names the folder."""


class ChatModelResource(dg.ConfigurableResource):
    """The chat model that words answers; separate from the embeddings' server. No model = extractive answers."""

    model: str = Field(default="", description="Model name on the server (empty = offline extractive answers).")
    base_url: str | None = Field(default=None, description="An OpenAI-compatible server (empty = OpenAI's API).")
    api_key: str | None = Field(default=None, description="The server's key (local servers need none).")
    timeout_s: float = Field(default=60.0, description="Seconds to wait for one answer.")
    max_tokens: int = Field(default=120, description="Longest answer, in tokens.")
    json_schema: bool = Field(default=True, description="Ask for a JSON-schema reply whose moment must be retrieved.")

    def settings(self) -> ChatSettings:
        return ChatSettings(
            self.model,
            _secret(self.base_url) or None,
            _secret(self.api_key) or None,
            self.timeout_s,
            self.max_tokens,
            self.json_schema,
        )


RESOURCE_TYPES: dict[str, type[dg.ConfigurableResource]] = {
    "transcript_source": TranscriptSource,
    "embeddings": EmbeddingsResource,
    "reranker": RerankerResource,
    "chunker": ChunkerResource,
    "qdrant": QdrantResource,
    "chat_model": ChatModelResource,
}


def resources_from_env() -> dict[str, dg.ConfigurableResource]:
    """Every resource, configured from the environment variables in docs/configuration.md; secrets as dg.EnvVar.

    A secret given as dg.EnvVar shows in the UI as "from OPENAI_API_KEY" (its value never enters the run config).
    """
    return {
        name: RESOURCE_TYPES[name](
            **{key: dg.EnvVar(v.name) if isinstance(v, fields.EnvSecret) else v for key, v in values.items()}
        )
        for name, values in fields.resource_fields_from_env().items()
    }


def fingerprint_function(embeddings: EmbeddingsResource, chunker: ChunkerResource) -> Callable[[SourceVideo], str]:
    """How a video's fingerprint is computed now: what the collection stores beside its points and reconcile compares."""
    return fields.fingerprint_function(embeddings.model_dump(), chunker.model_dump())


def fields_of(resources: Mapping[str, object]) -> dict[str, dict[str, Any]]:
    """The fields the resources hold, as `resource_fields_from_env` gives them (what the no-op ingest reads)."""
    return {name: r.model_dump() for name, r in resources.items() if isinstance(r, dg.ConfigurableResource)}
