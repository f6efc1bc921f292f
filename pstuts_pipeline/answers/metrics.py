"""Answer quality on PsTuts-VQA questions: do the words match the short answer, and does the cited moment land on it?

No Dagster: the questions come from `evaluation.load_questions`, the answers from `answering` over the search.
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from pstuts_pipeline.answers import SAMPLE_SEED, SAMPLE_SIZE, TOP_K, answering
from pstuts_pipeline.answers.answering import Answer, find_citations
from pstuts_pipeline.answers.chat import ChatSettings, chat_model
from pstuts_pipeline.search import retrieval
from pstuts_pipeline.search.evaluation import LINK_TOLERANCE_S, Question
from pstuts_pipeline.search.langchain_retriever import result_document

if TYPE_CHECKING:
    from pstuts_pipeline.search.store import Store

_ARTICLES = {"a", "an", "the"}


def sample_questions(questions: Sequence[Question], size: int = SAMPLE_SIZE, seed: int = SAMPLE_SEED) -> list[Question]:
    """A fixed sample, in file order, so runs with different models answer the same questions."""
    if size <= 0 or size >= len(questions):
        return list(questions)
    return [questions[i] for i in sorted(random.Random(seed).sample(range(len(questions)), size))]


def answer_tokens(text: str) -> list[str]:
    """Lower-cased words without articles or cited moments; PsTuts' "Layers Panel#Opacity Slider" splits at '#'."""
    for written, _, _ in find_citations(text):
        text = text.replace(written, " ")
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _ARTICLES]


def token_f1(answer: str, gold: str) -> float:
    """SQuAD's token F1 between an answer and the short reference answer."""
    ours, theirs = answer_tokens(answer), answer_tokens(gold)
    common = sum((Counter(ours) & Counter(theirs)).values())
    if not ours or not theirs or not common:
        return float(ours == theirs)
    precision, recall = common / len(ours), common / len(theirs)
    return 2 * precision * recall / (precision + recall)


def exact_match(answer: str, gold: str) -> float:
    """1 when the answer's words are exactly the reference's (SQuAD normalisation)."""
    return float(answer_tokens(answer) == answer_tokens(gold))


def link_at_1(question: Question, answer: Answer, tolerance: float = LINK_TOLERANCE_S) -> float:
    """1 when the first cited moment is in the question's video within `tolerance` s of the answer's begin."""
    if not answer.citations:
        return 0.0
    first = answer.citations[0]
    return float(first.video_id == question.video_id and abs(first.time - question.begin) <= tolerance)


def summarize(
    questions: Sequence[Question], answers: Sequence[Answer], search_seconds: float = 0.0
) -> dict[str, float]:
    """token_f1, exact_match, citation_link@1, invented_citation_rate, seconds_per_answer and more, as floats.

    `search_seconds` is the retrieval time of all questions together (searched in one batch), shared out.
    """
    if len(questions) != len(answers):
        raise ValueError(f"{len(questions)} questions but {len(answers)} answers")
    n = len(answers) or 1
    proposed = sum(a.proposed_citations for a in answers)
    return {
        "answers": float(len(answers)),
        "token_f1": sum(token_f1(a.answer, q.answer) for q, a in zip(questions, answers)) / n,
        "exact_match": sum(exact_match(a.answer, q.answer) for q, a in zip(questions, answers)) / n,
        "citation_link@1": sum(link_at_1(q, a) for q, a in zip(questions, answers)) / n,
        "invented_citation_rate": sum(a.invented_citations for a in answers) / proposed if proposed else 0.0,
        "answers_with_invented_citation": sum(a.invented_citations > 0 for a in answers) / n,
        "answers_citing_nothing_retrieved": sum(bool(a.notes) for a in answers) / n,
        "fallbacks": float(sum(a.error is not None for a in answers)),
        "seconds_per_answer": (search_seconds + sum(a.seconds for a in answers)) / n,
        "median_answer_words": float(statistics.median(len(a.answer.split()) for a in answers)) if answers else 0.0,
    }


def answer_questions(
    store: Store,
    embeddings: Embeddings,
    model_id: str,
    questions: Sequence[Question],
    settings: ChatSettings,
    top_k: int = TOP_K,
) -> tuple[list[Answer], list[Answer] | None, float]:
    """(extractive answers, the chat model's answers or None without one, seconds of the batched search)."""
    started = time.perf_counter()
    ranked = retrieval.search_many(store, embeddings, model_id, [q.text for q in questions], top_k)
    search_seconds = time.perf_counter() - started
    documents = [[result_document(r) for r in results] for results in ranked]
    extractive = [answering.extractive_answer(q.text, d) for q, d in zip(questions, documents)]
    if not settings.enabled:
        return extractive, None, search_seconds
    llm = chat_model(settings)
    generated = []
    for question, docs in zip(questions, documents):
        started = time.perf_counter()
        answer = answering.generated_answer(question.text, docs, llm, settings)
        generated.append(replace(answer, seconds=time.perf_counter() - started))
    return extractive, generated, search_seconds
