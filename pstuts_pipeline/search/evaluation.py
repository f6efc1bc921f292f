"""Retrieval metrics on PsTuts-VQA questions: does search find the chunk, and does its link land on the answer?

Pure code: the questions come from PsTuts-VQA-format files, the results from any search that gives each
hit a video, a chunk span and a link time.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pstuts_pipeline.chunking.time_repair import repair_times
from pstuts_pipeline.sources import Catalog, load_catalog

KS = (1, 3, 5, 10)
MRR_DEPTH = 10
LINK_TOLERANCE_S = 15.0
VIDEO_KS = (1, 5)
UNAMBIGUOUS = "unambiguous"
_NOT_A_WORD = re.compile(r"[\W_]+")


class RetrievedChunk(Protocol):
    """What the metrics need of a search result (read only, so frozen dataclasses qualify)."""

    @property
    def video_id(self) -> int: ...
    @property
    def start(self) -> float: ...
    @property
    def stop(self) -> float: ...
    @property
    def link_time(self) -> float: ...


@dataclass(frozen=True)
class Question:
    """A question with where its answer is spoken (`begin` of the answer phrase, its midpoint) and PsTuts' answer."""

    video_id: int
    sent_id: int
    text: str
    begin: float
    midpoint: float
    answer: str = ""


@dataclass(frozen=True)
class Judgement:
    """Where, in one ranked list, the answer's chunk and a good link first appear (1-based; None = absent)."""

    hit_rank: int | None
    link_rank: int | None
    link_distance: float | None
    video_rank: int | None = None  # the first result from the answer's video


def questions_of(catalog: Catalog) -> list[Question]:
    """Every QA pair of a catalog, timed by the raw begin/end of its answer phrase (repaired times if null)."""
    questions = []
    for key in sorted(catalog.videos, key=int):
        video = catalog.videos[key]
        repaired = {p.sent_id: p for p in repair_times(video.phrases)[0]}
        by_id = {p.sent_id: p for p in video.phrases}
        for pair in video.qa:
            phrase = by_id[pair.sent_id]
            begin = phrase.begin if phrase.begin is not None else repaired[pair.sent_id].begin
            end = phrase.end if phrase.end is not None else repaired[pair.sent_id].end
            questions.append(
                Question(video.video_id, pair.sent_id, pair.question, float(begin), (begin + end) / 2, pair.answer)
            )
    return questions


def load_questions(files: Sequence[Path]) -> list[Question]:
    """The questions of PsTuts-VQA-format files; a file with invalid videos is refused, naming them."""
    catalog = load_catalog(list(files))
    if catalog.errors:
        raise ValueError("; ".join(str(e) for e in catalog.errors[:5]))
    return questions_of(catalog)


def judge(question: Question, results: Sequence[RetrievedChunk], tolerance: float = LINK_TOLERANCE_S) -> Judgement:
    """Rank of the first result holding the answer's midpoint, and of the first linking within `tolerance` of it."""
    hit_rank = link_rank = video_rank = None
    link_distance = None
    for rank, r in enumerate(results, 1):
        if r.video_id != question.video_id:
            continue
        if video_rank is None:
            video_rank = rank
        if hit_rank is None and r.start <= question.midpoint <= r.stop:
            hit_rank = rank
            link_distance = abs(r.link_time - question.begin)
        if link_rank is None and abs(r.link_time - question.begin) <= tolerance:
            link_rank = rank
    return Judgement(hit_rank, link_rank, link_distance, video_rank)


def summarize(judgements: Iterable[Judgement], ks: Sequence[int] = KS) -> dict[str, float]:
    """hit@k, link@k, video@1/5, mrr@10 (on hit) and the median link distance of the first hit, over all questions."""
    judged = list(judgements)
    n = len(judged) or 1
    metrics: dict[str, float] = {"questions": float(len(judged))}
    for k in ks:
        metrics[f"hit@{k}"] = sum(j.hit_rank is not None and j.hit_rank <= k for j in judged) / n
    for k in ks:
        metrics[f"link@{k}"] = sum(j.link_rank is not None and j.link_rank <= k for j in judged) / n
    for k in VIDEO_KS:
        metrics[f"video@{k}"] = sum(j.video_rank is not None and j.video_rank <= k for j in judged) / n
    metrics[f"mrr@{MRR_DEPTH}"] = (
        sum(1 / j.hit_rank for j in judged if j.hit_rank is not None and j.hit_rank <= MRR_DEPTH) / n
    )
    distances = [j.link_distance for j in judged if j.link_distance is not None]
    metrics["median_link_distance_s"] = statistics.median(distances) if distances else float("nan")
    return metrics


def folded(text: str) -> str:
    """A question's text with case and punctuation folded, to tell when two videos are asked the same thing."""
    return " ".join(_NOT_A_WORD.sub(" ", text.casefold()).split())


def folder_questions(folder: Path) -> list[Question]:
    """The questions of every valid video in a data folder: what is asked of the collection's videos."""
    return questions_of(load_catalog(sorted(Path(folder).glob("*.json"))))


def unambiguous(questions: Sequence[Question], asked: Sequence[Question] = ()) -> list[bool]:
    """For each question, whether its folded text is asked of one video only, among `questions` and `asked`.

    "What tool did he use?" asked of several videos has no single right video: a miss there is ambiguity, not
    retrieval. Pass as `asked` the questions of every video in the collection (e.g. train's when scoring dev).
    """
    videos: dict[str, set[int]] = {}
    for q in [*questions, *asked]:
        videos.setdefault(folded(q.text), set()).add(q.video_id)
    return [len(videos[folded(q.text)]) == 1 for q in questions]


def evaluate(
    questions: Sequence[Question],
    ranked: Sequence[Sequence[RetrievedChunk]],
    ks: Sequence[int] = KS,
    asked: Sequence[Question] = (),
) -> dict[str, float]:
    """The metrics for questions and their ranked results, in the same order; again on the unambiguous questions.

    The subset's metrics carry the prefix `unambiguous_` (its size: `unambiguous_questions`); see `unambiguous`.
    """
    if len(questions) != len(ranked):
        raise ValueError(f"{len(questions)} questions but {len(ranked)} result lists")
    judged = [judge(q, r) for q, r in zip(questions, ranked)]
    alone = [j for j, single in zip(judged, unambiguous(questions, asked), strict=True) if single]
    subset = {f"{UNAMBIGUOUS}_{name}": value for name, value in summarize(alone, ks).items()}
    return {**summarize(judged, ks), **subset}
