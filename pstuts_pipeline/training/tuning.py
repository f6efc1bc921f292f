"""Fine-tuning the embedder on PsTuts-VQA questions into a versioned model folder with its card (no Dagster)."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.chunking.time_repair import repair_times
from pstuts_pipeline.embedding import models, versions
from pstuts_pipeline.embedding.checksums import sha256_file
from pstuts_pipeline.settings import offline_model_hub, paths
from pstuts_pipeline.sources import RawPhrase, load_catalog
from pstuts_pipeline.training import skeleton

if TYPE_CHECKING:
    from sentence_transformers.base.modality_types import SingleInput

EVALUATOR_NAME = "pstuts-dev"
# The dev metrics kept in the card, by their short name, from InformationRetrievalEvaluator's keys.
CARD_METRICS = ("accuracy@1", "accuracy@5", "accuracy@10", "mrr@10", "ndcg@10")
Log = versions.Log
Encode = Callable[[list[str]], Any]  # texts -> normalized vectors, one row each
Score = Callable[[list[str], list[str]], Any]  # (questions, passages) -> scores, one row per question


class TuningDataError(ValueError):
    """The training or dev files cannot be used as given; the message names the file or the videos."""


@dataclass(frozen=True)
class TuningSettings:
    """How the model is trained; recorded in the card so a version can be reproduced."""

    epochs: float = 2.0  # measured on dev: 1 epoch +0.018 hit@5, 2 epochs +0.032 (581 s on 2 cores)
    batch_size: int = 64
    max_steps: int = 0  # 0: no cap, train for `epochs`
    learning_rate: float = 5e-5
    warmup_ratio: float = 0.1
    max_seq_length: int = 128  # training only; the saved model keeps the base model's window
    # Neighbours on each side of the answer phrase. 0: the bare phrase, which is what the collection's phrase
    # vectors hold. A model tuned on phrases with one neighbour each side lost 0.03 hit@5 on dev in that pipeline.
    buffer_size: int = 0
    eval_steps: int = 0  # 0: evaluate on dev before and after training only
    bf16: bool | None = None  # None: bfloat16 autocast where the CPU computes it natively (AVX512-BF16/AMX)
    # On a CPU shared with other jobs, two torch threads spent ~6x the wall time of one per step (measured:
    # 18 s vs 3 s), waiting on each other whenever one is descheduled; raise it on a machine of your own.
    threads: int = 1
    # Each pair also gets a negative: a random one of the `negatives_top_k` phrases of OTHER videos that the base
    # model ranks highest for its question. Finding the right video is what search misses most, and in-batch
    # phrases of random videos are mostly easy. 0: pairs only. Same-video phrases are never used: neighbours answer too.
    negatives_top_k: int = 10
    seed: int = 42


@dataclass(frozen=True)
class QAExample:
    """A question and the text the pipeline embeds for the phrase that answers it."""

    video_id: int
    sent_id: int
    question: str
    passage: str


@dataclass
class Split:
    """The usable questions of some files, every phrase passage of their videos, and what was left out."""

    examples: list[QAExample] = field(default_factory=list)
    passages: dict[str, str] = field(default_factory=dict)  # "video:sent_id" -> passage
    files: list[dict[str, Any]] = field(default_factory=list)
    skipped_questions: int = 0

    @property
    def video_ids(self) -> set[int]:
        return {int(key.split(":")[0]) for key in self.passages}


@dataclass(frozen=True)
class TuningResult:
    """Where the new model is and what its card says."""

    folder: Path
    card: dict[str, Any]


def phrase_passages(raw_phrases: Sequence[RawPhrase], buffer_size: int) -> dict[int, str]:
    """Each spoken phrase (with `buffer_size` neighbours on each side), by sent_id: what a passage vector holds."""
    phrases, _ = repair_times(raw_phrases)
    spoken = [p for p in phrases if p.text]
    windows = chunking.chunker_windows([p.text for p in spoken], buffer_size)
    return {p.sent_id: w for p, w in zip(spoken, windows, strict=True)}


def load_split(files: Sequence[Path], buffer_size: int) -> Split:
    """Read PsTuts-VQA-format files into questions and passages, refusing files with invalid videos.

    Questions are kept as search embeds them (`retrieval.dense_query_text`), so training sees the query text
    the tuned model will be asked to match.
    """
    from pstuts_pipeline.search.retrieval import dense_query_text

    if not files:
        raise TuningDataError("no files given")
    catalog = load_catalog([Path(f) for f in files])
    if catalog.errors:
        raise TuningDataError("\n".join(str(e) for e in catalog.errors))
    split = Split()
    per_file: dict[str, dict[str, int]] = {str(f): {"videos": 0, "questions": 0} for f in files}
    for video in catalog.videos.values():
        passages = phrase_passages(video.phrases, buffer_size)
        split.passages.update({f"{video.video_id}:{sent_id}": text for sent_id, text in passages.items()})
        per_file[video.file]["videos"] += 1
        for pair in video.qa:
            question = dense_query_text(pair.question).strip()
            if not question or pair.sent_id not in passages:
                split.skipped_questions += 1  # blank question, or its answer phrase has no words
                continue
            split.examples.append(QAExample(video.video_id, pair.sent_id, question, passages[pair.sent_id]))
            per_file[video.file]["questions"] += 1
    split.files = [{"file": name, "sha256": sha256_file(Path(name)), **counts} for name, counts in per_file.items()]
    if not split.examples:
        raise TuningDataError(f"{', '.join(map(str, files))}: no question-answer pairs ('qa') to use")
    return split


def check_disjoint(train: Split, dev: Split) -> None:
    """Dev chooses settings and validates; a dev video among the training data would make that worthless."""
    shared = sorted(train.video_ids & dev.video_ids)
    if shared:
        raise TuningDataError(
            f"videos {', '.join(map(str, shared[:10]))}{' ...' if len(shared) > 10 else ''} are in both the "
            "training files and the dev files: dev must never be trained on"
        )


def distinct_examples(split: Split) -> list[QAExample]:
    """The examples with each (question, passage) pair once, the first one kept."""
    first: dict[tuple[str, str], QAExample] = {}
    for e in split.examples:
        first.setdefault((e.question, e.passage), e)
    return list(first.values())


def training_pairs(split: Split) -> dict[str, list[str]]:
    """(anchor, positive) columns for MultipleNegativesRankingLoss, each distinct pair once."""
    examples = distinct_examples(split)
    return {"anchor": [e.question for e in examples], "positive": [e.passage for e in examples]}


def dense_scores(encode: Encode) -> Score:
    """Cosine of question and passage vectors: how the embedder ranks passages."""

    def score(questions: list[str], texts: list[str]) -> Any:
        return encode(questions) @ encode(texts).T

    return score


def cross_video_negatives(
    examples: Sequence[QAExample], passages: dict[str, str], score: Score, top_k: int, seed: int, count: int = 1
) -> list[list[str]]:
    """For each example, `count` random ones of the `top_k` passages `score` ranks highest among other videos'.

    A text that also occurs in the question's own video is never picked, nor the positive itself.
    """
    import numpy as np

    videos_of: dict[str, set[int]] = {}
    for key, text in passages.items():
        videos_of.setdefault(text, set()).add(int(key.split(":")[0]))
    texts = list(videos_of)
    questions = list(dict.fromkeys(e.question for e in examples))
    scores = dict(zip(questions, score(questions, texts), strict=True))
    rng = random.Random(seed)
    negatives = []
    for e in examples:
        ranked = np.argsort(-scores[e.question], kind="stable")
        candidates = []
        for i in ranked:
            if e.video_id not in videos_of[texts[i]] and texts[i] != e.passage:
                candidates.append(texts[i])
                if len(candidates) == top_k:
                    break
        if not candidates:
            raise TuningDataError(f"video {e.video_id}: no passage of another video to use as a negative")
        negatives.append(
            [rng.choice(candidates)] if count == 1 else rng.sample(candidates, min(count, len(candidates)))
        )
    return negatives


def training_triplets(split: Split, encode: Encode, top_k: int, seed: int) -> dict[str, list[str]]:
    """(anchor, positive, negative) columns: each distinct pair with a hard negative from another video."""
    negatives = cross_video_negatives(distinct_examples(split), split.passages, dense_scores(encode), top_k, seed)
    return {**training_pairs(split), "negative": [n for (n,) in negatives]}


def length_grouped_batches(
    rows: Sequence[Sequence[str]], batch_size: int, seed: int, pool_batches: int = 64
) -> list[list[int]]:
    """Shuffled batches of rows with similar passage length, no text twice in a batch.

    Padding to the longest passage of a random batch roughly doubles the work on CPU; sorting shuffled pools of
    rows by length removes most of it. A text repeated in a batch would be its own negative under in-batch
    negatives, so a row whose question or passage is already in the batch waits for the next one.
    """
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    waiting: list[int] = []
    pool = batch_size * pool_batches
    for start in range(0, len(order) + pool, pool):
        last = start >= len(order)
        waiting += sorted(order[start : start + pool], key=lambda i: max(map(len, rows[i][1:])))
        while waiting:
            batch: list[int] = []
            seen: set[str] = set()
            rest: list[int] = []
            for i in waiting:
                if len(batch) < batch_size and seen.isdisjoint(rows[i]):
                    batch.append(i)
                    seen.update(rows[i])
                else:
                    rest.append(i)
            if len(batch) < batch_size and not last:
                break  # fill it from the next pool
            batches.append(batch)
            waiting = rest
        if last:
            break
    rng.shuffle(batches)
    return batches


def _batch_sampler_class():
    from sentence_transformers.base.sampler import DefaultBatchSampler

    class LengthGroupedNoDuplicatesSampler(DefaultBatchSampler):
        """`length_grouped_batches` as a sentence-transformers batch sampler, reshuffled every epoch."""

        def __init__(self, dataset, batch_size, drop_last, valid_label_columns=None, generator=None, seed=0):  # noqa: ANN001
            super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
            self.rows = list(zip(*(dataset[c] for c in dataset.column_names), strict=True))
            self.epoch = 0

        def _batches(self) -> list[list[int]]:
            return length_grouped_batches(self.rows, self.batch_size, self.seed + self.epoch)

        def __iter__(self):  # noqa: ANN204
            yield from self._batches()

        def __len__(self) -> int:
            return len(self._batches())

    return LengthGroupedNoDuplicatesSampler


def dev_evaluator(split: Split, batch_size: int = 64):
    """Dev questions against every phrase passage of the dev videos; the answer phrase is the one relevant hit."""
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    queries: dict[str, SingleInput] = {f"q{i}": e.question for i, e in enumerate(split.examples)}
    corpus: dict[str, SingleInput] = dict(split.passages)
    relevant = {f"q{i}": {f"{e.video_id}:{e.sent_id}"} for i, e in enumerate(split.examples)}
    return InformationRetrievalEvaluator(
        queries=queries,
        corpus=corpus,
        relevant_docs=relevant,
        accuracy_at_k=[1, 5, 10],
        precision_recall_at_k=[5],
        mrr_at_k=[10],
        ndcg_at_k=[10],
        map_at_k=[10],
        batch_size=batch_size,
        name=EVALUATOR_NAME,
        write_csv=False,
    )


def card_metrics(results: dict[str, float]) -> dict[str, float]:
    """The evaluator's metrics under short names (its keys carry a prefix and the score function)."""
    short = {}
    for key, value in results.items():
        name = key.rsplit("_", 1)[-1]
        if name in CARD_METRICS:
            short[name] = round(float(value), 4)
    return short


def read_card(folder: Path) -> dict[str, Any]:
    """The tuning card of a model folder."""
    return versions.read_card(folder)


def training_inputs(
    train_files: Sequence[Path], dev_files: Sequence[Path], base_model: Path | None, buffer_size: int
) -> tuple[Path, Split, Split]:
    """(base model folder, train split, dev split), checked: the bundled model's sha256, no dev video in training."""
    offline_model_hub()
    base = Path(base_model) if base_model else models.bundled_model_path()
    if base_model is None:
        models.verify_bundled_model(base)
    train_split = load_split(train_files, buffer_size)
    dev_split = load_split(dev_files, buffer_size)
    check_disjoint(train_split, dev_split)
    return base, train_split, dev_split


def train(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    out_root: Path | None = None,
    settings: TuningSettings = TuningSettings(),
    base_model: Path | None = None,
    log: Log = print,
) -> TuningResult:
    """Fine-tune the base model on the training files' questions, validate on dev, write a new model version."""
    with skeleton.torch_threads(settings.threads):
        return _train(train_files, dev_files, out_root, settings, base_model, log)


def _train(
    train_files: Sequence[Path],
    dev_files: Sequence[Path],
    out_root: Path | None,
    settings: TuningSettings,
    base_model: Path | None,
    log: Log,
) -> TuningResult:
    started = time.perf_counter()
    base, train_split, dev_split = training_inputs(train_files, dev_files, base_model, settings.buffer_size)
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments

    settings = replace(settings, bf16=skeleton.native_bf16() if settings.bf16 is None else settings.bf16)
    model = SentenceTransformer(str(base), device="cpu", local_files_only=True)
    window = model.max_seq_length
    model.max_seq_length = settings.max_seq_length
    if settings.negatives_top_k > 0 and len(train_split.video_ids) > 1:
        mining_started = time.perf_counter()
        encode = functools.partial(model.encode, batch_size=128, normalize_embeddings=True)
        columns = training_triplets(train_split, encode, settings.negatives_top_k, settings.seed)
        log(f"hard negatives mined with the base model in {time.perf_counter() - mining_started:.0f}s")
    else:
        columns = training_pairs(train_split)
    log(
        f"{len(columns['anchor'])} training pairs from {len(train_split.video_ids)} videos; "
        f"dev: {len(dev_split.examples)} questions over {len(dev_split.passages)} phrases"
    )
    evaluator = dev_evaluator(dev_split)
    base_metrics = card_metrics(evaluator(model))
    log(f"base model on dev: {base_metrics}")

    out_root = Path(out_root) if out_root else paths().tuned_models_dir
    draft = versions.new_version(out_root, "minilm-pstuts", base, train_split.files, settings)
    args = skeleton.training_arguments(
        SentenceTransformerTrainingArguments, draft.staging, settings, batch_sampler=_batch_sampler_class()
    )
    trainer, train_seconds, cpu_seconds = skeleton.fit(
        SentenceTransformerTrainer, model, args, columns, MultipleNegativesRankingLoss(model), evaluator, log
    )
    tuned_metrics = card_metrics(evaluator(model))
    log(f"tuned model on dev: {tuned_metrics} after {train_seconds:.0f}s of training")

    model.max_seq_length = window  # the pipeline sizes chunks by this window: keep it as the base model's
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
        pairs=len(columns["anchor"]),
        hard_negatives="negative" in columns,  # a single training video has no other video to draw them from
        loss="MultipleNegativesRankingLoss",
        metrics={"dev_base": base_metrics, "dev_tuned": tuned_metrics},
    )
    folder = versions.publish(draft.staging, card, log)
    return TuningResult(folder, card)
