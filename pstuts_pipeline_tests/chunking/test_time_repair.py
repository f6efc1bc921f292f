"""Time repair: property tests of the documented rules, and their effect on the real PsTuts-VQA transcripts."""

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pstuts_pipeline.chunking.time_repair import repair_times
from pstuts_pipeline.sources import RawPhrase, normalize_text
from pstuts_pipeline.sources.pstuts_json import raw_phrases

KNOWN_TIME = st.one_of(st.floats(0, 900, allow_nan=False, allow_infinity=False), st.integers(0, 900))
TIME = st.one_of(st.none(), KNOWN_TIME)


@st.composite
def messy_phrases(draw: st.DrawFn) -> list[dict]:
    """Phrases with null, inverted, overlapping and backwards times, as a caption file may hold them."""
    texts = draw(
        st.lists(st.sampled_from(["Okay.", "", "  ", "So. Next, the Crop tool!", "漢字 é\tx"]), min_size=1, max_size=40)
    )
    return [{"sent_id": i, "sent": t, "begin": draw(TIME), "end": draw(TIME)} for i, t in enumerate(texts)]


@st.composite
def valid_phrases(draw: st.DrawFn) -> list[dict]:
    """Phrases whose times are already sound: known, begin <= end, never before the previous end."""
    steps = draw(st.lists(st.tuples(st.floats(0, 20), st.floats(0, 20)), min_size=1, max_size=40))
    phrases, clock = [], 0.0
    for i, (gap, duration) in enumerate(steps):
        begin = clock + gap
        clock = begin + duration
        phrases.append({"sent_id": i, "sent": f"phrase {i}.", "begin": begin, "end": clock})
    return phrases


def _changed(raw: object, repaired: float) -> bool:
    return raw is None or float(raw) != repaired


@settings(max_examples=400, deadline=None)
@given(messy_phrases())
@example([{"sent_id": 0, "sent": "Okay.", "begin": None, "end": None}])
@example([{"sent_id": 0, "sent": "a", "begin": 5, "end": 3}, {"sent_id": 1, "sent": "b", "begin": 1, "end": 2}])
def test_repaired_spans_are_ordered_and_never_overlap(raw):
    phrases, repairs = repair_times(raw_phrases(raw))
    assert [p.sent_id for p in phrases] == [r["sent_id"] for r in raw]
    assert [p.text for p in phrases] == [normalize_text(r["sent"]) for r in raw]
    previous_end = 0.0
    for phrase in phrases:
        assert math.isfinite(phrase.begin) and math.isfinite(phrase.end)
        assert previous_end <= phrase.begin <= phrase.end
        previous_end = phrase.end
    # Repairs only reuse times the transcript holds (or 0): no time is invented.
    known = [float(r[k]) for r in raw for k in ("begin", "end") if r[k] is not None]
    assert all(p.end <= max(known, default=0.0) for p in phrases)


@settings(max_examples=400, deadline=None)
@given(messy_phrases())
def test_repair_counts_match_the_times_that_changed(raw):
    phrases, repairs = repair_times(raw_phrases(raw))
    assert repairs.begin_filled == sum(r["begin"] is None for r in raw)
    assert repairs.end_filled == sum(r["end"] is None for r in raw)
    assert repairs.begin_filled + repairs.begin_moved_forward == sum(
        _changed(r["begin"], p.begin) for r, p in zip(raw, phrases)
    )
    assert repairs.end_filled + repairs.end_before_begin == sum(_changed(r["end"], p.end) for r, p in zip(raw, phrases))
    assert repairs.total == sum(repairs.as_dict().values())


@settings(max_examples=200, deadline=None)
@given(messy_phrases())
def test_a_known_time_is_kept_whenever_it_is_consistent(raw):
    phrases, _ = repair_times(raw_phrases(raw))
    previous_end = 0.0
    for r, p in zip(raw, phrases):
        if r["begin"] is not None and r["begin"] >= previous_end:
            assert p.begin == r["begin"]
        if r["end"] is not None and r["end"] >= p.begin:
            assert p.end == r["end"]
        previous_end = p.end


@settings(max_examples=200, deadline=None)
@given(valid_phrases())
def test_sound_times_are_left_untouched(raw):
    phrases, repairs = repair_times(raw_phrases(raw))
    assert [(p.begin, p.end) for p in phrases] == [(r["begin"], r["end"]) for r in raw]
    assert repairs.total == 0


@settings(max_examples=200, deadline=None)
@given(messy_phrases())
def test_repair_is_idempotent(raw):
    phrases, _ = repair_times(raw_phrases(raw))
    again, repairs = repair_times([RawPhrase(p.sent_id, p.text, p.begin, p.end) for p in phrases])
    assert again == phrases and repairs.total == 0


def test_each_documented_rule():
    raw = [
        {"sent_id": 0, "sent": "first", "begin": None, "end": 2.0},  # rule 1: the first phrase begins at 0
        {"sent_id": 1, "sent": "second", "begin": None, "end": 3.0},  # rule 1: the previous phrase's end
        {"sent_id": 2, "sent": "third", "begin": 2.5, "end": 4.0},  # rule 2: overlaps, moves to 3.0
        {"sent_id": 3, "sent": "fourth", "begin": 4.5, "end": None},  # rule 3: the next known time
        {"sent_id": 4, "sent": "fifth", "begin": 6.0, "end": 5.0},  # rule 4: inverted, like a missing end
        {"sent_id": 5, "sent": "sixth", "begin": 7.0, "end": None},  # rule 3: nothing known after: its begin
    ]
    phrases, repairs = repair_times(raw_phrases(raw))
    assert [(p.begin, p.end) for p in phrases] == [(0, 2), (2, 3), (3, 4), (4.5, 6), (6, 7), (7, 7)]
    assert repairs.as_dict() == {"begin_filled": 2, "end_filled": 2, "end_before_begin": 1, "begin_moved_forward": 1}


def test_real_transcripts_repair_to_sound_spans(pstuts_catalog):
    """PsTuts-VQA holds null, inverted and overlapping times; after repair every video is sound."""
    nulls = repaired_videos = 0
    for video in pstuts_catalog.videos.values():
        phrases, repairs = repair_times(video.phrases)
        nulls += sum(t is None for r in video.phrases for t in (r.begin, r.end))
        repaired_videos += repairs.total > 0
        previous_end = 0.0
        for p in phrases:
            assert previous_end <= p.begin <= p.end
            previous_end = p.end
        assert repairs.begin_filled + repairs.end_filled == sum(
            t is None for r in video.phrases for t in (r.begin, r.end)
        )
    assert nulls > 0 and repaired_videos > 1
