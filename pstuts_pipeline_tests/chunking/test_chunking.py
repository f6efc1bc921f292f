"""Property tests of alignment and chunk capping on adversarial transcripts, counted with the real tokenizer."""

import re

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.chunking import validation
from pstuts_pipeline.chunking.chunker import ChunkerSettings, TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase, repair_times
from pstuts_pipeline.embedding import EmbeddingSpec, token_counter, window_tokens
from pstuts_pipeline.sources import normalize_text
from pstuts_pipeline.sources.pstuts_json import raw_phrases

COUNT = token_counter(EmbeddingSpec())
WINDOW, SPECIAL = window_tokens(EmbeddingSpec())
WORDS = [
    "Okay.",
    "So",
    "let's",
    "open",
    "the",
    "Layers",
    "panel.",
    "Now,",
    "I'll",
    "drag",
    "it!",
    "Right?",
    "e.g.",
    "3.5",
    "...",
]
LONG = st.one_of(
    st.integers(60, 400).map(lambda n: " ".join(["layer"] * n)),  # many words
    st.integers(100, 400).map(lambda n: "!" * n),  # one "word" of one token per character
    st.integers(100, 300).map(lambda n: "漢字" * n),  # CJK: no spaces, one token per character
    st.integers(20, 120).map(lambda n: "Click here. Then drag! " * n),
)
TEXT = st.one_of(
    st.sampled_from(
        ["Okay.", "Okay.", "Um.", "Now click OK. Then drag it! Done? Yes.", "Let's open the Layers panel."]
    ),
    st.sampled_from(["", " ", "\t \n", "\u3000"]),  # empty and whitespace-only phrases
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30),  # any unicode
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
    LONG,
)
TIME = st.one_of(st.none(), st.floats(0, 600, allow_nan=False))
CAPS = st.sampled_from([24, 64, WINDOW])  # small windows make capping and filler-folding frequent


@st.composite
def messy_transcripts(draw: st.DrawFn) -> list[Phrase]:
    """A transcript as repair_times hands it to the chunker, from raw phrases with any text and any times."""
    texts = draw(
        st.one_of(
            st.lists(TEXT, min_size=1, max_size=30),
            st.integers(1, 30).map(lambda n: ["Okay."] * n),
        )
    )
    assume(any(normalize_text(t) for t in texts))  # validate_record refuses a video of empty phrases only
    raw = [{"sent_id": 10 * i, "sent": t, "begin": draw(TIME), "end": draw(TIME)} for i, t in enumerate(texts)]
    return repair_times(raw_phrases(raw))[0]


def phrase_partition(phrases: list[Phrase], cuts: set[int], separator: str) -> list[str]:
    """Chunk texts as any chunker cutting between phrases could return them."""
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(phrases)), len(phrases)]
    return [separator.join(p.text for p in phrases[a:b]) for a, b in zip(bounds, bounds[1:])]


def character_partition(phrases: list[Phrase], cuts: set[int]) -> list[str]:
    """Chunk texts cut anywhere, even inside a phrase or a word."""
    text = chunking.full_transcript(phrases)
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(text)), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


def assert_sound_chunks(phrases: list[Phrase], chunks: list[TimedChunk], cap: int) -> None:
    """Every invariant a video's chunks must hold, asserted directly and through validation's checks."""
    budget = cap - SPECIAL
    assert [c.index for c in chunks] == list(range(len(chunks)))
    # Every phrase exactly once, in order; a phrase over the window is cut into pieces in consecutive chunks.
    units = [p for c in chunks for p in c.phrases]
    assert all(c.phrases for c in chunks)
    for phrase in phrases:
        pieces = [u for u in units if u.sent_id == phrase.sent_id]
        assert compact("".join(u.text for u in pieces)) == compact(phrase.text)
        assert pieces and all(phrase.begin <= u.begin <= u.end <= phrase.end for u in pieces)
    ids = [u.sent_id for u in units]
    assert [s for i, s in enumerate(ids) if i == 0 or ids[i - 1] != s] == [p.sent_id for p in phrases]
    # A chunk's text is exactly its phrases' text.
    for chunk in chunks:
        assert chunk.text == " ".join(u.text for u in chunk.phrases if u.text)
        for unit, (a, b) in zip(chunk.phrases, chunk.phrase_char_spans()):
            assert chunk.text[a:b] == unit.text
    assert compact("".join(c.text for c in chunks)) == compact(chunking.full_transcript(phrases))
    # Within the window, with times ordered and bounded.
    previous_start = 0.0
    for chunk in chunks:
        assert COUNT(chunk.text) <= budget
        assert previous_start <= chunk.start <= chunk.stop
        assert all(chunk.start <= u.begin <= u.end <= chunk.stop for u in chunk.phrases)
        previous_start = chunk.start
    # No lone filler chunk where a neighbour could take it.
    for i, chunk in enumerate(chunks):
        if COUNT(chunk.text) < ChunkerSettings().min_tokens:
            for neighbour in (chunks[i - 1] if i else None, chunks[i + 1] if i + 1 < len(chunks) else None):
                if neighbour is not None:
                    assert COUNT(f"{neighbour.text} {chunk.text}") > budget, f"chunk {i} could join a neighbour"
    assert validation.linking_problems(phrases, chunks) == []
    assert validation.timing_problems(chunks) == []
    assert validation.window_problems(chunks, COUNT, cap, SPECIAL) == []


def _timed(chunk_texts: list[str], phrases: list[Phrase], cap: int) -> list[TimedChunk]:
    return chunking.timed_chunks(chunk_texts, phrases, COUNT, ChunkerSettings(max_tokens=cap), SPECIAL)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(
    phrases=messy_transcripts(), cap=CAPS, breakpoint=st.sampled_from(["percentile", "standard_deviation", "gradient"])
)
@example(phrases=[Phrase(0, "Okay.", 0.0, 1.0)], cap=WINDOW, breakpoint="percentile")
def test_semantic_chunker_output_is_linked_and_capped(phrases, cap, breakpoint, hash_embeddings):
    settings_ = ChunkerSettings(breakpoint_threshold_type=breakpoint, max_tokens=cap)
    texts = chunking.semantic_chunks(
        chunking.make_chunker(hash_embeddings, settings_), chunking.full_transcript(phrases)
    )
    assert_sound_chunks(phrases, _timed(texts, phrases, cap), cap)


@PROPERTY
@given(
    phrases=messy_transcripts(), cuts=st.sets(st.integers(0, 40)), sep=st.sampled_from([" ", "\n", "  \n "]), cap=CAPS
)
def test_any_partition_at_phrase_boundaries_is_linked_and_capped(phrases, cuts, sep, cap):
    assert_sound_chunks(phrases, _timed(phrase_partition(phrases, cuts, sep), phrases, cap), cap)


@PROPERTY
@given(phrases=messy_transcripts(), cuts=st.sets(st.integers(0, 4000), max_size=20), cap=CAPS)
def test_chunks_cut_inside_phrases_still_link_every_phrase_once(phrases, cuts, cap):
    assert_sound_chunks(phrases, _timed(character_partition(phrases, cuts), phrases, cap), cap)


@PROPERTY
@given(phrases=messy_transcripts(), cuts=st.sets(st.integers(0, 40)), sep=st.sampled_from([" ", "\n"]))
def test_linking_follows_a_phrase_partition_exactly(phrases, cuts, sep):
    groups = chunking.link_chunks_to_phrases(phrase_partition(phrases, cuts, sep), phrases)
    assert [i for g in groups for i in g] == list(range(len(phrases)))
    # Each spoken phrase is in the part the chunker put it in; an empty one follows the phrase before it.
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(phrases)), len(phrases)]
    part_of = [k for k, (a, b) in enumerate(zip(bounds, bounds[1:])) for _ in range(a, b)]
    spoken_parts = sorted({part_of[i] for i, p in enumerate(phrases) if p.text})
    expected: dict[int, list[int]] = {k: [] for k in spoken_parts}
    current = spoken_parts[0]
    for i, phrase in enumerate(phrases):
        current = part_of[i] if phrase.text else current
        expected[current].append(i)
    assert groups == [expected[k] for k in spoken_parts]


def test_repeated_phrases_link_in_order_not_by_first_match():
    phrases = [Phrase(i, "Okay.", float(i), i + 0.5) for i in range(6)]
    groups = chunking.link_chunks_to_phrases(["Okay. Okay.", "Okay.", "Okay. Okay. Okay."], phrases)
    assert groups == [[0, 1], [2], [3, 4, 5]]


def test_a_chunk_that_is_not_the_next_text_is_refused():
    phrases = [Phrase(0, "One.", 0, 1), Phrase(1, "Two.", 1, 2)]
    with pytest.raises(chunking.AlignmentError, match="chunk 1"):
        chunking.link_chunks_to_phrases(["One.", "Three."], phrases)
    with pytest.raises(chunking.AlignmentError, match="cover"):
        chunking.link_chunks_to_phrases(["One."], phrases)


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=8), min_size=1, max_size=12),
    max_tokens=st.integers(60, 120),
    min_tokens=st.integers(0, 20),
)
def test_cap_groups_keeps_order_bounds_size_and_folds_filler(sizes, max_tokens, min_tokens):
    counts = [c for group in sizes for c in group]
    groups, start = [], 0
    for group in sizes:
        groups.append(list(range(start, start + len(group))))
        start += len(group)
    capped = chunking.cap_groups(groups, counts, max_tokens, min_tokens)
    total = [sum(counts[i] for i in g) for g in capped]
    assert [i for g in capped for i in g] == list(range(len(counts)))
    assert all(g for g in capped) and all(t <= max_tokens for t in total)
    for i, size in enumerate(total):
        if size < min_tokens:
            for j in (i - 1, i + 1):
                if 0 <= j < len(total):
                    assert total[j] + size > max_tokens, f"group {i} ({size}) could join group {j} ({total[j]})"
    # A Kamradt chunk that already fits and is no filler is never cut.
    for group in groups:
        if min_tokens <= sum(counts[i] for i in group) <= max_tokens:
            assert any(set(group) <= set(g) for g in capped)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["Let's", "open", "the", "Layers", "panel."]), min_size=3, max_size=10).map(" ".join))
def test_fitting_kamradt_chunks_pass_through_unchanged(sentence):
    phrases = [Phrase(i, f"{sentence} and then step number {i}.", float(i), i + 1.0) for i in range(12)]
    texts = phrase_partition(phrases, {3, 4, 9}, "\n")
    chunks = _timed(texts, phrases, WINDOW)
    assert [c.sent_ids for c in chunks] == [[0, 1, 2], [3], [4, 5, 6, 7, 8], [9, 10, 11]]
    assert [c.text for c in chunks] == [t.replace("\n", " ") for t in texts]


def test_a_phrase_over_the_window_is_cut_into_pieces_that_share_its_span():
    long_text = " ".join(["Click the layer."] * 150) + " " + "漢" * 600 + " " + "!" * 700
    phrases = [Phrase(1, "Okay.", 0.0, 1.0), Phrase(2, long_text, 1.0, 301.0), Phrase(3, "Done.", 301.0, 302.0)]
    chunks = _timed([chunking.full_transcript(phrases)], phrases, WINDOW)
    assert len(chunks) > 4
    assert_sound_chunks(phrases, chunks, WINDOW)
