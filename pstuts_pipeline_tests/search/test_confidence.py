"""A result's confidence and the "no good match" verdict, and the one check of what counts as a question."""

import pytest

from pstuts_pipeline.search import confidence
from pstuts_pipeline.search.questions import QuestionError, checked_question, excerpt


def test_confidence_grows_with_the_match_and_falls_with_the_rank():
    base = confidence.probability(confidence.signals(0.5, 0.5, 1))
    assert 0 < base < 1
    assert confidence.probability(confidence.signals(0.8, 0.5, 1)) > base
    assert confidence.probability(confidence.signals(0.5, 1.0, 1)) > base
    assert confidence.probability(confidence.signals(0.5, 0.5, 3)) < base
    assert confidence.probability({}) == 0.0


class Found:
    def __init__(self, value: float) -> None:
        self.confidence = value


def test_the_first_result_alone_decides_whether_the_question_is_answered():
    assert confidence.answers_well([Found(0.2), Found(0.01)], 0.2)
    assert not confidence.answers_well([Found(0.19), Found(0.9)], 0.2)
    assert not confidence.answers_well([], 0.0)


def test_the_threshold_is_a_setting_from_0_to_1(monkeypatch):
    monkeypatch.delenv("PSTUTS_MIN_CONFIDENCE", raising=False)
    assert confidence.threshold() == confidence.MIN_CONFIDENCE
    monkeypatch.setenv("PSTUTS_MIN_CONFIDENCE", "0.3")
    assert confidence.threshold() == 0.3
    for bad in ("1.5", "-0.1", "nan", "high"):
        monkeypatch.setenv("PSTUTS_MIN_CONFIDENCE", bad)
        with pytest.raises(ValueError, match="PSTUTS_MIN_CONFIDENCE"):
            confidence.threshold()


@pytest.mark.parametrize("question", ["", "   ", "?!", "___", "-- ... --"])
def test_a_question_needs_a_letter_or_a_digit(question):
    with pytest.raises(QuestionError, match=r"needs at least one word \(a letter or digit\)"):
        checked_question(question)


def test_a_lone_surrogate_is_refused_by_position_and_words_pass_stripped():
    with pytest.raises(QuestionError, match="character 4 cannot be read"):
        checked_question("crop\ud800 it")
    assert checked_question("  How do I crop? ") == "How do I crop?"
    assert checked_question("Ctrl+T?") == "Ctrl+T?" and checked_question("2") == "2"


def test_an_error_quotes_only_a_short_escaped_excerpt():
    assert excerpt("?" * 100_000) == repr("?" * 40 + "...")
    assert excerpt("\x1b[2J") == "'\\x1b[2J'" and "\ud800" not in excerpt("a\ud800")
