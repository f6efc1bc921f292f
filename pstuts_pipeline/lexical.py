"""BM25 as Qdrant sparse vectors: documents carry saturated term frequencies, Qdrant applies the IDF."""

from __future__ import annotations

import re
import zlib
from collections import Counter

from bm25s.stopwords import STOPWORDS_EN

K1 = 1.2
B = 0.75
# Typical chunk length in tokens on PsTuts; a fixed value keeps each video's vectors independent of the others.
AVERAGE_DOCUMENT_TOKENS = 120
_STOPWORDS = frozenset(STOPWORDS_EN)
_TOKEN = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    """A light English suffix stripper, enough to match 'layers' with 'layer' and 'selected' with 'select'."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokenize(text: str) -> list[str]:
    """Lower-cased, stop-word-free, lightly stemmed terms."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def term_index(term: str) -> int:
    """A stable index for a term (the same in every process and run)."""
    return zlib.crc32(term.encode("utf-8"))


def document_vector(text: str) -> tuple[list[int], list[float]]:
    """BM25 term weights of a document, without IDF."""
    counts = Counter(tokenize(text))
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVERAGE_DOCUMENT_TOKENS)
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        weights[term_index(term)] = weights.get(term_index(term), 0.0) + tf * (K1 + 1) / (tf + norm)
    return list(weights), list(weights.values())


def query_vector(text: str) -> tuple[list[int], list[float]]:
    """Each distinct query term once; Qdrant multiplies by the term's IDF."""
    indices = sorted({term_index(t) for t in tokenize(text)})
    return indices, [1.0] * len(indices)
