"""The retrieval metrics on hand-made cases whose answers are known."""

import json
import math
from dataclasses import dataclass

import pytest

from pstuts_pipeline.search import evaluation
from pstuts_pipeline.search.evaluation import Judgement, Question, judge, summarize


@dataclass
class Hit:
    video_id: int
    start: float
    stop: float
    link_time: float


QUESTION = Question(video_id=7, sent_id=3, text="how do I crop?", begin=100.0, midpoint=104.0)


def test_hit_needs_the_answers_video_and_its_midpoint_inside_the_chunk():
    assert judge(QUESTION, [Hit(7, 90, 110, 95)]).hit_rank == 1
    assert judge(QUESTION, [Hit(8, 90, 110, 100)]).hit_rank is None  # another video, same times
    assert judge(QUESTION, [Hit(7, 105, 130, 105)]).hit_rank is None  # starts after the midpoint
    assert judge(QUESTION, [Hit(7, 60, 103.9, 100)]).hit_rank is None  # stops before it
    assert judge(QUESTION, [Hit(7, 104, 104, 104)]).hit_rank == 1  # both bounds inclusive
    assert judge(QUESTION, [Hit(8, 0, 999, 100), Hit(7, 0, 50, 0), Hit(7, 90, 110, 90)]).hit_rank == 3


def test_link_needs_the_answers_video_and_15_seconds_at_most_from_its_begin():
    assert judge(QUESTION, [Hit(7, 0, 50, 115.0)]).link_rank == 1  # exactly 15 s late
    assert judge(QUESTION, [Hit(7, 0, 50, 85.0)]).link_rank == 1  # exactly 15 s early
    assert judge(QUESTION, [Hit(7, 0, 50, 115.1)]).link_rank is None
    assert judge(QUESTION, [Hit(9, 0, 50, 100.0)]).link_rank is None
    # A chunk can hold the answer while its link misses it, and a neighbouring chunk can link well.
    judged = judge(QUESTION, [Hit(7, 60, 130, 60), Hit(7, 130, 160, 112)])
    assert (judged.hit_rank, judged.link_rank, judged.link_distance) == (1, 2, 40.0)


def test_summary_over_questions():
    judged = [
        Judgement(hit_rank=1, link_rank=1, link_distance=2.0),
        Judgement(hit_rank=4, link_rank=None, link_distance=30.0),
        Judgement(hit_rank=None, link_rank=2, link_distance=None),
        Judgement(hit_rank=None, link_rank=None, link_distance=None),
    ]
    m = summarize(judged)
    assert m["questions"] == 4
    assert (m["hit@1"], m["hit@3"], m["hit@5"], m["hit@10"]) == (0.25, 0.25, 0.5, 0.5)
    assert (m["link@1"], m["link@3"], m["link@5"], m["link@10"]) == (0.25, 0.5, 0.5, 0.5)
    assert m["mrr@10"] == pytest.approx((1 + 1 / 4) / 4)
    assert m["median_link_distance_s"] == 16.0


def test_mrr_ignores_hits_below_rank_10():
    assert summarize([Judgement(11, None, 1.0)])["mrr@10"] == 0.0
    assert summarize([Judgement(10, None, 1.0)])["mrr@10"] == pytest.approx(0.1)
    assert math.isnan(summarize([Judgement(None, None, None)])["median_link_distance_s"])


def test_evaluate_pairs_questions_with_their_results():
    questions = [QUESTION, Question(8, 1, "what is a mask?", begin=10.0, midpoint=12.0)]
    m = evaluation.evaluate(questions, [[Hit(7, 90, 110, 101)], [Hit(7, 0, 20, 10)]])
    assert (m["hit@1"], m["link@1"]) == (0.5, 0.5)
    with pytest.raises(ValueError, match="2 questions but 1 result lists"):
        evaluation.evaluate(questions, [[]])


def test_video_rank_is_the_first_result_from_the_answers_video_chunk_or_not():
    judged = judge(QUESTION, [Hit(8, 90, 110, 100), Hit(7, 0, 20, 5), Hit(7, 90, 110, 100)])
    assert (judged.video_rank, judged.hit_rank) == (2, 3)
    m = summarize(
        [judged, judge(QUESTION, [Hit(7, 0, 20, 5)]), judge(QUESTION, [Hit(9, 0, 1, 0)] * 5 + [Hit(7, 0, 1, 0)])]
    )
    assert (m["video@1"], m["video@5"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))


def test_questions_asked_of_several_videos_are_ambiguous_with_case_and_punctuation_folded():
    asked = [
        Question(1, 1, "What tool did he use?", 0.0, 1.0),
        Question(2, 4, "what tool did he use", 0.0, 1.0),  # same text, another video
        Question(1, 2, "How do I crop?", 0.0, 1.0),
        Question(1, 3, "how do i   CROP", 0.0, 1.0),  # same text, same video: still one video
        Question(3, 1, "What is a clipping mask?", 0.0, 1.0),
    ]
    assert evaluation.folded(" What-tool, did he_use?? ") == "what tool did he use"
    assert evaluation.unambiguous(asked) == [False, False, True, True, True]
    # Asked of a video outside the scored questions (e.g. a train video when scoring dev) counts too.
    other = [Question(9, 1, "What is a CLIPPING mask", 0.0, 1.0)]
    assert evaluation.unambiguous(asked[2:], other) == [True, True, False]


def test_evaluate_reports_the_same_metrics_on_the_unambiguous_questions():
    questions = [
        Question(1, 1, "What tool did he use?", begin=10.0, midpoint=12.0),
        Question(2, 1, "What tool did he use?", begin=10.0, midpoint=12.0),
        Question(1, 2, "How do I crop?", begin=50.0, midpoint=52.0),
    ]
    ranked = [[Hit(1, 0, 20, 10)], [Hit(1, 0, 20, 10)], [Hit(1, 40, 60, 50)]]  # the ambiguous pair cannot both win
    m = evaluation.evaluate(questions, ranked)
    assert (m["questions"], m["hit@1"], m["video@1"]) == (3, pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert (m["unambiguous_questions"], m["unambiguous_hit@1"], m["unambiguous_link@1"]) == (1, 1.0, 1.0)
    assert set(m) == {"questions", *summarize([]).keys()} | {f"unambiguous_{name}" for name in summarize([])}


def test_questions_take_raw_times_and_repaired_ones_when_null(tmp_path):
    record = {
        "video_id": 1,
        "title": "t",
        "url": "u",
        "transcripts": [
            {"sent_id": 0, "sent": "Open the file.", "begin": 1.0, "end": 3.0},
            {"sent_id": 1, "sent": "Choose Crop.", "begin": None, "end": 9.0},
            {"sent_id": 2, "sent": "Drag a handle.", "begin": 10.0, "end": 12.0},
        ],
        "qa": [{"sent_id": 2, "q": "how to resize?", "a": "drag"}, {"sent_id": 1, "q": "which tool?", "a": "Crop"}],
    }
    path = tmp_path / "qa.json"
    path.write_text(json.dumps([record]))
    questions = evaluation.load_questions([path])
    assert [(q.sent_id, q.begin, q.midpoint) for q in questions] == [(2, 10.0, 11.0), (1, 3.0, 6.0)]
    assert questions[0].text == "how to resize?" and questions[0].video_id == 1


def test_a_bad_qa_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"video_id": 1, "title": "t", "url": "u", "transcripts": []}]))
    with pytest.raises(ValueError, match="bad.json"):
        evaluation.load_questions([path])
