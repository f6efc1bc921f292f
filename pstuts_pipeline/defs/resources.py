"""Dagster resources: the embedding model, the Qdrant store, and the chunking settings."""

import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import dagster as dg
from filelock import Timeout
from langchain_core.embeddings import Embeddings

from pstuts_pipeline import embedding, settings
from pstuts_pipeline.answers.chat import ChatSettings
from pstuts_pipeline.chunking.chunker import ChunkerSettings
from pstuts_pipeline.redaction import has_credentials, redact, strip_credentials
from pstuts_pipeline.search import fingerprints, reranking
from pstuts_pipeline.search.context import ContextSettings
from pstuts_pipeline.settings import ChatSettings as ChatModelSettings
from pstuts_pipeline.settings import (
    ChunkingSettings,
    EmbeddingSettings,
    PathSettings,
    RerankerSettings,
    StoreSettings,
)
from pstuts_pipeline.settings.base import Settings, as_resource_field, is_secret, variable_set
from pstuts_pipeline.sources import SourceVideo
from pstuts_pipeline.training.reranker import resolve_reranker

if TYPE_CHECKING:  # imported when a client is made: it costs a second, which `pstuts ingest` with nothing to do saves
    from pstuts_pipeline.search.store import Store


def _revealed(value: Any) -> Any:
    """A field's value as code uses it: a secret held as dg.EnvVar is resolved (Dagster does so only inside runs)."""
    get_value = getattr(value, "get_value", None)
    return get_value() if callable(get_value) else value


class SettingsResource(dg.ConfigurableResource):
    """A resource whose fields are one settings model's (`SETTINGS`): built from it, and giving it back typed."""

    SETTINGS: ClassVar[type[Settings]]
    # Settings resolved when the resource is made, e.g. `latest` to its folder: every step of a run uses one version.
    RESOLVED: ClassVar[dict[str, Callable[[str], str]]] = {}

    @classmethod
    def from_settings(cls, values: Settings) -> "SettingsResource":
        """The resource holding these settings; a secret, or a URL with credentials, as dg.EnvVar of its variable.

        So the UI shows "from OPENAI_API_KEY", and the value never enters the run config.
        """
        fields: dict[str, Any] = {}
        for name in cls.model_fields:
            value = getattr(values, name)
            if name in cls.RESOLVED:
                value = cls.RESOLVED[name](value)
            info = type(values).model_fields[name]
            hidden = is_secret(info) or (isinstance(value, str) and has_credentials(value))
            variable = variable_set(type(values), name) if hidden and value else None
            fields[name] = dg.EnvVar(variable) if variable else value
        return cls(**fields)

    def typed(self) -> Any:
        """The settings model these fields hold, secrets resolved (for the domain, which takes typed settings)."""
        return self.SETTINGS.model_construct(
            **{name: _revealed(getattr(self, name)) for name in type(self).model_fields}
        )


class TranscriptSource(dg.ConfigurableResource):
    """The folder of video files (PsTuts-VQA JSON, SRT or WebVTT captions) that partitions are read from."""

    data_dir: str = as_resource_field(PathSettings, "data_dir", default="")

    def path(self) -> Path:
        return Path(self.data_dir) if self.data_dir else settings.paths().data_dir


class EmbeddingsResource(SettingsResource):
    """The embedding model shared by the chunker, the collection and search; loaded once per process."""

    SETTINGS = EmbeddingSettings
    RESOLVED = {"model": embedding.resolve_model}
    provider: str = as_resource_field(EmbeddingSettings, "provider")
    model: str = as_resource_field(EmbeddingSettings, "model")
    openai_base_url: str | None = as_resource_field(EmbeddingSettings, "openai_base_url")
    batch_size: int = as_resource_field(EmbeddingSettings, "batch_size")
    precision: str = as_resource_field(EmbeddingSettings, "precision")
    backend: str = as_resource_field(EmbeddingSettings, "backend", default=settings.DEFAULT_BACKEND)
    cache_dir: str | None = as_resource_field(EmbeddingSettings, "cache_dir")
    openai_api_key: str | None = as_resource_field(EmbeddingSettings, "openai_api_key")

    @functools.cached_property
    def spec(self) -> embedding.EmbeddingSpec:
        """Made once per resource: chunking measures every chunk (`count_tokens`) through it."""
        return embedding.EmbeddingSpec.from_settings(self.typed())

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    def cache_path(self) -> Path | None:
        return self.typed().cache_path()

    def get_embeddings(self) -> tuple[Embeddings, embedding.CountingEmbeddings]:
        """(cached embeddings to use, the counter of texts that actually reached the model)."""
        model, counter = embedding.cached_embeddings(self.spec, self.cache_path(), _revealed(self.openai_api_key))
        return DagsterFailures(model), counter

    def preload(self) -> None:
        """Start loading the local model in the background (it overlaps the steps that need no model)."""
        embedding.preload(self.spec)

    def query_embeddings(self, model: str | None = None) -> Embeddings:
        """The model for queries; `model` (a folder, `latest`, empty: bundled) swaps in another with these settings."""
        return DagsterFailures(embedding.load_embeddings(self.spec_for(model), _revealed(self.openai_api_key)))

    def spec_for(self, model: str | None) -> embedding.EmbeddingSpec:
        """This resource's spec, or the same settings with another model (e.g. base vs tuned)."""
        return self.spec if model is None else embedding.EmbeddingSpec.from_settings(self.typed(), model)

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


class RerankerResource(SettingsResource):
    """The cross-encoder that rescores search's best candidates (PSTUTS_RERANKER); search runs without it when unset."""

    SETTINGS = RerankerSettings
    RESOLVED = {"model": resolve_reranker}
    model: str = as_resource_field(RerankerSettings, "model")
    depth: int = as_resource_field(RerankerSettings, "depth")
    phrases: int = as_resource_field(RerankerSettings, "phrases")
    weight: float = as_resource_field(RerankerSettings, "weight")
    backend: str = as_resource_field(RerankerSettings, "backend")

    def get(self) -> reranking.Reranker | None:
        """The reranker, loaded once per process, or None when none is configured."""
        if not self.model:
            return None
        return reranking.load_reranker(
            self.model, reranking.RerankSettings(self.depth, self.phrases, self.weight), self.backend
        )


class ChunkerResource(SettingsResource):
    """How Kamradt chunks are cut and bounded."""

    SETTINGS = ChunkingSettings
    breakpoint_threshold_type: str = as_resource_field(ChunkingSettings, "breakpoint_threshold_type")
    breakpoint_threshold_amount: float | None = as_resource_field(ChunkingSettings, "breakpoint_threshold_amount")
    buffer_size: int = as_resource_field(ChunkingSettings, "buffer_size")
    max_chunk_tokens: int = as_resource_field(ChunkingSettings, "max_chunk_tokens")
    min_chunk_tokens: int = as_resource_field(ChunkingSettings, "min_chunk_tokens")
    context: str = as_resource_field(ChunkingSettings, "context")
    context_use: str = as_resource_field(ChunkingSettings, "context_use")

    def context_settings(self) -> ContextSettings:
        return ContextSettings.from_settings(self.typed())

    def fingerprint_context(self) -> ContextSettings | None:
        return fingerprints.counted_context(self.typed())

    def settings(self, window: int) -> ChunkerSettings:
        return ChunkerSettings.from_settings(self.typed(), window)


class QdrantResource(SettingsResource):
    """The collection in a local folder (Qdrant Edge, in-process) or on a Qdrant server (QDRANT_URL), opened while in use."""

    SETTINGS = StoreSettings
    path: str = as_resource_field(StoreSettings, "path")
    url: str | None = as_resource_field(StoreSettings, "url")
    api_key: str | None = as_resource_field(StoreSettings, "api_key")
    collection: str = as_resource_field(StoreSettings, "collection")
    timeout_s: int = as_resource_field(StoreSettings, "timeout_s")
    lock_timeout_s: float = as_resource_field(StoreSettings, "lock_timeout_s")

    @property
    def local_path(self) -> Path:
        return self.typed().folder()

    @property
    def server_url(self) -> str | None:
        """The server's URL, credentials included (a URL with them is held as dg.EnvVar), or None for local mode."""
        return _revealed(self.url) or None

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
        from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

        from pstuts_pipeline.search.client_store import ClientStore, connect

        store = None
        try:
            store = ClientStore(
                connect(self.server_url or "", _revealed(self.api_key) or None, self.timeout_s), collection
            )
            yield store
        except (ResponseHandlingException, UnexpectedResponse) as error:
            # "[Errno 111] Connection refused" alone does not say which server; the reply may echo the API key.
            where = strip_credentials(self.server_url or "")
            raise QdrantUnavailableError(f"Qdrant server at {where} (QDRANT_URL): {redact(str(error))}") from None
        finally:
            if store is not None:
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


class ChatModelResource(SettingsResource):
    """The chat model that words answers; separate from the embeddings' server. No model = extractive answers."""

    SETTINGS = ChatModelSettings
    model: str = as_resource_field(ChatModelSettings, "model")
    base_url: str | None = as_resource_field(ChatModelSettings, "base_url")
    api_key: str | None = as_resource_field(ChatModelSettings, "api_key")
    timeout_s: float = as_resource_field(ChatModelSettings, "timeout_s")
    max_tokens: int = as_resource_field(ChatModelSettings, "max_tokens")
    json_schema: bool = as_resource_field(ChatModelSettings, "json_schema")

    def settings(self) -> ChatSettings:
        return ChatSettings.from_settings(self.typed())


RESOURCE_TYPES: dict[str, type[dg.ConfigurableResource]] = {
    "transcript_source": TranscriptSource,
    "embeddings": EmbeddingsResource,
    "reranker": RerankerResource,
    "chunker": ChunkerResource,
    "qdrant": QdrantResource,
    "chat_model": ChatModelResource,
}


def resources_from_env(*names: str) -> dict[str, dg.ConfigurableResource]:
    """The resources `names` (every one when none), configured from the environment; secrets as dg.EnvVar.

    Only the named ones read their settings, so a command is stopped by a bad value of its own settings only.
    """
    made: dict[str, dg.ConfigurableResource] = {}
    for name in names or RESOURCE_TYPES:
        resource = RESOURCE_TYPES[name]
        if issubclass(resource, SettingsResource):
            made[name] = resource.from_settings(settings.load(resource.SETTINGS))
        else:
            made[name] = TranscriptSource(data_dir=str(settings.paths().data_dir))
    return made


def fingerprint_function(embeddings: EmbeddingsResource, chunker: ChunkerResource) -> Callable[[SourceVideo], str]:
    """How a video's fingerprint is computed now: what the collection stores beside its points and reconcile compares."""
    return fingerprints.fingerprint_function(embeddings.typed(), chunker.typed())
