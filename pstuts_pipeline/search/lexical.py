"""BM25 as Qdrant sparse vectors: documents carry saturated term frequencies, Qdrant applies the IDF."""

from __future__ import annotations

import functools
import re
import zlib
from collections import Counter

import Stemmer

K1 = 1.2
# Weak length normalisation: a long chunk is long because the tutor talks through several steps, not because
# it repeats a term (measured on train questions: b=0.3 beat 0.75).
B = 0.3
# Typical content terms per chunk on PsTuts; a fixed value keeps each video's vectors independent of the others.
AVERAGE_DOCUMENT_TOKENS = 60
_TOKEN = re.compile(r"[a-z0-9]+")


@functools.cache
def stopwords() -> frozenset[str]:
    """bm25s' larger English list: it drops question words ("how", "did", "he") that match narration by accident.

    Read on first use: importing bm25s imports scipy, which a no-op ingest (it imports this module) never needs.
    """
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lower-cased, stop-word-free, Snowball-stemmed terms ('layers' and 'layer', 'selection' and 'select')."""
    return _stemmer().stemWords([t for t in _TOKEN.findall(text.lower()) if t not in stopwords()])


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


def term_share(question: str, texts: list[str]) -> list[float]:
    """For each text, the share of the question's terms it contains."""
    terms = set(tokenize(question))
    if not terms:
        return [0.0] * len(texts)
    return [len(terms & set(tokenize(t))) / len(terms) for t in texts]
