"""Issue 24 measured: a temporal-neighbour signal and contextual chunks against today's search, in one run, on dev.

Run from the checkout:  nice -n 10 .venv/bin/python -m benchmarks.temporal_context [--storage DIR] [--json out.json]

1. Ingests every train and dev video through the pipeline once, with today's settings (`ingest_collection`).
2. Embeds the 2,524 dev questions once, and asks Qdrant once per collection (`retrieval.first_stage`); every
   query-time setting (temporal weight and width, relink, whole-chunk vector weight) is then scored from those
   rankings by `retrieval.second_stage`, so nothing is ingested or embedded again per setting.
3. Contextual chunks: for each context source the stored points are rebuilt in an in-memory collection by the
   ingest's own code (`context.contextual_texts`, `vectorstore.build_points`), with the contextual text in both the
   whole-chunk vector and the BM25 terms; "dense only" and "BM25 only" take that ranking from the contextual
   collection and the others from today's. The time to build the contexts and embed the contextual texts is what
   the option adds to an ingest.
4. Scores the top 10 with `pstuts_pipeline.search.evaluation` on all dev questions and on those asked of one video
   (ambiguity counted over train and dev questions), as `benchmarks/rerank_benchmark.py` does.
"""

import argparse
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks.rerank_benchmark import NAMES
from benchmarks.tune_embedder import PSTUTS_DIR, ingest_collection
from pstuts_pipeline_tests.support.pstuts_vqa import link_into

DEPTH = 10
# Chunks average about 50 s (405 on train + dev's 65 videos), so neighbours' midpoints are ~50 s apart: a sigma
# under ~20 s gives them a weight of nearly 0 (a first run's sigma 10 s rows equalled today's search exactly).
TEMPORAL_GRID = [(weight, sigma) for sigma in (30.0, 60.0, 120.0) for weight in (0.1, 0.2, 0.4)]
CHUNK_WEIGHTS = (0.25, 0.5)
SOURCES = ("title", "neighbours", "title+neighbours")


def stored_videos(store) -> dict[int, list]:  # noqa: ANN001
    """Every stored point with its vectors, by video, in chunk order."""
    videos: dict[int, list] = {}
    offset = None
    while True:
        points, offset = store.scroll(limit=1024, offset=offset, with_payload=True, with_vectors=True)
        for point in points:
            videos.setdefault(point.payload["metadata"]["video_id"], []).append(point)
        if offset is None:
            break
    return {v: sorted(ps, key=lambda p: p.payload["metadata"]["chunk_index"]) for v, ps in videos.items()}


def chunk_of(record):  # noqa: ANN001, ANN201
    """The TimedChunk a stored point was built from (its phrases' ids, texts and times)."""
    from pstuts_pipeline.chunking.chunker import TimedChunk
    from pstuts_pipeline.chunking.time_repair import Phrase

    meta, text = record.payload["metadata"], record.payload["page_content"]
    phrases = tuple(
        Phrase(sent_id, text[a:b], float(begin), float(end))
        for sent_id, (a, b), (begin, end) in zip(
            meta["sent_ids"], meta["phrase_char_spans"], meta["speech_start_stop_times"], strict=True
        )
    )
    return TimedChunk(meta["chunk_index"], phrases)


def contextual_collection(videos: dict[int, list], source: str, model, dimension: int, model_id: str) -> tuple:  # noqa: ANN001
    """An in-memory copy of the collection whose chunks carry `source` context in both vectors; and its seconds."""
    from qdrant_client import QdrantClient

    from pstuts_pipeline.search import context, vectorstore
    from pstuts_pipeline.search.client_store import ClientStore

    settings = context.ContextSettings(source=source, use="both")
    started = time.perf_counter()
    built = {}
    for video_id, records in videos.items():
        meta = records[0].payload["metadata"]
        chunks = [chunk_of(r) for r in records]
        assert [c.text for c in chunks] == [r.payload["page_content"] for r in records]
        texts = context.contextual_texts(meta["title"], meta["desc"], [c.text for c in chunks], settings)
        built[video_id] = (meta, chunks, texts)
    contexts_s = time.perf_counter() - started
    started = time.perf_counter()
    all_texts = [t for _, _, texts in built.values() for t in texts]
    vectors = iter(model.embed_documents(all_texts))
    embed_s = time.perf_counter() - started
    client = ClientStore(QdrantClient(location=":memory:"), "contextual")
    vectorstore.ensure_collection(client, dimension, model_id)
    for video_id, (meta, chunks, texts) in built.items():
        info = vectorstore.VideoInfo(video_id, meta["title"], meta["desc"], meta["url"], meta["source_hash"])
        phrase_vectors = [r.vector[vectorstore.SENTENCE_VECTORS] for r in videos[video_id]]
        points = vectorstore.build_points(
            info, chunks, [next(vectors) for _ in chunks], phrase_vectors, "benchmark", bm25_texts=texts
        )
        client.upsert(points)
    return client, {"chunks": len(all_texts), "context_seconds": contexts_s, "embed_seconds": embed_s}


def table(rows: dict[str, dict[str, float]]) -> str:
    """Configurations as rows (there are many), metrics as columns: all questions, then asked of one video."""
    first = next(iter(rows.values()))
    names = [n for n in NAMES if n in ("hit@1", "hit@5", "hit@10", "link@5", "video@1", "video@5", "mrr@10")]
    header = [f"all: {n}" for n in names] + [f"one video: {n}" for n in names]
    lines = [
        f"| dev: {first['questions']:.0f} questions ({first['unambiguous_questions']:.0f} asked of one video) | "
        + " | ".join(header)
        + " |",
        "|---|" + "---:|" * len(header),
    ]
    for label, row in rows.items():
        values = [row[n] for n in names] + [row[f"unambiguous_{n}"] for n in names]
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="Work folder; reuse it to skip re-ingesting (default: temporary).")
    parser.add_argument("--threads", type=int, default=2, help="Torch threads for embedding.")
    parser.add_argument("--json", type=Path, help="Also write the metrics here.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from pstuts_pipeline.search import evaluation, retrieval, vectorstore
    from pstuts_pipeline.search.temporal import TemporalSettings

    torch.set_num_threads(args.threads)
    storage = (args.storage or Path(tempfile.mkdtemp(prefix="temporal_context_"))).resolve()
    train, dev = PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"
    data_dir = storage / "data"  # only train and dev go into the collection
    data_dir.mkdir(parents=True, exist_ok=True)
    link_into(data_dir, [train, dev])
    defs, report, ingest_s = ingest_collection("", data_dir, storage / "base")
    print(f"ingest {ingest_s:.1f} s, {report.points_in_collection} points", flush=True)
    questions, asked = evaluation.load_questions([dev]), evaluation.load_questions([train])
    texts = [q.text for q in questions]
    embeddings, qdrant = defs.resources["embeddings"], defs.resources["qdrant"]
    model = embeddings.query_embeddings()
    started = time.perf_counter()
    vectors = model.embed_documents([retrieval.dense_query_text(t) for t in texts])
    print(f"questions embedded in {time.perf_counter() - started:.1f} s", flush=True)

    rows: dict[str, dict[str, float]] = {}
    costs: dict[str, dict[str, float]] = {}

    def score(label: str, store, rankings: list, settings: retrieval.SearchSettings) -> None:  # noqa: ANN001
        started = time.perf_counter()
        ranked = retrieval.second_stage(store, texts, vectors, rankings, DEPTH, settings)
        rows[label] = {**evaluation.evaluate(questions, ranked, asked=asked), "seconds": time.perf_counter() - started}
        row = rows[label]
        print(
            f"{label}: hit@5 {row['hit@5']:.3f} link@5 {row['link@5']:.3f} video@1 {row['video@1']:.3f} "
            f"mrr@10 {row['mrr@10']:.3f} | one video hit@5 {row['unambiguous_hit@5']:.3f} "
            f"link@5 {row['unambiguous_link@5']:.3f} ({row['seconds']:.1f} s)",
            flush=True,
        )

    wide = retrieval.SearchSettings(chunk_weight=1.0)  # asks for all three rankings; weights are set per row
    with qdrant.get_store() as store:
        started = time.perf_counter()
        base = retrieval.first_stage(store, texts, vectors, retrieval.CANDIDATES, None, wide)
        print(f"first stage {time.perf_counter() - started:.1f} s", flush=True)

        def weighted(rankings: list, chunk_weight: float, sources: dict | None = None) -> list:
            """Rankings with the whole-chunk one at `chunk_weight` (dropped at 0), some taken from `sources`."""
            out = []
            for number, found in enumerate(rankings):
                mixed = {**found, **{k: v[number][k] for k, v in (sources or {}).items() if k in v[number]}}
                if vectorstore.DENSE_VECTOR in mixed:
                    points = mixed.pop(vectorstore.DENSE_VECTOR)[0]
                    if chunk_weight:
                        mixed[vectorstore.DENSE_VECTOR] = (points, chunk_weight)
                out.append(mixed)
            return out

        today = retrieval.SearchSettings()
        score("today's search", store, weighted(base, 0.0), today)
        for weight, sigma in TEMPORAL_GRID:
            settings = retrieval.SearchSettings(temporal=TemporalSettings(weight, sigma))
            score(f"temporal w={weight} sigma={sigma:.0f}s", store, weighted(base, 0.0), settings)
        best = max((k for k in rows if k.startswith("temporal")), key=lambda k: rows[k]["mrr@10"])
        weight, sigma = (float(part.split("=")[1].rstrip("s")) for part in best.split()[1:])
        for relink_weight in (0.0, weight):
            settings = retrieval.SearchSettings(temporal=TemporalSettings(relink_weight, sigma, relink=True))
            score(f"relink only, sigma={sigma:.0f}s, w={relink_weight}", store, weighted(base, 0.0), settings)
        for chunk_weight in CHUNK_WEIGHTS:
            score(f"+ chunk vector w={chunk_weight}", store, weighted(base, chunk_weight), today)

        dimension = len(vectors[0])
        videos = stored_videos(store)
        for source in SOURCES:
            memory, cost = contextual_collection(videos, source, model, dimension, embeddings.model_id)
            costs[source] = cost
            print(f"context {source}: {json.dumps({k: round(v, 2) for k, v in cost.items()})}", flush=True)
            found = retrieval.first_stage(memory, texts, vectors, retrieval.CANDIDATES, None, wide)
            bm25 = {vectorstore.SPARSE_VECTOR: found}
            dense = {vectorstore.DENSE_VECTOR: found}
            score(f"context {source}: BM25", store, weighted(base, 0.0, bm25), today)
            for chunk_weight in CHUNK_WEIGHTS:
                label = f"context {source}: dense, chunk w={chunk_weight}"
                score(label, store, weighted(base, chunk_weight, dense), today)
                label = f"context {source}: both, chunk w={chunk_weight}"
                score(label, store, weighted(base, chunk_weight, {**bm25, **dense}), today)
            memory.close()

    print(f"\nload average {os.getloadavg()}; ingest {ingest_s:.1f} s\n")
    print(table(rows))
    print("\n| context | chunks | build contexts (s) | embed contextual texts (s) |\n|---|---:|---:|---:|")
    for source, cost in costs.items():
        print(f"| {source} | {cost['chunks']:.0f} | {cost['context_seconds']:.2f} | {cost['embed_seconds']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "context_costs": costs, "ingest_seconds": ingest_s}, indent=2))


if __name__ == "__main__":
    main()
