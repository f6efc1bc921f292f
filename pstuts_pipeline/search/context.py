"""Contextual chunks (Anthropic's contextual retrieval): a short text situating each chunk in its video, at ingest.

A chunk says "now drag it over here"; its video is about layer masks. The context is built from the video alone,
so a video's points never depend on the others: the title and description reduced to their content words, and/or
the key words of the neighbouring chunks (those frequent there and rare elsewhere in the video). It is prepended
to the chunk's text for the whole-chunk dense vector, the BM25 terms, or both; the phrase vectors, which rank and
link, stay as they are. Part of the fingerprint when on, so a change re-ingests.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pstuts_pipeline.search.lexical import stopwords
from pstuts_pipeline.settings import ChunkingSettings
from pstuts_pipeline.settings.base import default

SOURCES = ("", "title", "neighbours", "title+neighbours")
USES = ("dense", "bm25", "both")
# Words kept from each source: a short context leaves the chunk's own words the most weight.
TERMS = 8
_WORD = re.compile(r"[a-z][a-z0-9+'-]*[a-z0-9+]|[a-z]")
# Beyond the stop words: what every PsTuts title and description says ("learn how to use ... in Photoshop").
_BOILERPLATE = frozenset(
    {"learn", "use", "using", "photoshop", "adobe", "cc", "how", "video", "tutorial", "create", "make", "get"}
)


@functools.cache
def _stopwords() -> frozenset[str]:
    """The stop words and the boilerplate, read on first use (see `lexical.stopwords`)."""
    return stopwords() | _BOILERPLATE


@dataclass(frozen=True)
class ContextSettings:
    """Which situating context each chunk gets at ingest ('' = none) and which of its vectors use it."""

    source: str = default(ChunkingSettings, "context")
    use: str = default(ChunkingSettings, "context_use")
    terms: int = TERMS

    @classmethod
    def from_settings(cls, settings: ChunkingSettings) -> ContextSettings:
        return cls(source=settings.context, use=settings.context_use)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"PSTUTS_CHUNK_CONTEXT is {self.source!r}; choose one of {', '.join(SOURCES[1:])} or ''")
        if self.use not in USES:
            raise ValueError(f"PSTUTS_CHUNK_CONTEXT_USE is {self.use!r}; choose one of {', '.join(USES)}")

    @property
    def enabled(self) -> bool:
        return bool(self.source)

    @property
    def dense(self) -> bool:
        return self.enabled and self.use in ("dense", "both")

    @property
    def bm25(self) -> bool:
        return self.enabled and self.use in ("bm25", "both")


def content_words(text: str) -> list[str]:
    """Lower-cased words without stop words or tutorial boilerplate, in order, each once."""
    return list(dict.fromkeys(w for w in _WORD.findall(text.lower()) if w not in _stopwords()))


def video_context(title: str, desc: str, terms: int = TERMS) -> str:
    """The title and description reduced to their first `terms` content words."""
    return " ".join(content_words(f"{title}. {desc}")[:terms])


def neighbour_terms(texts: Sequence[str], index: int, terms: int = TERMS) -> list[str]:
    """Key words of the chunks beside `index` that it lacks: frequent there, in few of the video's chunks."""
    words = [Counter(w for w in _WORD.findall(t.lower()) if w not in _stopwords()) for t in texts]
    spread = Counter(w for counts in words for w in counts)
    own = words[index]
    beside: Counter[str] = Counter()
    for other in (index - 1, index + 1):
        if 0 <= other < len(texts):
            beside.update(words[other])
    scored = {w: n * math.log(1 + len(texts) / spread[w]) for w, n in beside.items() if w not in own}
    return sorted(scored, key=lambda w: (-scored[w], w))[:terms]


def chunk_contexts(title: str, desc: str, texts: Sequence[str], settings: ContextSettings) -> list[str]:
    """One situating context per chunk of a video, in order ('' for each when off)."""
    if not settings.enabled:
        return [""] * len(texts)
    head = video_context(title, desc, settings.terms) if "title" in settings.source else ""
    contexts = []
    for index in range(len(texts)):
        near = " ".join(neighbour_terms(texts, index, settings.terms)) if "neighbours" in settings.source else ""
        contexts.append(" ".join(part for part in (head, near) if part))
    return contexts


def contextual_text(context: str, text: str) -> str:
    """The chunk's text after its context, as embedded or indexed."""
    return f"{context}\n{text}" if context else text


def contextual_texts(title: str, desc: str, texts: Sequence[str], settings: ContextSettings) -> list[str]:
    """A video's chunk texts, each after its situating context (unchanged when the settings are off)."""
    contexts = chunk_contexts(title, desc, texts, settings)
    return [contextual_text(context, text) for context, text in zip(contexts, texts, strict=True)]


def dense_texts(title: str, desc: str, texts: Sequence[str], settings: ContextSettings) -> list[str]:
    """The texts a video's whole-chunk vectors are embedded from: with their context only when it is for dense."""
    return contextual_texts(title, desc, texts, settings) if settings.dense else list(texts)
