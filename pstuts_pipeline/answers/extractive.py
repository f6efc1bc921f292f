"""The offline answer: one sentence of the retrieved chunks, or two adjacent ones, that reads on its own.

Tutorials speak in steps: "Press Command+T to open Free Transform." is an answer; "As soon as you do that, a crop
border appears" is one only with the sentence before it, and "Alright, give Free Transform a try" is no answer at
all. So every sentence of the top chunks is scored by the question's words it shares, by whether it is an
instruction (an action on a named tool, menu or shortcut), and by the retriever's own choice; a sentence that
leans on the one before it ("that", "this", "it", "so" ...) is given with that sentence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an the to of in on for and or with how do i you we can what is are was be it this that my your me "
    "does did he she they use using get make way which where when why there here from by at as into".split()
)
# Words that point back to the previous sentence when they open one.
LEANING = frozenset("that this it these those they he she which".split())
FILLER = re.compile(r"^(?:(?:so|now|okay|ok|alright|all right|well|and|right|um|uh)\b[,.]?\s*)+", re.IGNORECASE)
ACTIONS = frozenset(
    "click choose select press hold drag open go grab pick set hit type use move tap double right duplicate add "
    "create turn apply fill paint draw crop rotate flip resize zoom save export enable check uncheck switch".split()
)
KEYS = r"(?:command|cmd|ctrl|control|shift|option|alt)"
SHORTCUT = re.compile(rf"\b{KEYS}\s*[+-]\s*\w|\b(?:hold|press)(?: down)? (?:the )?{KEYS}\b", re.IGNORECASE)
STEP_OPENING = re.compile(
    r"^(?:(?:then|first|next|now|just|simply|and|you can|you'll want to|let's|we'll|i'll)\s+)*", re.IGNORECASE
)
NAMED = re.compile(r"(?<!^)(?<![.!?] )\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")
PLACES = frozenset("menu panel tool tools layer layers filter window dialog bar options palette brush mask".split())
OUTRO = re.compile(r"\b(?:on your own|give it a try|give .{0,30} a try|thanks for|in this video|next video)\b", re.I)


@dataclass(frozen=True)
class Sentence:
    """A phrase of a retrieved chunk: where it starts, its words, which chunk and which phrase it is."""

    time: float
    text: str
    rank: int
    position: int


def stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def leans_back(text: str) -> bool:
    """True when the sentence opens with a word that refers to what came before, or its short opening clause holds
    one ("As soon as you do that, ...", "Once it's open, ...")."""
    opening = FILLER.sub("", text)
    words = _WORD.findall(opening.lower())
    if not words:
        return False
    clause = _WORD.findall(opening.split(",")[0].lower()) if "," in opening else []
    return words[0] in LEANING or (0 < len(clause) <= 7 and bool(set(clause) & {"that", "this", "it", "there"}))


def is_instruction(text: str) -> float:
    """How much a sentence reads as a step: an action verb, on a named tool, menu or shortcut."""
    words = set(_WORD.findall(text.lower()))
    opening = _WORD.findall(STEP_OPENING.sub("", FILLER.sub("", text)).lower())[:2]
    score = 0.0
    if set(opening) & ACTIONS:  # an imperative: "Then go up to the Edit menu", "Press Command+T"
        score += 1.0
    elif words & ACTIONS:
        score += 0.3
    if SHORTCUT.search(text):
        score += 1.0
    if NAMED.search(text) or words & PLACES:
        score += 0.5
    return score


def score(question: set[str], text: str, linked: bool, rank: int) -> float:
    """Shared words first, then being a step, then the retriever's choice and rank."""
    words = content_words(text)
    shared = len(question & words) / len(question) if question else 0.0
    length = len(text.split())
    value = 3.0 * shared + 0.6 * is_instruction(text) + (0.8 if linked else 0.0) - 0.5 * rank
    if length < 5:
        value -= 1.0
    if length > 45:
        value -= 0.5
    if OUTRO.search(text):
        value -= 2.0
    return value


def tidy(text: str) -> str:
    """Without the spoken filler it opens with ("Alright, so now ..."), capitalised."""
    stripped = FILLER.sub("", text).strip()
    return stripped[:1].upper() + stripped[1:] if stripped else text


def choose(
    question: str, chunks: Sequence[Sequence[tuple[float, str]]], linked: Sequence[str]
) -> tuple[str, float, int]:
    """(answer text, its moment, the chunk it is from): the best sentence, with the one before it if it leans back.

    `chunks` are the retrieved chunks' phrases as (begin, text), best chunk first; `linked` is each chunk's linked
    sentence, the retriever's pick.
    """
    asked = content_words(question)
    best: tuple[float, str, float, int] | None = None
    for rank, phrases in enumerate(chunks):
        spoken = [(t, p) for t, p in phrases if p.strip()]
        for i, (time, text) in enumerate(spoken):
            units = [(time, text)]
            if leans_back(text) and i > 0:
                units = [(spoken[i - 1][0], f"{spoken[i - 1][1]} {text}")]
            elif len(text.split()) < 6 and i + 1 < len(spoken):
                units.append((time, f"{text} {spoken[i + 1][1]}"))
            for start, unit in units:
                value = score(asked, unit, text == linked[rank], rank)
                if leans_back(unit):
                    value -= 1.5  # its referent is not in the chunk
                if best is None or value > best[0]:
                    best = (value, unit, start, rank)
    if best is None:
        return "", 0.0, 0
    return tidy(best[1]), best[2], best[3]
