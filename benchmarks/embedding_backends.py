"""The local model backends side by side in one run: torch, onnx and onnx-int8, for the embedder and the reranker.

Each column sets PSTUTS_EMBEDDING_BACKEND and PSTUTS_RERANKER_BACKEND to its backend; with --embedder-backend B the
embedder runs on B in every column, so the columns differ in the reranker alone (its quality on one first stage).

Run from the checkout:  .venv/bin/python -m benchmarks.embedding_backends [--reranker DIR] [--json out.json]

For each backend:
  - one process (peak RSS is its own): load the model, embed every train+dev phrase and the three-phrase windows the
    chunker embeds (texts per second), ingest train+dev in process, embed the collection's chunks (texts per
    second), then the 2,524 dev questions scored as in benchmarks/rerank_benchmark.py (hit@5, link@5, video@5,
    mrr@10, also on questions asked of one video) and single-question search p50/p95, without and with the reranker;
  - `pstuts ingest` fresh, then unchanged, in fresh folders, against benchmarks/reference_ingest.py (before and
    after the backends; the median), as benchmarks/ingest_speed.py runs them; then one `pstuts search` (startup).
The ONNX exports are made once at the start (their seconds are reported) into one folder all runs share.
Without --reranker, a cross-encoder is made from MiniLM with a seeded, untrained head: its latency is a trained one's,
its rankings mean nothing.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from benchmarks.ingest_speed import reference, snapshot_code
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR, link_into
from pstuts_pipeline_tests.support.workspace import Workspace, load, machine, pstuts_command, run_child

BACKENDS = ("torch", "onnx", "onnx-int8")
FILES = [PSTUTS_DIR / "train.json", PSTUTS_DIR / "dev.json"]
QUESTION = "How do I open Free Transform?"
SHOWN = ("hit@5", "link@5", "video@5", "mrr@10")


def untrained_reranker(folder: Path) -> Path:
    """A cross-encoder folder shaped like `pstuts tune-reranker`'s, with a seeded head (for latency only)."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    from pstuts_pipeline.embedding import bundled_model_path

    torch.manual_seed(0)
    CrossEncoder(str(bundled_model_path()), num_labels=1, max_length=64, device="cpu", local_files_only=True).save(
        str(folder)
    )
    return folder


def texts_per_second(model, texts: list[str]) -> float:  # noqa: ANN001 - a LangChain Embeddings
    started = time.perf_counter()
    model.embed_documents(texts)
    return round(len(texts) / (time.perf_counter() - started), 1)


def one_backend(
    backend: str,
    storage: Path,
    reranker_folder: str,
    latency_sample: int,
    quick: bool = False,
    embedder_backend: str | None = None,
) -> dict:
    """Everything measured in this process for one backend (run as a child: its peak RSS is its own)."""
    from benchmarks.rerank_benchmark import measure
    from benchmarks.tune_embedder import ingest_collection
    from pstuts_pipeline import embedding
    from pstuts_pipeline.search import evaluation, reranking
    from pstuts_pipeline.sources import load_catalog

    embedder_backend = embedder_backend or backend
    os.environ.update(PSTUTS_EMBEDDING_BACKEND=embedder_backend, PSTUTS_RERANKER_BACKEND=backend)
    videos = list(load_catalog(FILES).videos.values())
    phrases = [p.text for v in videos for p in v.phrases]
    windows = [
        " ".join(p.text for p in v.phrases[max(0, i - 1) : i + 2]) for v in videos for i in range(len(v.phrases))
    ]
    started = time.perf_counter()
    model = embedding.load_embeddings(embedding.EmbeddingSpec(backend=embedder_backend))
    model.embed_documents(["warm up"])
    row: dict = {"load_s": round(time.perf_counter() - started, 2)}
    row["phrases_per_s"] = texts_per_second(model, phrases)
    row["windows_per_s"] = None if quick else texts_per_second(model, windows)

    data_dir = storage / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    link_into(data_dir, FILES)
    defs, report, row["ingest_in_process_s"] = ingest_collection("", data_dir, storage / "store")
    qdrant = defs.resources["qdrant"]
    with qdrant.get_store() as store:
        points, _ = store.scroll(limit=100_000, with_payload=["page_content"])
    row["collection_model"] = defs.resources["embeddings"].model_id
    chunks = [p.payload["page_content"] for p in points]
    row["chunks"] = len(chunks)
    row["chunks_per_s"] = texts_per_second(model, chunks)

    questions = evaluation.load_questions(FILES[1:])
    asked = evaluation.load_questions(FILES[:1])
    reranker = reranking.load_reranker(reranker_folder, reranking.RerankSettings(), backend)
    for suffix, used in (("", None), ("+rerank", reranker)):
        # --quick: with the reranker, only its latency (on the timed sample), not the dev metrics of all questions.
        asked_here = questions[:latency_sample] if quick and used else questions
        metrics = measure(defs, asked_here, asked, used, latency_sample)
        row.update({f"{name}{suffix}": value for name, value in metrics.items()})
    row["questions"] = len(questions)
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return row


def export_all(onnx_dir: Path, reranker_folder: Path) -> dict[str, float]:
    """Make every ONNX export once, up front; the seconds each took (a one-time cost per machine and model)."""
    from pstuts_pipeline.embedding import bundled_model_path, onnx

    seconds = {}
    for backend in BACKENDS[1:]:
        for kind, source in (("embedder", bundled_model_path()), ("reranker", reranker_folder)):
            started = time.perf_counter()
            onnx.exported(Path(source), backend, kind, onnx_dir)
            seconds[f"{kind}-{backend}"] = round(time.perf_counter() - started, 1)
    return seconds


def cli_runs(root: Path, onnx_dir: Path, backend: str) -> dict:
    """`pstuts ingest` fresh and unchanged, then one `pstuts search`, in fresh folders with this backend."""
    space = Workspace(
        root, f"cli_{backend}", {"PSTUTS_EMBEDDING_BACKEND": backend, "PSTUTS_ONNX_MODELS_DIR": str(onnx_dir)}
    )
    space.link(FILES)
    fresh, unchanged = space.ingest("fresh"), space.ingest("unchanged")
    search = run_child("search", [*pstuts_command(), "search", QUESTION, "--top-k", "3"], space.env(), space.logs)
    return {
        "fresh_s": fresh.seconds,
        "fresh_peak_rss_mb": fresh.peak_rss_mb,
        "unchanged_s": unchanged.seconds,
        "unchanged_to_fresh": round(unchanged.seconds / fresh.seconds, 4),
        "search_cli_s": search.seconds,
        "points": fresh.details["points"],
    }


def table(results: dict) -> str:
    rows, reference_s = results["backends"], results["reference_s"]
    lines = ["| | " + " | ".join(rows) + " |", "|---|" + "---:|" * len(rows)]

    def line(label: str, value) -> None:  # noqa: ANN001
        def shown(row: dict) -> str:
            try:
                return value(row)
            except (KeyError, TypeError):  # not measured in this run (--no-cli, --quick)
                return "-"

        lines.append(f"| {label} | " + " | ".join(shown(r) for r in rows.values()) + " |")

    line("model load + first text, new process (s)", lambda r: f"{r['load_s']:.1f}")
    for key, label in (("phrases", "phrases"), ("windows", "3-phrase windows (chunker)"), ("chunks", "chunks")):
        line(f"{label}, texts/s", lambda r, key=key: f"{r[f'{key}_per_s']:.0f}")
    line("`pstuts ingest` fresh (s)", lambda r: f"{r['fresh_s']:.1f}")
    line("fresh / reference script", lambda r: f"{r['fresh_s'] / reference_s:.2f}x")
    line("`pstuts ingest` unchanged (s)", lambda r: f"{r['unchanged_s']:.1f} ({r['unchanged_to_fresh']:.1%})")
    line("`pstuts search` one question, whole process (s)", lambda r: f"{r['search_cli_s']:.1f}")
    line("search p50 / p95, one question (ms)", lambda r: f"{r['single_p50_ms']:.1f} / {r['single_p95_ms']:.1f}")
    line("with reranker p50 / p95 (ms)", lambda r: f"{r['single_p50_ms+rerank']:.1f} / {r['single_p95_ms+rerank']:.1f}")
    line(
        "peak RSS: fresh ingest / benchmark process (MB)",
        lambda r: f"{r['fresh_peak_rss_mb']:.0f} / {r['peak_rss_mb']:.0f}",
    )
    for prefix, label in (("", ""), ("unambiguous_", " (asked of one video)")):
        for name in SHOWN:
            line(f"dev {name}{label}", lambda r, key=prefix + name: f"{r[key]:.3f}")
    return "\n".join(lines)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--reranker", type=Path, help="A reranker folder (default: an untrained one, latency only).")
    parser.add_argument(
        "--embedder-backend", choices=BACKENDS, help="The embedder's backend in every column (the reranker's varies)."
    )
    parser.add_argument("--latency-sample", type=int, default=100, help="Questions timed one at a time.")
    parser.add_argument("--json", type=Path, help="Also write the results here.")
    parser.add_argument(
        "--no-cli",
        action="store_true",
        help="Skip the reference script and the `pstuts ingest` / `pstuts search` processes (in-process figures only).",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="For a busy machine: one reference run, no window texts/s, reranker latency only (not its dev metrics).",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: one backend's in-process measurements
    parser.add_argument("--storage", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child:
        row = one_backend(
            args.child, args.storage, str(args.reranker), args.latency_sample, args.quick, args.embedder_backend
        )
        args.json.write_text(json.dumps(row))
        return

    root = Path(tempfile.mkdtemp(prefix="embedding_backends_"))
    code, code_info = snapshot_code(root)
    onnx_dir = root / "onnx_models"
    os.environ["PSTUTS_ONNX_MODELS_DIR"] = str(onnx_dir)
    reranker_folder = (args.reranker or untrained_reranker(root / "reranker")).resolve()
    results: dict = {"machine": machine(), "code": code_info, "load_before": load(), "reranker": str(reranker_folder)}
    results["embedder_backend"] = args.embedder_backend or "the column's"
    results["export_s"] = export_all(onnx_dir, reranker_folder)
    print(f"exports: {results['export_s']}", flush=True)
    references = (
        [] if args.no_cli else [reference(code / "reference_ingest.py", FILES, root, "reference_before").seconds]
    )
    print(f"reference {references}s", flush=True)
    results["backends"] = {}
    for backend in args.backends:
        out = root / f"{backend}.json"
        command = [sys.executable, "-m", "benchmarks.embedding_backends", "--child", backend, "--json", str(out)]
        command += ["--storage", str(root / f"inproc_{backend}"), "--reranker", str(reranker_folder)]
        command += ["--latency-sample", str(args.latency_sample)] + (["--quick"] if args.quick else [])
        command += ["--embedder-backend", args.embedder_backend] if args.embedder_backend else []
        subprocess.run(command, check=True, cwd=Path(__file__).resolve().parents[1])
        row = json.loads(out.read_text()) | ({} if args.no_cli else cli_runs(root, onnx_dir, backend))
        results["backends"][backend] = row
        print(backend, json.dumps(row), flush=True)
    if not (args.quick or args.no_cli):
        references.append(reference(code / "reference_ingest.py", FILES, root, "reference_after").seconds)
    results["reference_runs_s"] = references
    results["reference_s"] = round(sum(references) / len(references), 2) if references else None
    results["load_after"] = load()
    print(
        f"\n{time.strftime('%Y-%m-%d %H:%M')}; machine {results['machine']}; load avg before {results['load_before']}, "
        f"after {results['load_after']}; reference script runs {references} s; exports {results['export_s']}; "
        f"embedder backend: {results['embedder_backend']}\n"
    )
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
