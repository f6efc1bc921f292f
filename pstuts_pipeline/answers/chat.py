"""The chat model that words answers: any OpenAI-compatible server through langchain-openai, configured apart from
the embeddings (users embed locally and chat remotely, or the other way round), with errors cut to one safe line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pstuts_pipeline.redaction import redact as redact_secrets
from pstuts_pipeline.redaction import strip_credentials
from pstuts_pipeline.settings import ChatSettings as ChatModelSettings
from pstuts_pipeline.settings.base import default

if TYPE_CHECKING:  # langchain-openai costs an import second; `pstuts ask` without a model never needs it
    from langchain_openai import ChatOpenAI


@dataclass(frozen=True)
class ChatSettings:
    """Which chat model answers, where it is served and how long we wait for it; no model = extractive answers."""

    model: str = default(ChatModelSettings, "model")
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = default(ChatModelSettings, "timeout_s")
    max_tokens: int = default(ChatModelSettings, "max_tokens")
    json_schema: bool = default(ChatModelSettings, "json_schema")
    max_retries: int = 1

    @classmethod
    def from_settings(cls, settings: ChatModelSettings) -> ChatSettings:
        return cls(
            settings.model,
            settings.base_url or None,
            settings.api_key or None,
            settings.timeout_s,
            settings.max_tokens,
            settings.json_schema,
        )

    @property
    def enabled(self) -> bool:
        return bool(self.model)

    @property
    def where(self) -> str:
        """The model and server, as errors name them (never the key)."""
        return f"chat model {self.model!r} at {strip_credentials(self.base_url or 'the OpenAI API')}"


class ChatError(Exception):
    """A chat request that gave no usable answer, in one line that names the server and never the key."""


def redact(text: str, key: str | None = None) -> str:
    """The text without the key in use or any configured or key-like secret: servers may quote the headers sent."""
    if key:
        text = text.replace(key, "[redacted]")
    return redact_secrets(text)


def chat_model(settings: ChatSettings) -> ChatOpenAI:
    """ChatOpenAI for the settings, deterministic (temperature 0) and short (max_tokens)."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url or None,
        # The openai client refuses to start without a key; local servers ignore it.
        api_key=SecretStr(settings.api_key or "no-key"),
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
        max_completion_tokens=settings.max_tokens,
        temperature=0.0,
    )


def describe_error(error: Exception, settings: ChatSettings) -> ChatError:
    """One line for a failed chat request: what happened and at which server; the server's words are redacted."""
    import openai

    if isinstance(error, ChatError):
        return error
    if isinstance(error, openai.APITimeoutError):
        what = f"no answer within {settings.timeout_s:g} s"
    elif isinstance(error, openai.APIConnectionError):
        what = "cannot connect"
    elif isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError)):
        what = f"refused the API key (HTTP {error.status_code})"
    elif isinstance(error, openai.APIStatusError):
        message = error.message if isinstance(error.message, str) else ""
        what = f"HTTP {error.status_code}: {message}"
    else:
        what = f"{type(error).__name__}: {error}"
    line = " ".join(redact(what, settings.api_key).split())[:300]
    return ChatError(f"{settings.where}: {line}")
