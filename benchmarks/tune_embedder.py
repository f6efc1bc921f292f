"""Tune the embedder on train.json (validated on dev.json), then compare base and tuned in the same pipeline on dev.

Run from the checkout:  .venv/bin/python -m benchmarks.tune_embedder [--model DIR] [--json out.json]

1. Materializes the `tuned_embedder` asset through Dagster (skipped with --model DIR, an existing version).
2. For the base model and the tuned one, ingests every train and dev video through the pipeline into its own
   collection (own storage folder, own Dagster instance), then asks `retrieval.search_many` the dev questions and
   scores the top 10 with the hit@k / link@k / mrr@10 of `pstuts_pipeline.search.evaluation`.
"""

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR, link_into

REPO = Path(__file__).resolve().parents[1]
SEARCH_DEPTH = 10


def tune(train: list[Path], dev: list[Path], storage: Path, args: argparse.Namespace) -> tuple[Path, dict]:
    """Materialize the asset as `pstuts tune` does; return the model folder and the run's metadata."""
    import dagster as dg

    from pstuts_pipeline.defs.assets.tuning import TunedEmbedderConfig, materialize_tuned_embedder

    config = TunedEmbedderConfig(
        train_files=[str(f) for f in train],
        dev_files=[str(f) for f in dev],
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        eval_steps=args.eval_steps,
        threads=args.threads,
        out_dir=str(args.out or storage / "tuned_models"),
    )
    (storage / "dagster_home_tune").mkdir(parents=True, exist_ok=True)
    with dg.instance_for_test(temp_dir=str(storage / "dagster_home_tune")) as instance:
        event = materialize_tuned_embedder(instance, config)
    return Path(event.metadata["model_folder"].value), {k: v.value for k, v in event.metadata.items()}


def ingest_collection(model: str, data_dir: Path, storage: Path) -> tuple:
    """Ingest the data folder with `model` ('' = base) through Dagster into its own storage.

    Returns (the definitions used, the ingest report, seconds).
    """
    import dagster as dg

    from pstuts_pipeline.cli.ingest import ingest
    from pstuts_pipeline.definitions import build_definitions
    from pstuts_pipeline.defs.resources import resources_from_env

    os.environ.update(PSTUTS_STORAGE_DIR=str(storage), PSTUTS_DATA_DIR=str(data_dir), PSTUTS_EMBEDDING_MODEL=model)
    (storage / "dagster_home").mkdir(parents=True, exist_ok=True)
    defs = build_definitions(resources_from_env())
    started = time.perf_counter()
    with dg.instance_for_test(temp_dir=str(storage / "dagster_home")) as instance:
        report = ingest(defs, instance)
    if not report.ok:
        raise RuntimeError(f"ingest with model {model or 'base'} failed: {report.failed_runs or report.plan.failed}")
    return defs, report, time.perf_counter() - started


def pipeline_metrics(model: str, data_dir: Path, dev: list[Path], storage: Path) -> dict[str, float]:
    """Ingest the data folder with `model` ('' = base) through Dagster, then score search on the dev questions."""
    from pstuts_pipeline.search import evaluation, retrieval

    defs, report, ingest_seconds = ingest_collection(model, data_dir, storage)
    embeddings, qdrant = defs.resources["embeddings"], defs.resources["qdrant"]
    questions = evaluation.load_questions(dev)
    query_model = embeddings.query_embeddings()
    started = time.perf_counter()
    with qdrant.get_store() as store:
        ranked = retrieval.search_many(
            store, query_model, embeddings.model_id, [q.text for q in questions], SEARCH_DEPTH
        )
    metrics = evaluation.evaluate(questions, ranked)
    return {
        **{k: round(v, 4) for k, v in metrics.items()},
        "chunks": report.chunks,
        "ingest_seconds": round(ingest_seconds, 1),
        "search_seconds": round(time.perf_counter() - started, 1),
        "model_id": embeddings.model_id,
    }


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="Compare this tuned version instead of training a new one.")
    parser.add_argument("--out", type=Path, help="Parent folder for the new version (default: under --storage).")
    parser.add_argument("--storage", type=Path, help="Work folder (default: a temporary one).")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=0)
    parser.add_argument("--eval-steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="Torch threads, for training and the pipeline runs.")
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)  # on a shared CPU one thread is several times faster than two
    storage = args.storage or Path(tempfile.mkdtemp(prefix="tune_embedder_"))
    train, dev = [PSTUTS_DIR / "train.json"], [PSTUTS_DIR / "dev.json"]
    # Only train and dev go into the collection: nothing else in the shared folder is read.
    data_dir = storage / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    link_into(data_dir, train + dev)

    results: dict = {"storage": str(storage)}
    if args.model:
        folder = args.model.resolve()
    else:
        folder, results["tuning"] = tune(train, dev, storage, args)
    from pstuts_pipeline.training import tuning

    card = tuning.read_card(folder)
    results["card"] = {k: card[k] for k in ("name", "pairs", "steps", "settings", "metrics", "eval_history", "seconds")}
    print(f"model {folder}: {card['steps']} steps, {card['seconds']['training']} s of training", flush=True)
    results["base"] = pipeline_metrics("", data_dir, dev, storage / "base")
    print("base:", results["base"], flush=True)
    results["tuned"] = pipeline_metrics(str(folder), data_dir, dev, storage / "tuned")
    print("tuned:", results["tuned"], flush=True)

    names = [k for k in results["base"] if "@" in k]
    print(f"\n| dev ({int(results['base']['questions'])} questions) | base | tuned | gain |\n|---|---:|---:|---:|")
    for name in names:
        base, tuned = results["base"][name], results["tuned"][name]
        print(f"| {name} | {base:.3f} | {tuned:.3f} | {tuned - base:+.3f} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
