"""Kamradt chunking with exact phrase boundaries, offset-based linking and token-window capping."""

from __future__ import annotations

import bisect
import collections
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pstuts_pipeline.chunking.time_repair import Phrase
from pstuts_pipeline.settings import ChunkingSettings
from pstuts_pipeline.settings.base import default

if TYPE_CHECKING:  # imported where used: planning an ingest reads ChunkerSettings and needs neither
    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import BreakpointThresholdType, SemanticChunker

PHRASE_SEPARATOR = "\n"
# The chunker splits the transcript into "sentences" with this regex: one per phrase, so that every chunk
# boundary is a phrase boundary and no phrase is ever cut in two.
PHRASE_SPLIT_REGEX = r"\n"
TokenCounter = Callable[[str], int]


class AlignmentError(ValueError):
    """The chunker returned text that cannot be found, in order, in the transcript it was given."""


@dataclass(frozen=True)
class ChunkerSettings:
    """SemanticChunker's knobs, plus our cap on chunk size and the floor below which a chunk is filler."""

    breakpoint_threshold_type: BreakpointThresholdType = default(ChunkingSettings, "breakpoint_threshold_type")
    breakpoint_threshold_amount: float | None = default(ChunkingSettings, "breakpoint_threshold_amount")
    buffer_size: int = default(ChunkingSettings, "buffer_size")
    max_tokens: int = 256
    min_tokens: int = default(ChunkingSettings, "min_chunk_tokens")

    @classmethod
    def from_settings(cls, settings: ChunkingSettings, window: int) -> ChunkerSettings:
        """The chunker's settings, its cap never above the embedder's input window."""
        cap = min(settings.max_chunk_tokens, window) if settings.max_chunk_tokens else window
        return cls(
            breakpoint_threshold_type=settings.breakpoint_threshold_type,
            breakpoint_threshold_amount=settings.breakpoint_threshold_amount,
            buffer_size=settings.buffer_size,
            max_tokens=cap,
            min_tokens=settings.min_chunk_tokens,
        )


@dataclass(frozen=True)
class TimedChunk:
    """A chunk made of whole phrases, with the phrases' ids and times."""

    index: int
    phrases: tuple[Phrase, ...]

    @property
    def text(self) -> str:
        return " ".join(p.text for p in self.phrases if p.text)

    @property
    def start(self) -> float:
        return self.phrases[0].begin

    @property
    def stop(self) -> float:
        return self.phrases[-1].end

    @property
    def sent_ids(self) -> list[int]:
        return [p.sent_id for p in self.phrases]

    @property
    def speech_start_stop_times(self) -> list[list[float]]:
        return [[p.begin, p.end] for p in self.phrases]

    def metadata(self) -> dict[str, object]:
        """The chunk's timing metadata, as stored beside its text everywhere."""
        return {
            "chunk_index": self.index,
            "start": self.start,
            "stop": self.stop,
            "sent_ids": self.sent_ids,
            "speech_start_stop_times": self.speech_start_stop_times,
            "phrase_char_spans": self.phrase_char_spans(),
        }

    def phrase_char_spans(self) -> list[list[int]]:
        """Where each phrase stands in `text`, so a reader can mark the sentence a link points at."""
        spans, cursor = [], 0
        for phrase in self.phrases:
            if not phrase.text:
                spans.append([cursor, cursor])
                continue
            if cursor:
                cursor += 1
            spans.append([cursor, cursor + len(phrase.text)])
            cursor += len(phrase.text)
        return spans


def full_transcript(phrases: Sequence[Phrase]) -> str:
    """The whole transcript, one phrase per line."""
    return PHRASE_SEPARATOR.join(p.text for p in phrases)


def make_chunker(embeddings: Embeddings, settings: ChunkerSettings) -> SemanticChunker:
    """A SemanticChunker that treats each phrase as one sentence."""
    from langchain_experimental.text_splitter import SemanticChunker

    return SemanticChunker(
        embeddings,
        buffer_size=settings.buffer_size,
        breakpoint_threshold_type=settings.breakpoint_threshold_type,
        breakpoint_threshold_amount=settings.breakpoint_threshold_amount,
        sentence_split_regex=PHRASE_SPLIT_REGEX,
    )


def transcript_lines(transcript: str) -> list[str]:
    """The non-empty phrases of a full transcript: what the chunker treats as sentences."""
    return [line for line in transcript.split(PHRASE_SEPARATOR) if line.strip()]


def chunker_windows(lines: Sequence[str], buffer_size: int) -> list[str]:
    """The texts SemanticChunker embeds for a transcript (each phrase with its neighbours), in order."""
    from langchain_experimental.text_splitter import combine_sentences

    if len(lines) <= 1:
        return list(lines)
    sentences = [{"sentence": line, "index": i} for i, line in enumerate(lines)]
    return [s["combined_sentence"] for s in combine_sentences(sentences, buffer_size)]


def semantic_chunks(chunker: SemanticChunker, transcript: str) -> list[str]:
    """Run the chunker over a full transcript, without its empty lines (they would become empty sentences)."""
    lines = transcript_lines(transcript)
    return chunker.split_text(PHRASE_SEPARATOR.join(lines)) if lines else []


def link_chunks_to_phrases(chunks: Sequence[str], phrases: Sequence[Phrase]) -> list[list[int]]:
    """Give each chunk the indices of the phrases it is made of, by character offsets.

    Chunks are matched in order against the transcript with whitespace ignored (the chunker rewrites the
    separators), and each phrase goes to the chunk that holds its first character: every phrase lands in
    exactly one chunk, in order, even if a chunker cut a phrase in two. Empty phrases follow the phrase
    before them.
    """
    text = full_transcript(phrases)
    positions = [i for i, ch in enumerate(text) if not ch.isspace()]
    compact = "".join(text[i] for i in positions)
    chunk_starts: list[int] = []
    cursor = 0
    for number, chunk in enumerate(chunks):
        piece = re.sub(r"\s+", "", chunk)
        if not piece:
            continue
        if not compact.startswith(piece, cursor):
            raise AlignmentError(f"chunk {number} ({chunk[:40]!r}...) is not the next text of the transcript")
        chunk_starts.append(positions[cursor])
        cursor += len(piece)
    if cursor != len(compact):
        raise AlignmentError(f"the chunks cover {cursor} of {len(compact)} characters of the transcript")
    groups: list[list[int]] = [[] for _ in chunk_starts]
    offset, current = 0, 0
    for i, phrase in enumerate(phrases):
        if phrase.text:
            current = bisect.bisect_right(chunk_starts, offset) - 1
        if groups:
            groups[max(current, 0)].append(i)
        offset += len(phrase.text) + len(PHRASE_SEPARATOR)
    return [g for g in groups if g]


def _split_oversize(group: list[int], counts: list[int], limit: int) -> list[list[int]]:
    """Cut a group at phrase boundaries into the fewest near-equal parts that each fit the limit."""
    total = sum(counts[i] for i in group)
    parts_wanted = max(1, math.ceil(total / limit))
    target = total / parts_wanted
    parts: list[list[int]] = [[]]
    size = 0
    for i in group:
        fits = size + counts[i] <= limit
        past_target = size >= target or size + counts[i] / 2 > target
        if parts[-1] and (not fits or past_target):
            parts.append([])
            size = 0
        parts[-1].append(i)
        size += counts[i]
    return parts


def cap_groups(groups: list[list[int]], counts: list[int], max_tokens: int, min_tokens: int) -> list[list[int]]:
    """Split chunks over `max_tokens` at phrase boundaries, then fold chunks under `min_tokens` into a neighbour.

    `counts` are per-phrase token counts without special tokens, and `max_tokens` is the budget for
    those (the caller subtracts the model's special tokens).
    """
    capped: list[list[int]] = []
    for group in groups:
        if sum(counts[i] for i in group) > max_tokens:
            capped.extend(_split_oversize(group, counts, max_tokens))
        else:
            capped.append(list(group))
    merged: list[list[int]] = []
    sizes: list[int] = []
    # A filler chunk that the previous chunk cannot take waits here for the next one.
    pending: list[int] = []
    pending_size = 0
    for group in capped:
        size = sum(counts[i] for i in group)
        if pending:
            if pending_size + size <= max_tokens:
                group, size = pending + group, pending_size + size
            else:
                merged.append(pending)  # neither neighbour can take it
                sizes.append(pending_size)
            pending, pending_size = [], 0
        if size < min_tokens:
            if merged and sizes[-1] + size <= max_tokens:
                merged[-1].extend(group)
                sizes[-1] += size
            else:
                pending, pending_size = list(group), size
            continue
        merged.append(list(group))
        sizes.append(size)
    if pending:
        merged.append(pending)
    return merged


def _furthest_fitting_cut(text: str, cuts: Sequence[int], count_tokens: TokenCounter, limit: int) -> int | None:
    """The last of the ascending `cuts` whose prefix fits, found by bisection (prefix counts barely ever shrink)."""
    low, high, best = 0, len(cuts) - 1, None
    while low <= high:
        middle = (low + high) // 2
        if count_tokens(text[: cuts[middle]]) <= limit:
            best, low = cuts[middle], middle + 1
        else:
            high = middle - 1
    return best


# A piece is looked for in a head of the text this many characters per token of the limit long (English runs ~4),
# doubled while the whole head fits: each piece costs its own length, never that of the rest of the text.
HEAD_CHARS_PER_TOKEN = 8


def _fitting_head(text: str, count_tokens: TokenCounter, limit: int) -> str:
    """The shortest head of `text` (from HEAD_CHARS_PER_TOKEN per token, doubling) that no longer fits, or all of it."""
    size = max(limit, 1) * HEAD_CHARS_PER_TOKEN
    while size < len(text) and count_tokens(text[:size]) <= limit:
        size *= 2
    return text[:size]


def split_text_to_fit(text: str, count_tokens: TokenCounter, limit: int) -> list[str]:
    """Cut text into pieces that each fit: between words where possible, else inside a word.

    A word can exceed the window on its own: CJK text has no spaces, and a run of punctuation costs a
    token per character. Pieces cut between words join back with a space, pieces cut inside a word with
    nothing. Each cut is searched in a bounded head of the rest, so a long text costs time in proportion to
    its length, not to its square.
    """
    pieces: list[str] = []
    while text:
        head = _fitting_head(text, count_tokens, limit)
        if len(head) == len(text) and count_tokens(text) <= limit:
            break
        spaces = [i for i, ch in enumerate(head) if ch == " "]
        cut = _furthest_fitting_cut(head, spaces, count_tokens, limit)
        if cut is not None:
            pieces.append(text[:cut])
            text = text[cut + 1 :]
            continue
        first_word_end = spaces[0] if spaces else len(head)
        cut = _furthest_fitting_cut(head, range(1, first_word_end), count_tokens, limit) or 1
        pieces.append(text[:cut])
        text = text[cut:]
    return [piece for piece in [*pieces, text] if piece]


def split_long_phrases(phrases: Sequence[Phrase], count_tokens: TokenCounter, max_tokens: int) -> list[Phrase]:
    """Cut any phrase that alone exceeds the window into pieces that fit, sharing its time span in order."""
    result: list[Phrase] = []
    for phrase in phrases:
        if count_tokens(phrase.text) <= max_tokens:
            result.append(phrase)
            continue
        pieces = split_text_to_fit(phrase.text, count_tokens, max_tokens)
        total_chars = sum(len(p) for p in pieces)
        duration, begin, done = phrase.end - phrase.begin, phrase.begin, 0
        for piece in pieces:
            done += len(piece)
            end = phrase.begin + duration * done / total_chars
            result.append(Phrase(phrase.sent_id, piece, begin, min(end, phrase.end)))
            begin = min(end, phrase.end)
    return result


def timed_chunks(
    chunks: Sequence[str],
    phrases: Sequence[Phrase],
    count_tokens: TokenCounter,
    settings: ChunkerSettings,
    special_tokens: int = 2,
) -> list[TimedChunk]:
    """Link Kamradt chunks to their phrases and bound them by the embedder's window."""
    budget = settings.max_tokens - special_tokens
    units: list[Phrase] = []
    unit_groups: list[list[int]] = []
    for group in link_chunks_to_phrases(chunks, phrases):
        unit_groups.append([])
        for piece in split_long_phrases([phrases[j] for j in group], count_tokens, budget):
            unit_groups[-1].append(len(units))
            units.append(piece)
    counts = [count_tokens(u.text) if u.text else 0 for u in units]
    capped = cap_groups(unit_groups, counts, budget, settings.min_tokens)
    fitted: list[list[int]] = []
    pending = collections.deque(capped)
    while pending:
        # Per-phrase counts add up exactly for WordPiece, but not for every tokenizer: check the joined text.
        group = pending.popleft()
        text = " ".join(units[i].text for i in group if units[i].text)
        if len(group) > 1 and count_tokens(text) > budget:
            half = len(group) // 2
            pending.extendleft([group[half:], group[:half]])
        else:
            fitted.append(group)
    return [TimedChunk(i, tuple(units[j] for j in group)) for i, group in enumerate(fitted)]
