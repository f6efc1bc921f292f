"""Retrieval on PsTuts-VQA dev questions: the reference approach against `pstuts search`, side by side.

Run from the checkout:  .venv/bin/python -m benchmarks.retrieval_benchmark [--storage DIR] [--json out.json]

Both index every train and dev video and are asked the dev questions; the metrics are those of
`pstuts_pipeline.search.evaluation` (hit@k: a result from the answer's video holds the answer's midpoint; link@k: a
result's link is within 15 s of the answer's begin; mrr@10 on hit).
- reference: SemanticChunker defaults per transcript, one dense vector per chunk in a local Qdrant collection,
  the link is the chunk start (benchmarks/reference_ingest.py).
- ours: the Dagster pipeline ingests the same files (`pstuts ingest`), then `retrieval.search_many`.
"""

import argparse
import json
import os
import tempfile
import time
import uuid
import warnings
from pathlib import Path

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR, link_into

REPO = Path(__file__).resolve().parents[1]
DEPTH = 10


def reference_results(files: list[Path], questions: list, qdrant_path: Path) -> tuple[list[list], dict]:
    """Chunks of the reference approach in a one-vector collection; link = chunk start."""
    from qdrant_client import QdrantClient, models

    from benchmarks.reference_ingest import load_videos, make_embeddings, reference_chunks
    from pstuts_pipeline.search.retrieval import SearchResult

    started = time.perf_counter()
    embeddings = make_embeddings()
    chunks = reference_chunks(load_videos([str(f) for f in files]), embeddings)
    vectors = embeddings.embed_documents([c["text"] for c in chunks])
    client = QdrantClient(path=str(qdrant_path))
    client.create_collection(
        "reference", vectors_config=models.VectorParams(size=len(vectors[0]), distance=models.Distance.COSINE)
    )
    client.upsert(
        "reference",
        points=[
            models.PointStruct(id=str(uuid.uuid4()), vector=v, payload={"chunk": i}) for i, v in enumerate(vectors)
        ],
    )
    indexed = time.perf_counter()
    query_vectors = embeddings.embed_documents([q.text for q in questions])
    responses = client.query_batch_points(
        "reference",
        requests=[models.QueryRequest(query=v, limit=DEPTH, with_payload=True) for v in query_vectors],
    )
    client.close()
    ranked = []
    for response in responses:
        results = []
        for point in response.points:
            c = chunks[point.payload["chunk"]]
            # A chunk the naive substring linking could not time never holds an answer.
            start = c["start"] if c["start"] is not None else float("nan")
            stop = c["stop"] if c["stop"] is not None else float("nan")
            results.append(
                SearchResult(
                    c["video_id"],
                    c["title"],
                    c["url"],
                    start,
                    stop,
                    start,
                    c["url"],
                    point.score,
                    c["text"],
                    -1,
                    -1,
                    "",
                )
            )
        ranked.append(results)
    timing = {
        "chunks": len(chunks),
        "index_seconds": indexed - started,
        "search_seconds": time.perf_counter() - indexed,
    }
    return ranked, timing


def our_results(data_dir: Path, storage: Path, questions: list) -> tuple[list[list], dict]:
    """Ingest through Dagster (incremental: a second run reuses the collection), then search the questions."""
    os.environ.update(PSTUTS_STORAGE_DIR=str(storage), PSTUTS_DATA_DIR=str(data_dir))
    import dagster as dg

    from pstuts_pipeline.cli.ingest import ingest
    from pstuts_pipeline.definitions import build_definitions
    from pstuts_pipeline.defs.resources import resources_from_env
    from pstuts_pipeline.search import retrieval

    defs = build_definitions(resources_from_env())
    (storage / "dagster_home").mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with dg.instance_for_test(temp_dir=str(storage / "dagster_home")) as instance:
        report = ingest(defs, instance)
    if not report.ok:
        raise RuntimeError(f"ingest failed: {report.failed_runs or report.plan.failed}")
    indexed = time.perf_counter()
    embeddings, qdrant = defs.resources["embeddings"], defs.resources["qdrant"]
    model = embeddings.query_embeddings()
    model.embed_documents(["warm up"])
    searched = time.perf_counter()
    with qdrant.get_store() as store:
        ranked = retrieval.search_many(store, model, embeddings.model_id, [q.text for q in questions], DEPTH)
    timing = {
        "chunks": report.points_in_collection,
        "index_seconds": indexed - started,
        "search_seconds": time.perf_counter() - searched,
    }
    return ranked, timing


def work_folder(given: Path | None, prefix: str) -> tuple[Path, Path]:
    """(the work folder, its data folder), both made: the one given (kept between runs) or a new temporary one."""
    storage = (given or Path(tempfile.mkdtemp(prefix=prefix))).resolve()
    (storage / "data").mkdir(parents=True, exist_ok=True)
    return storage, storage / "data"


def cached_results(data_dir: Path, storage: Path, questions: list) -> list[list]:
    """`our_results`, kept in the work folder: a second run re-judges without ingesting or searching again."""
    import pickle

    cached = storage / "ranked.pickle"
    if cached.exists():
        return pickle.loads(cached.read_bytes())
    ranked, _ = our_results(data_dir, storage / "ours", questions)
    cached.write_bytes(pickle.dumps(ranked))
    return ranked


def table(rows: dict[str, dict[str, float]], questions: int) -> str:
    names = ["hit@1", "hit@3", "hit@5", "hit@10", "link@1", "link@3", "link@5", "link@10", "mrr@10"]
    reference, ours = rows["reference"], rows["ours"]
    lines = [f"| dev ({questions} questions) | reference | ours |", "|---|---:|---:|"]
    lines += [f"| {n} | {reference[n]:.3f} | {ours[n]:.3f} |" for n in names]
    lines.append(
        f"| median \\|link_time - b\\| of the first hit (s) | {reference['median_link_distance_s']:.1f} | "
        f"{ours['median_link_distance_s']:.1f} |"
    )
    lines.append(f"| chunks in the collection | {reference['chunks']:.0f} | {ours['chunks']:.0f} |")
    lines.append(
        f"| search, ms per question (batched) | {1000 * reference['search_seconds'] / questions:.1f} | "
        f"{1000 * ours['search_seconds'] / questions:.1f} |"
    )
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="Work folder; reuse it to skip re-ingesting (default: temporary).")
    parser.add_argument("--json", type=Path, help="Also write the metrics here.")
    parser.add_argument("--skip-reference", action="store_true", help="Only measure ours.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from pstuts_pipeline.search import evaluation

    storage = (args.storage or Path(tempfile.mkdtemp(prefix="retrieval_benchmark_"))).resolve()
    files = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
    # Only train and dev are indexed: nothing else in the shared folder is read.
    data_dir = storage / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    link_into(data_dir, files)
    questions = evaluation.load_questions([PSTUTS_DIR / "dev.json"])

    rows: dict[str, dict[str, float]] = {}
    ranked, timing = our_results(data_dir, storage / "ours", questions)
    rows["ours"] = {**evaluation.evaluate(questions, ranked), **timing}
    print("ours:", json.dumps({k: round(v, 4) for k, v in rows["ours"].items()}), flush=True)
    if not args.skip_reference:
        reference_path = storage / "reference_qdrant"
        if reference_path.exists():
            import shutil

            shutil.rmtree(reference_path)
        ranked, timing = reference_results(files, questions, reference_path)
        rows["reference"] = {**evaluation.evaluate(questions, ranked), **timing}
        print("reference:", json.dumps({k: round(v, 4) for k, v in rows["reference"].items()}), flush=True)
        print()
        print(table(rows, len(questions)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
