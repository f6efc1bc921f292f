"""Training the cross-encoder reranker on PsTuts-VQA questions into a versioned folder with its card (no Dagster).

The reranker reads a question and one phrase together. It is trained to prefer the answer phrase over phrases of
other videos that the first stage (dense cosine plus BM25, standardised and weighted as search fuses them) ranks
high for the question: finding the right video is what search misses most.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pstuts_pipeline.embedding import versions
from pstuts_pipeline.search import lexical
from pstuts_pipeline.settings import paths
from pstuts_pipeline.training import skeleton, tuning

EVALUATOR_NAME = "pstuts-dev-rerank"
# Dev metrics kept in the card, by their short name, from CrossEncoderRerankingEvaluator's keys.
CARD_METRICS = ("map", "mrr@10", "ndcg@10")
HOW_TO_TRAIN = "run `pstuts tune-reranker` first (PSTUTS_RERANKER=latest)"


@dataclass(frozen=True)
class RerankerSettings:
    """How the reranker is trained; recorded in the card so a version can be reproduced."""

    epochs: float = 1.0
    batch_size: int = 32  # questions per step, each with its positive and `negatives` hard negatives
    # 0: no cap, train for `epochs`. One epoch over all questions is 336 steps, about 27 min on 2 idle cores;
    # 220 steps took 1,078 s there and beat 79 steps on 2,500 questions (dev MRR@10 0.513 vs 0.488).
    max_steps: int = 220
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    max_length: int = 64  # tokens of question and phrase together; phrases are short
    max_questions: int = 0  # distinct training questions drawn from (0: all); the step cap bounds the time
    negatives: int = 3  # hard negatives per question
    negatives_top_k: int = 20  # drawn at random from the phrases of other videos the first stage ranks this high
    # Other questions' positives also shown as negatives; at least 1 (the loss cannot sample none).
    in_batch_negatives: int = 1
    dev_questions: int = 150  # dev questions (with the first stage's top 10 other-video phrases) checked while training
    eval_steps: int = 0  # 0: evaluate on dev before and after training only
    # bfloat16 autocast: on this AVX512-BF16 CPU without AMX a training step took 2.5x as long as float32 (measured).
    bf16: bool = False
    threads: int = 1  # see TuningSettings.threads: one thread wins on a shared CPU
    seed: int = 42


@dataclass(frozen=True)
class RerankerResult:
    """Where the new reranker is and what its card says."""

    folder: Path
    card: dict[str, Any]


def resolve_reranker(value: str) -> str:
    """PSTUTS_RERANKER as a folder: `latest` means the newest trained version, anything else is kept."""
    return versions.resolve(value, lambda: paths().rerankers_dir, HOW_TO_TRAIN)


def _standardised(scores: np.ndarray) -> np.ndarray:
    """Each row to zero mean and unit spread, as search standardises each ranking over its candidates."""
    spread = scores.std(axis=1, keepdims=True)
    return (scores - scores.mean(axis=1, keepdims=True)) / np.where(spread > 0, spread, 1.0)


def bm25_scores(questions: list[str], texts: list[str]) -> np.ndarray:
    """BM25 of each text for each question, with the IDF over `texts` that Qdrant's IDF modifier uses."""
    columns: dict[int, int] = {}
    rows = []
    for text in texts:
        indices, values = lexical.document_vector(text)
        rows.append({columns.setdefault(i, len(columns)): v for i, v in zip(indices, values, strict=True)})
    weights = np.zeros((len(texts), len(columns)), dtype=np.float32)
    for row, terms in enumerate(rows):
        weights[row, list(terms)] = list(terms.values())
    found = (weights > 0).sum(axis=0)
    idf = np.log1p((len(texts) - found + 0.5) / (found + 0.5))
    query = np.zeros((len(questions), len(columns)), dtype=np.float32)
    for row, question in enumerate(questions):
        for index in lexical.query_vector(question)[0]:
            if index in columns:
                query[row, columns[index]] = 1.0
    return (query * idf) @ weights.T


def first_stage_scores(encode: tuning.Encode) -> tuning.Score:
    """How the first stage ranks phrases: dense cosine plus weighted BM25, each standardised per question."""
    from pstuts_pipeline.search.retrieval import LEXICAL_WEIGHT

    def score(questions: list[str], texts: list[str]) -> np.ndarray:
        dense = encode(questions) @ encode(texts).T
        return _standardised(dense) + LEXICAL_WEIGHT * _standardised(bm25_scores(questions, texts))

    return score


def training_rows(split: tuning.Split, score: tuning.Score, settings: RerankerSettings) -> dict[str, list[str]]:
    """(anchor, positive, negative_1..n) columns: each distinct pair with hard negatives from other videos."""
    examples = tuning.distinct_examples(split)
    if 0 < settings.max_questions < len(examples):
        examples = random.Random(settings.seed).sample(examples, settings.max_questions)
    negatives = tuning.cross_video_negatives(
        examples, split.passages, score, settings.negatives_top_k, settings.seed, settings.negatives
    )
    rng = random.Random(settings.seed)
    columns: dict[str, list[str]] = {
        "anchor": [e.question for e in examples],
        "positive": [e.passage for e in examples],
    }
    for n in range(settings.negatives):
        # A question with fewer candidates than negatives repeats one of them (the loss needs full columns).
        columns[f"negative_{n + 1}"] = [chosen[n] if n < len(chosen) else rng.choice(chosen) for chosen in negatives]
    return columns


def dev_samples(split: tuning.Split, score: tuning.Score, settings: RerankerSettings) -> list[dict[str, Any]]:
    """Dev questions, each with its answer phrase and the first stage's top 10 phrases of other videos."""
    examples = tuning.distinct_examples(split)
    examples = random.Random(settings.seed).sample(examples, min(settings.dev_questions, len(examples)))
    candidates = tuning.cross_video_negatives(examples, split.passages, score, 10, settings.seed, 10)
    return [
        {"query": e.question, "positive": [e.passage], "documents": [e.passage, *chosen]}
        for e, chosen in zip(examples, candidates, strict=True)
    ]


def card_metrics(results: dict[str, float]) -> dict[str, float]:
    """The evaluator's metrics under short names (its keys carry the evaluator's name as a prefix)."""
    short = {}
    for key, value in results.items():
        name = key.rsplit(f"{EVALUATOR_NAME}_", 1)[-1]
        if name in CARD_METRICS:
            short[name] = round(float(value), 4)
    return short


def train(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    out_root: Path | None = None,
    settings: RerankerSettings = RerankerSettings(),
    base_model: Path | None = None,
    log: versions.Log = print,
) -> RerankerResult:
    """Train a cross-encoder from the base model on the training files' questions, validate on dev, write a version."""
    with skeleton.torch_threads(settings.threads):
        return _train(train_files, dev_files, out_root, settings, base_model, log)


def _train(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    out_root: Path | None,
    settings: RerankerSettings,
    base_model: Path | None,
    log: versions.Log,
) -> RerankerResult:
    started = time.perf_counter()
    base, train_split, dev_split = tuning.training_inputs(train_files, dev_files, base_model, 0)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderRerankingEvaluator
    from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss

    if len(train_split.video_ids) < 2:
        raise tuning.TuningDataError("the reranker learns to tell videos apart: give training files with 2+ videos")

    mining_started = time.perf_counter()
    encoder = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    score = first_stage_scores(functools.partial(encoder.encode, batch_size=128, normalize_embeddings=True))
    columns = training_rows(train_split, score, settings)
    samples = dev_samples(dev_split, score, settings)
    del encoder
    log(
        f"{len(columns['anchor'])} training questions with {settings.negatives} first-stage hard negatives each "
        f"from {len(train_split.video_ids)} videos, mined in {time.perf_counter() - mining_started:.0f}s; "
        f"dev: {len(samples)} questions x 11 phrases"
    )
    model = CrossEncoder(str(base), num_labels=1, max_length=settings.max_length, device="cpu", local_files_only=True)
    evaluator = CrossEncoderRerankingEvaluator(samples, at_k=10, name=EVALUATOR_NAME, batch_size=128, write_csv=False)
    base_metrics = card_metrics(evaluator(model))
    log(f"untrained reranker on dev: {base_metrics}")

    out_root = Path(out_root) if out_root else paths().rerankers_dir
    draft = versions.new_version(out_root, "reranker-pstuts", base, train_split.files, settings)
    args = skeleton.training_arguments(CrossEncoderTrainingArguments, draft.staging, settings)
    loss = MultipleNegativesRankingLoss(model, num_negatives=settings.in_batch_negatives)
    trainer, train_seconds, cpu_seconds = skeleton.fit(CrossEncoderTrainer, model, args, columns, loss, evaluator, log)
    trained_metrics = card_metrics(evaluator(model))
    log(f"trained reranker on dev: {trained_metrics} after {train_seconds:.0f}s of training")

    model.save(str(draft.staging))
    card = skeleton.card(
        draft,
        train_split,
        dev_split,
        settings,
        trainer,
        card_metrics,
        EVALUATOR_NAME,
        {"training": train_seconds, "training_cpu": cpu_seconds, "total": time.perf_counter() - started},
        kind="cross-encoder reranker",
        pairs=len(columns["anchor"]),
        loss=f"MultipleNegativesRankingLoss (cross-encoder, {settings.negatives} first-stage hard negatives)",
        metrics={"dev_untrained": base_metrics, "dev_trained": trained_metrics},
    )
    return RerankerResult(versions.publish(draft.staging, card, log), card)
