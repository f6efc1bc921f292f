"""Search on the PsTuts-VQA dev questions four ways in one run: base, +reranker, +tuned embedder, both.

Run from the checkout:  nice -n 10 .venv/bin/python -m benchmarks.rerank_benchmark [--reranker DIR] [--embedder DIR]

1. Trains the reranker (the `reranker` asset) and the tuned embedder (the `tuned_embedder` asset) on train.json,
   validated on dev.json, unless given existing versions.
2. Ingests every train and dev video through the pipeline twice (base model, tuned model; own storage each).
3. Asks the 2,524 dev questions with `retrieval.search_many`, with and without the reranker, and scores the
   top 10 with `pstuts_pipeline.search.evaluation`, on all questions and on those asked of one video only (the
   ambiguity is counted over train and dev questions, the collection's videos).
4. Times search in process: one question at a time (p50, p95 over a sample) and batched (ms per question).
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks.tune_embedder import PSTUTS_DIR, ingest_collection
from pstuts_pipeline.training.reranker import RerankerSettings
from pstuts_pipeline_tests.support.pstuts_vqa import link_into

DEPTH = 10
RERANKER_DEFAULTS = RerankerSettings()
NAMES = ["hit@1", "hit@5", "hit@10", "link@1", "link@5", "link@10", "video@1", "video@5", "mrr@10"]


def train_models(args: argparse.Namespace, storage: Path, train: list[Path], dev: list[Path]) -> dict[str, Path]:
    """The reranker and the tuned embedder: given, or materialized through their assets."""
    import dagster as dg

    from pstuts_pipeline.defs.assets.reranker import RerankerConfig, materialize_reranker
    from pstuts_pipeline.defs.assets.tuning import TunedEmbedderConfig, materialize_tuned_embedder

    files = {"train_files": [str(f) for f in train], "dev_files": [str(f) for f in dev], "threads": args.threads}
    folders = {}
    (storage / "dagster_home_train").mkdir(parents=True, exist_ok=True)
    with dg.instance_for_test(temp_dir=str(storage / "dagster_home_train")) as instance:
        if args.reranker:
            folders["reranker"] = args.reranker.resolve()
        else:
            config = RerankerConfig(
                **files,
                max_steps=args.reranker_steps,
                max_questions=args.reranker_questions,
                out_dir=str(storage / "rerankers"),
            )
            folders["reranker"] = Path(materialize_reranker(instance, config).metadata["model_folder"].value)
        if args.embedder:
            folders["embedder"] = args.embedder.resolve()
        elif not (args.sweep or args.no_embedder):
            config = TunedEmbedderConfig(**files, epochs=args.embedder_epochs, out_dir=str(storage / "tuned_models"))
            folders["embedder"] = Path(materialize_tuned_embedder(instance, config).metadata["model_folder"].value)
    return folders


def measure(defs, questions: list, asked: list, reranker, latency_sample: int) -> dict[str, float]:  # noqa: ANN001
    """Metrics of the dev questions batched, and the latency of single questions on a sample."""
    from pstuts_pipeline.search import evaluation, retrieval

    embeddings, qdrant = defs.resources["embeddings"], defs.resources["qdrant"]
    model = embeddings.query_embeddings()
    texts = [q.text for q in questions]
    with qdrant.get_store() as store:
        args = (store, model, embeddings.model_id)
        retrieval.search(*args, "warm up", DEPTH, reranker)
        started = time.perf_counter()
        ranked = retrieval.search_many(*args, texts, DEPTH, reranker=reranker)
        batched = time.perf_counter() - started
        single = []
        for text in random.Random(7).sample(texts, latency_sample):
            started = time.perf_counter()
            retrieval.search(*args, text, 5, reranker)
            single.append(1000 * (time.perf_counter() - started))
    metrics = evaluation.evaluate(questions, ranked, asked=asked)
    return {
        **metrics,
        "batched_ms": 1000 * batched / len(texts),
        "single_p50_ms": statistics.median(single),
        "single_p95_ms": statistics.quantiles(single, n=20)[-1],
    }


def sweep(defs, questions: list, asked: list, folder: Path, sample: int, latency_sample: int) -> None:  # noqa: ANN001
    """Depth, phrases per candidate and weight on a sample of the dev questions: quality against single latency."""
    from pstuts_pipeline.search import reranking

    chosen = random.Random(11).sample(questions, sample)
    print(
        f"\n| sweep on {sample} dev questions | hit@5 | link@5 | video@1 | video@5 | p50 ms | p95 ms |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for depth, phrases, weight, relink in (
        (0, 0, 0.0, False),
        (10, 1, 1.0, False),
        (10, 2, 1.0, False),
        (10, 2, 1.0, True),
        (10, 2, 0.5, False),
        (10, 2, 2.0, False),
        (5, 2, 1.0, False),
        (20, 2, 1.0, False),
    ):
        settings = reranking.RerankSettings(depth, phrases, weight, relink)
        used = reranking.load_reranker(str(folder), settings) if depth else None
        row = measure(defs, chosen, asked, used, latency_sample)
        print(
            f"| depth {depth}, phrases {phrases}, weight {weight}, relink {relink} | {row['hit@5']:.3f} | "
            f"{row['link@5']:.3f} | "
            f"{row['video@1']:.3f} | {row['video@5']:.3f} | {row['single_p50_ms']:.0f} | {row['single_p95_ms']:.0f} |",
            flush=True,
        )


def table(rows: dict[str, dict[str, float]], seconds: dict[str, float]) -> str:
    """The four configurations side by side, all questions and the unambiguous subset."""
    columns = list(rows)
    first = rows[columns[0]]
    lines = [
        f"| dev: {first['questions']:.0f} questions ({first['unambiguous_questions']:.0f} asked of one video) | "
        + " | ".join(columns)
        + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for prefix, label in (("", ""), ("unambiguous_", " (asked of one video)")):
        lines += [f"| {n}{label} | " + " | ".join(f"{rows[c][prefix + n]:.3f}" for c in columns) + " |" for n in NAMES]
    for name, label in (
        ("single_p50_ms", "search p50, one question (ms)"),
        ("single_p95_ms", "search p95, one question (ms)"),
        ("batched_ms", "search, batched (ms per question)"),
    ):
        lines.append(f"| {label} | " + " | ".join(f"{rows[c][name]:.1f}" for c in columns) + " |")
    trained = {"current search": 0.0, "reranker": seconds["reranker"], "tuned embedder": seconds.get("embedder", 0.0)}
    trained["tuned embedder + reranker"] = trained["reranker"] + trained["tuned embedder"]
    lines.append("| training (s) | " + " | ".join(f"{trained[c]:.0f}" for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reranker", type=Path, help="Use this reranker version instead of training one.")
    parser.add_argument("--embedder", type=Path, help="Use this tuned embedder version instead of training one.")
    parser.add_argument("--storage", type=Path, help="Work folder; reuse it to skip re-ingesting (default: temporary).")
    parser.add_argument(
        "--reranker-steps",
        type=int,
        default=RERANKER_DEFAULTS.max_steps,
        help="Cap on the reranker's steps (0: its epochs).",
    )
    parser.add_argument(
        "--reranker-questions",
        type=int,
        default=RERANKER_DEFAULTS.max_questions,
        help="Training questions the reranker uses (0: all).",
    )
    parser.add_argument("--embedder-epochs", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=1, help="Torch threads for training and search.")
    parser.add_argument("--depth", type=int, default=0, help="Candidates the reranker rescores (0: the default).")
    parser.add_argument("--phrases", type=int, default=0, help="Phrases per candidate it reads (0: the default).")
    parser.add_argument("--weight", type=float, default=None, help="Weight of its score (default: the default).")
    parser.add_argument("--latency-sample", type=int, default=100, help="Questions timed one at a time.")
    parser.add_argument("--no-embedder", action="store_true", help="Skip the tuned-embedder columns.")
    parser.add_argument(
        "--sweep", type=int, default=0, help="Only sweep the reranker's settings on this many dev questions."
    )
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from pstuts_pipeline.embedding import versions
    from pstuts_pipeline.search import evaluation, reranking

    torch.set_num_threads(args.threads)
    storage = (args.storage or Path(tempfile.mkdtemp(prefix="rerank_benchmark_"))).resolve()
    train, dev = [PSTUTS_DIR / "train.json"], [PSTUTS_DIR / "dev.json"]
    data_dir = storage / "data"  # only train and dev go into the collection
    data_dir.mkdir(parents=True, exist_ok=True)
    link_into(data_dir, train + dev)

    folders = train_models(args, storage, train, dev)
    seconds = {name: versions.read_card(folder)["seconds"]["training"] for name, folder in folders.items()}
    print(f"models {folders}, training seconds {seconds}", flush=True)
    defaults = reranking.RerankSettings()
    settings = reranking.RerankSettings(
        args.depth or defaults.depth,
        args.phrases or defaults.phrases,
        defaults.weight if args.weight is None else args.weight,
    )
    reranker = reranking.load_reranker(str(folders["reranker"]), settings)
    questions = evaluation.load_questions(dev)
    asked = evaluation.load_questions(train)
    if args.sweep:
        defs, _, _ = ingest_collection("", data_dir, storage / "base")
        sweep(defs, questions, asked, folders["reranker"], args.sweep, args.latency_sample)
        return
    rows: dict[str, dict[str, float]] = {}
    embedders = [("base", "")] + ([("tuned embedder", str(folders["embedder"]))] if "embedder" in folders else [])
    for label, model in embedders:
        defs, _, _ = ingest_collection(model, data_dir, storage / ("tuned" if model else "base"))
        for suffix, used in (("", None), (" + reranker", reranker)):
            name = "current search" if label == "base" and not used else f"{label}{suffix}".replace("base + ", "")
            rows[name] = measure(defs, questions, asked, used, args.latency_sample)
            print(name, json.dumps({k: round(v, 4) for k, v in rows[name].items()}), flush=True)
    rows = {
        k: rows[k] for k in ("current search", "reranker", "tuned embedder", "tuned embedder + reranker") if k in rows
    }
    print(f"\nreranker settings: {settings}; torch threads {args.threads}; load average {os.getloadavg()}\n")
    print(table(rows, seconds))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "folders": {k: str(v) for k, v in folders.items()},
                    "rows": rows,
                    "settings": str(settings),
                    "seconds": seconds,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
