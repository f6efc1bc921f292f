"""The openai provider: OpenAI's API or any OpenAI-compatible server, through langchain-openai."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from pstuts_pipeline.redaction import redact, strip_credentials
from pstuts_pipeline.settings import env

if TYPE_CHECKING:
    from pstuts_pipeline.embedding import EmbeddingSpec, TokenCounter

OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_WINDOW_TOKENS = 8191
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRIES = 6
# Client errors that a retry may cure; every other 4xx is refused at once.
RETRYABLE_CLIENT_STATUSES = (408, 409, 429)


class OpenAICompatibleProvider:
    """A remote model: nothing to load or preload, the key given by the caller (else OPENAI_API_KEY)."""

    name = "openai"

    def model_name(self, spec: EmbeddingSpec) -> str:
        return spec.model or OPENAI_DEFAULT_MODEL

    def model_id(self, spec: EmbeddingSpec) -> str:
        # Credentials in the URL are not part of the model: stripped, and a URL without any gives the id it always did.
        return f"openai:{self.model_name(spec)}@{strip_credentials(spec.base_url or 'api.openai.com')}"

    def load(self, spec: EmbeddingSpec, api_key: str | None = None) -> Embeddings:
        key = api_key or env("OPENAI_API_KEY")
        if not key:
            raise ProviderConfigError("the openai embeddings provider needs OPENAI_API_KEY in the environment")
        return _client(spec, key)

    def preload(self, spec: EmbeddingSpec) -> None:
        """Nothing to load ahead: the model runs on the server."""

    def token_counter(self, spec: EmbeddingSpec) -> TokenCounter:
        try:
            import tiktoken

            encoding = tiktoken.encoding_for_model(self.model_name(spec))
            return lambda text: len(encoding.encode(text))
        except Exception:  # noqa: BLE001 - tiktoken cannot fetch its tables offline
            # Every BPE token is at least one byte, so the byte count never undercounts.
            return lambda text: len(text.encode("utf-8"))

    def window(self, spec: EmbeddingSpec) -> tuple[int, int]:
        return OPENAI_WINDOW_TOKENS, 0


# One client per spec and key (a rotated key gets a new one), keyed by the key's digest, never the key.
_clients: dict[tuple[EmbeddingSpec, str], Embeddings] = {}


def _client(spec: EmbeddingSpec, key: str) -> Embeddings:
    cache_key = (spec, hashlib.sha256(key.encode()).hexdigest())
    if cache_key not in _clients:
        _clients[cache_key] = _new_client(spec, key)
    return _clients[cache_key]


def _new_client(spec: EmbeddingSpec, key: str) -> Embeddings:
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    # tiktoken downloads its encoding on first use, which fails offline; chunks are already capped to the
    # model's window by our own token count, so the client-side re-chunking is not needed.
    client = OpenAIEmbeddings(
        model=spec.model_name,
        base_url=spec.base_url,
        api_key=SecretStr(key),
        check_embedding_ctx_length=False,
        chunk_size=max(spec.batch_size, 16),
        max_retries=MAX_RETRIES,
    )
    where = strip_credentials(spec.base_url or OPENAI_DEFAULT_BASE_URL)
    return ProviderErrors(client, f"openai embeddings provider at {where}")


class ProviderConfigError(RuntimeError):
    """The provider cannot be used as configured (no key); names the setting to fix."""


class ProviderRefusedError(RuntimeError):
    """The embeddings server refused our credentials or our request; says which server, never the key.

    Not transient: a refused key or a malformed request stays refused, so the resource turns it into a
    Dagster Failure that forbids retries.
    """


class ProviderError(RuntimeError):
    """Any other provider error (rate limit, 5xx, network), redacted; Dagster's RetryPolicy may run the step again."""


class ProviderErrors(Embeddings):
    """Turns provider errors into one line naming the provider and server, with any secret the server echoed removed.

    A server may repeat the Authorization header in any error (a 400 as well as a 401): the original error,
    its message and its context must reach neither logs nor the event log, hence `from None` throughout.
    """

    def __init__(self, inner: Embeddings, where: str):
        self.inner = inner
        self.where = where

    def _guarded(self, call: Callable[[], list]) -> list:
        import openai

        try:
            return call()
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            refused = "refused" if error.status_code == 401 else "not allowed to use this model"
            raise ProviderRefusedError(
                f"{self.where}: the API key in OPENAI_API_KEY was {refused} (HTTP {error.status_code})"
            ) from None
        except openai.APIStatusError as error:
            message = f"{self.where}: HTTP {error.status_code}: {redact(str(error.message))[:300]}"
            if 400 <= error.status_code < 500 and error.status_code not in RETRYABLE_CLIENT_STATUSES:
                raise ProviderRefusedError(message) from None
            raise ProviderError(message) from None
        except Exception as error:  # noqa: BLE001 - connection errors and the like: their text may hold a key too
            raise ProviderError(f"{self.where}: {type(error).__name__}: {redact(str(error))}") from None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._guarded(lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._guarded(lambda: self.inner.embed_query(text))
