"""The embedded store (Qdrant Edge) as the corpus grows: 65, 1,000 and 10,000 videos on one machine.

Run from the checkout:  .venv/bin/python -m benchmarks.store_growth [--sizes 65,1000,10000] [--tail 100]
                        [--work DIR] [--json out.json]

The corpus grows in one workspace. First the real videos (train.json + dev.json, 65) are ingested fresh with
`pstuts ingest`. Each larger size is then reached with copies of the real videos: new ids, and every phrase changed
(" (take K)" appended, K the copy's number), so each copy's text is distinct. A fresh ingest of 10,000 videos takes
about two hours on 2 cores, so all but the last `--tail` videos of a size are written by a fast path: the copy's
points are built with the project's own `vectorstore.build_points` from its own phrases and chunk boundaries, with
the original's vectors (the embeddings of a copy are not computed) and the fingerprint `pstuts ingest` computes for
the copy's file, and written through the store interface. The last `--tail` videos are then ingested for real by
`pstuts ingest` (chunked, embedded, written), which gives the ingest rate at that size.

Per size: the ingest's videos/s and peak RSS; the store's size on disk; `pstuts ingest` with nothing to do, right
after a write (it reads the store) and again (from the ledger, which skips the store); the folder sensor's tick
(`plan_tick`, in a fresh process, nothing to do); `pstuts search` as a whole process (wall and peak RSS); in one
process: the first question after opening, then 50 dev questions one at a time (p50/p95) and the process's RSS;
and `pstuts serve` under 10 concurrent clients (5 questions each, p50/p95). Wall times and peak RSS are the child
processes' own (wait4). The machine is shared: the load average is printed with the results.
"""

import argparse
import copy
import json
import os
import resource
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

from benchmarks.ask_page import child, percentiles
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.workspace import Workspace, pstuts_command, run_child

FILES = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
ID_OFFSET = 1_000_000  # copy K of video V is video V + K * ID_OFFSET
COPIES_PER_FILE = 100
QUESTIONS = 50
CLIENTS, PER_CLIENT = 10, 5


def copied_video(video: dict, number: int) -> dict:
    """Copy `number` of a real video: a new id and every phrase changed a little."""
    twin = copy.deepcopy(video)
    twin["video_id"] = video["video_id"] + number * ID_OFFSET
    for phrase in twin["transcripts"]:
        phrase["sent"] = f"{phrase['sent'].rstrip()} (take {number})"
    twin.pop("qa", None)  # questions stay with the originals: a copy's would be asked of thousands of videos
    return twin


def copies_file(data: Path, originals: list[dict], first: int, count: int) -> Path:
    """Videos `first` .. `first + count` of the copies (0-based over copy 1's videos, then copy 2's, ...)."""
    videos = [copied_video(originals[i % len(originals)], 1 + i // len(originals)) for i in range(first, first + count)]
    path = data / f"copies_{first:06d}.json"
    path.write_text(json.dumps(videos))
    return path


def templates(space: Workspace) -> dict[int, list]:
    """Each real video's stored points, with vectors, in chunk order: what the copies' points are built from."""
    from pstuts_pipeline.search import vectorstore
    from pstuts_pipeline.search.edge_store import EdgeStore

    store = EdgeStore(space.storage / "qdrant", "pstuts_transcripts", lock_timeout_s=60)
    try:
        ids = sorted({p.payload["metadata"]["video_id"] for p in store.scroll(limit=100_000, with_payload=True)[0]})
        found = vectorstore.points_of_videos(store, ids)
        return {v: store.retrieve([p.id for p in points], with_vectors=True) for v, points in found.items()}
    finally:
        store.close()


def bulk_write(space: Workspace, files: list[Path], models: dict[int, list]) -> int:
    """The copies' points, as `pstuts ingest` would store them but with the originals' vectors; videos written."""
    from pstuts_pipeline.chunking.chunker import TimedChunk
    from pstuts_pipeline.chunking.time_repair import Phrase
    from pstuts_pipeline.defs.resources import fingerprint_function, resources_from_env
    from pstuts_pipeline.search import vectorstore
    from pstuts_pipeline.search.edge_store import EdgeStore
    from pstuts_pipeline.sources import load_catalog, normalize_text

    os.environ.update(space.env())
    resources = resources_from_env()
    fingerprint_of = fingerprint_function(resources["embeddings"], resources["chunker"])
    catalog = load_catalog(files)
    assert not catalog.errors, catalog.errors[:3]
    store = EdgeStore(space.storage / "qdrant", "pstuts_transcripts", lock_timeout_s=60)
    written = 0
    try:
        for video in catalog.videos.values():
            records = models[video.video_id % ID_OFFSET]
            texts = {p.sent_id: normalize_text(p.text) for p in video.phrases}
            chunks = []
            for record in records:
                meta = record.payload["metadata"]
                phrases = tuple(
                    Phrase(s, texts[s], float(b), float(e))
                    for s, (b, e) in zip(meta["sent_ids"], meta["speech_start_stop_times"], strict=True)
                )
                chunks.append(TimedChunk(meta["chunk_index"], phrases))
            info = vectorstore.VideoInfo(
                **video.metadata(), source_hash=video.content_hash, source_file=Path(video.file).name
            )
            points = vectorstore.build_points(
                info,
                chunks,
                [r.vector[vectorstore.DENSE_VECTOR] for r in records],
                [r.vector[vectorstore.SENTENCE_VECTORS] for r in records],
                fingerprint_of(video),
            )
            store.upsert(points)
            written += 1
    finally:
        store.close()
    return written


def disk_mb(folder: Path) -> tuple[float, float]:
    """Blocks in use (what `du` says) and the files' sizes: Edge preallocates sparse WAL and segment files."""
    files = [p.stat() for p in folder.rglob("*") if p.is_file()]
    return round(sum(f.st_blocks * 512 for f in files) / 2**20, 1), round(sum(f.st_size for f in files) / 2**20, 1)


def search_worker(questions: list[str]) -> None:
    """In a fresh process: open the store, ask the first question, then each one after another; print JSON."""
    from pstuts_pipeline.defs.resources import resources_from_env
    from pstuts_pipeline.search import retrieval

    resources = resources_from_env()
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    model = embeddings.query_embeddings()
    model.embed_query("warm up")  # the model's load is not the store's
    started = time.perf_counter()
    with qdrant.get_store(read_only=True) as store:
        opened = time.perf_counter() - started
        rss_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        first_started = time.perf_counter()
        retrieval.search(store, model, embeddings.model_id, questions[0], 5)
        first = time.perf_counter() - first_started
        seconds = []
        for question in questions[1:]:
            one = time.perf_counter()
            retrieval.search(store, model, embeddings.model_id, question, 5)
            seconds.append(time.perf_counter() - one)
    ordered = sorted(seconds)
    print(
        json.dumps(
            {
                "open_s": round(opened, 3),
                "first_question_ms": round(first * 1000, 1),
                "warm_p50_ms": round(statistics.median(ordered) * 1000, 1),
                "warm_p95_ms": round(ordered[round(0.95 * (len(ordered) - 1))] * 1000, 1),
                "rss_after_open_mb": round(rss_open, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            }
        )
    )


def tick_worker() -> None:
    """In a fresh process: the folder sensor's tick with nothing to do; print its seconds."""
    import dagster as dg

    from pstuts_pipeline.defs.reconcile import plan_tick
    from pstuts_pipeline.defs.resources import resources_from_env

    r = resources_from_env()
    with dg.DagsterInstance.get() as instance:
        started = time.perf_counter()
        plan = plan_tick(instance, r["transcript_source"], r["embeddings"], r["chunker"], r["qdrant"], "sensor")
        seconds = time.perf_counter() - started
    print(json.dumps({"tick_s": round(seconds, 2), "runs": len(plan.run_requests), "skip": plan.skip_reason}))


def worker_json(space: Workspace, name: str, args: list[str]) -> dict:
    run = run_child(name, [sys.executable, "-m", "benchmarks.store_growth", *args], space.env(), space.logs)
    result = json.loads(run.output.strip().splitlines()[-1])
    return {**result, "process_s": run.seconds, "process_peak_rss_mb": run.peak_rss_mb}


def ask_page(space: Workspace, questions: list[str]) -> dict:
    """`pstuts serve` with CLIENTS clients asking PER_CLIENT questions each, all at once: seconds per answer."""
    from pstuts_pipeline_tests.support.servers import free_port, http_json

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*pstuts_command(), "serve", "--port", str(port)]
    seconds: list[float] = []
    with child(command, space.env(), space.logs / "serve.log", f"{url}/api/status", "pstuts serve"):
        http_json(f"{url}/api/ask", {"question": "warm up"}, timeout=300)

        def client(number: int) -> None:
            for question in questions[number * PER_CLIENT : (number + 1) * PER_CLIENT]:
                started = time.perf_counter()
                http_json(f"{url}/api/ask", {"question": question}, timeout=300)
                seconds.append(time.perf_counter() - started)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return percentiles(seconds)


def measure(space: Workspace, size: int, ingest, questions: list[str]) -> dict:  # noqa: ANN001 - a Run
    """Everything measured at one size, once its last videos were ingested for real by `ingest`."""
    ingested = ingest.details["videos_ingested"]
    row = {
        "videos": size,
        "points": ingest.details["points"],
        "ingest_videos": ingested,
        "ingest_s": ingest.seconds,
        "ingest_videos_per_s": round(ingested / ingest.seconds, 2),
        "ingest_peak_rss_mb": ingest.peak_rss_mb,
        "store_mb_on_disk_and_apparent": disk_mb(space.storage / "qdrant"),
    }
    noop = space.ingest(f"noop-store-{size}")
    assert noop.details["videos_ingested"] == 0, noop.output[-2000:]
    row["noop_ingest_reading_store_s"] = noop.seconds
    noop = space.ingest(f"noop-ledger-{size}")
    row["noop_ingest_ledger_s"] = noop.seconds
    row["noop_ingest_ledger_rss_mb"] = noop.peak_rss_mb
    row["sensor_tick"] = worker_json(space, f"tick-{size}", ["--tick-worker"])
    search = run_child(
        f"search-{size}", [*pstuts_command(), "search", questions[0], "--top-k", "5"], space.env(), space.logs
    )
    row["search_command_s"], row["search_command_rss_mb"] = search.seconds, search.peak_rss_mb
    row["search_process"] = worker_json(space, f"searches-{size}", ["--search-worker", json.dumps(questions)])
    row["ask_page_10_clients"] = ask_page(space, questions)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="65,1000,10000")
    parser.add_argument("--tail", type=int, default=100, help="videos of each larger size ingested for real")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pstuts-store-growth"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--search-worker")
    parser.add_argument("--tick-worker", action="store_true")
    args = parser.parse_args()
    if args.search_worker:
        return search_worker(json.loads(args.search_worker))
    if args.tick_worker:
        return tick_worker()

    from pstuts_pipeline.search.evaluation import load_questions

    questions = [q.text for q in load_questions([PSTUTS_DIR / "dev.json"])][: max(QUESTIONS, CLIENTS * PER_CLIENT)]
    originals = [v for f in FILES for v in json.loads(f.read_text())]
    sizes = [int(s) for s in args.sizes.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    space = Workspace(args.work, "corpus")
    space.link(FILES)
    rows = []
    started = time.perf_counter()
    ingest = space.ingest("fresh-real")  # the real videos, fresh
    rows.append(measure(space, len(originals), ingest, questions))
    print(json.dumps(rows[-1]), flush=True)
    models = templates(space)
    copies = 0  # copies in the corpus so far
    for size in sizes:
        if size <= len(originals):
            continue
        bulk = size - len(originals) - copies - args.tail
        files = [
            copies_file(space.data, originals, copies + start, min(COPIES_PER_FILE, bulk - start))
            for start in range(0, bulk, COPIES_PER_FILE)
        ]
        built = time.perf_counter()
        written = bulk_write(space, files, models) if files else 0
        copies += written
        bulk_s = time.perf_counter() - built
        run_child(f"register-{size}", [*pstuts_command(), "register"], space.env(), space.logs)
        copies_file(space.data, originals, copies, args.tail)
        copies += args.tail
        ingest = space.ingest(f"tail-{size}")
        assert ingest.details["videos_ingested"] == args.tail, ingest.output[-2000:]
        rows.append({**measure(space, size, ingest, questions), "bulk_videos": written, "bulk_s": round(bulk_s, 1)})
        print(json.dumps(rows[-1]), flush=True)
    result = {"rows": rows, "load_average": os.getloadavg(), "seconds": round(time.perf_counter() - started)}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    shutil.rmtree(space.root / "storage" / "io", ignore_errors=True)


if __name__ == "__main__":
    main()
