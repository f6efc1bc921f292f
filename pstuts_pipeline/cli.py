"""The `pstuts` command: ingest the data folder through Dagster, search the collection, score the search."""

import json
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Tutorial transcripts to a searchable Qdrant collection.")
console = Console(stderr=True)


TrainFiles = Annotated[list[Path], typer.Option("--train", help="PsTuts-VQA-format file to train on (repeatable).")]
DevFiles = Annotated[list[Path], typer.Option("--dev", help="File to validate on, never trained on (repeatable).")]
OutDir = Annotated[Path | None, typer.Option("--out", help="Parent folder of model versions.")]
MaxSteps = Annotated[int, typer.Option(min=0, help="Cap on steps (0 = no cap).")]
EvalSteps = Annotated[int, typer.Option(min=0, help="Evaluate on dev every N steps (0 = start and end).")]
Threads = Annotated[int, typer.Option(min=1, help="Torch threads (1 is fastest on a shared CPU).")]


def _training_files(train: list[Path], dev: list[Path], out: Path | None) -> dict[str, object]:
    """The files and output folder of a training command, as the training assets' config takes them."""
    return {
        "train_files": [str(f.resolve()) for f in train],
        "dev_files": [str(f.resolve()) for f in dev],
        "out_dir": str(out.resolve()) if out else "",
    }


def _definitions():
    from pstuts_pipeline.definitions import defs

    return defs


def _mmss(seconds: float) -> str:
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


@app.command()
def ingest(
    video: Annotated[list[str] | None, typer.Option("--video", help="Only these video ids (repeatable).")] = None,
    force: Annotated[bool, typer.Option(help="Re-ingest even videos that look unchanged.")] = False,
) -> None:
    """Register every video in the data folder as a partition and materialize the new or changed ones."""
    from pstuts_pipeline.ingest import ingest as run_ingest
    from pstuts_pipeline.ingest import instance_for_cli, unchanged_report
    from pstuts_pipeline.resources import resources_from_env

    # With nothing to do, the ledger says so without importing the pipeline, Qdrant or Dagster's storage.
    report = None if force else unchanged_report(resources_from_env(), only=video)
    if report is None:
        instance = instance_for_cli()
        defs = _definitions()
        with console.status("starting") as status:
            report = run_ingest(defs, instance, only=video, force=force, on_progress=lambda m: status.update(m))
    plan = report.plan
    table = Table(title="pstuts ingest", show_header=False)
    table.add_row("videos ingested", str(len(plan.to_ingest)))
    table.add_row("videos unchanged (skipped)", str(len(plan.unchanged)))
    table.add_row("videos removed", str(len(plan.removed)))
    table.add_row("videos failed", str(len(plan.failed)))
    table.add_row("chunks written", str(report.chunks))
    table.add_row("points in collection", str(report.points_in_collection))
    table.add_row("seconds", f"{report.seconds:.1f}")
    if report.step_seconds:
        from pstuts_pipeline.assets import INGESTION_ASSET_NAMES

        for step, seconds in report.step_seconds.items():
            if step in INGESTION_ASSET_NAMES:
                table.add_row(f"  {step}", f"{seconds:.1f}s")
    table.add_row("dagster home", report.dagster_home)
    console.print(table)
    for key, error in plan.failed.items():
        console.print(f"[red]failed[/red] {key}: {escape(str(error))}")
    for run in report.failed_runs:
        console.print(f"[red]run failed[/red] for videos {escape(run)} (full logs in `dagster dev`)")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def register() -> None:
    """Register every video in the data folder as a partition, so `dagster asset materialize --partition ID` works."""
    from pstuts_pipeline.ingest import instance_for_cli, register_partitions
    from pstuts_pipeline.transcripts import load_catalog

    instance = instance_for_cli()
    catalog = load_catalog(_definitions().resources["transcript_source"].path())
    keys = register_partitions(instance, list(catalog.videos), removed=[])
    console.print(f"{len(keys)} video partitions registered in {instance.root_directory}")
    for error in catalog.errors:
        console.print(f"[red]not registered[/red]: {error}")
    if catalog.errors:
        raise typer.Exit(1)


@app.command()
def tune(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training pairs.")] = 2.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Pairs per step.")] = 64,
    max_steps: MaxSteps = 0,
    eval_steps: EvalSteps = 0,
    threads: Threads = 1,
) -> None:
    """Fine-tune the embedder on the training files' questions (the `tuned_embedder` asset); print the model folder."""
    from pstuts_pipeline.assets.tuning import TunedEmbedderConfig, materialize_tuned_embedder
    from pstuts_pipeline.ingest import instance_for_cli

    config = TunedEmbedderConfig(
        **_training_files(train, dev, out), epochs=epochs, batch_size=batch_size, max_steps=max_steps,
        eval_steps=eval_steps, threads=threads,
    )
    event = materialize_tuned_embedder(instance_for_cli(), config)
    table = Table(title="pstuts tune", show_header=False)
    for name in ("pairs", "steps", "training_seconds", "dev_accuracy@5", "dev_mrr@10"):
        table.add_row(name, str(event.metadata[name].value))
    console.print(table)
    console.print(event.metadata["dev_metrics"].value)
    console.print("use it: PSTUTS_EMBEDDING_MODEL=<folder below> (or =latest), then `pstuts ingest` into a new collection")
    print(event.metadata["model_folder"].value, flush=True)


@app.command("tune-reranker")
def tune_reranker(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training questions.")] = 1.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Questions per step.")] = 32,
    max_steps: MaxSteps = 0,
    learning_rate: Annotated[float, typer.Option(min=0, help="Peak learning rate.")] = 5e-5,
    eval_steps: EvalSteps = 0,
    threads: Threads = 1,
) -> None:
    """Train the cross-encoder reranker on the training files' questions (the `reranker` asset); print its folder."""
    from pstuts_pipeline.assets.reranker import RerankerConfig, materialize_reranker
    from pstuts_pipeline.ingest import instance_for_cli

    config = RerankerConfig(
        **_training_files(train, dev, out), epochs=epochs, batch_size=batch_size, max_steps=max_steps,
        learning_rate=learning_rate, eval_steps=eval_steps, threads=threads,
    )
    event = materialize_reranker(instance_for_cli(), config)
    table = Table(title="pstuts tune-reranker", show_header=False)
    for name in ("pairs", "steps", "training_seconds", "dev_mrr@10"):
        table.add_row(name, str(event.metadata[name].value))
    console.print(table)
    console.print(event.metadata["dev_metrics"].value)
    console.print("use it: PSTUTS_RERANKER=<folder below> (or =latest) with `pstuts search` / `pstuts evaluate`")
    print(event.metadata["model_folder"].value, flush=True)


def _print_results(question: str, results: list, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"question": question, "results": [r.as_json() for r in results]}), flush=True)
        return
    print(f"\n? {question}")
    for rank, r in enumerate(results, 1):
        print(f"{rank}. {r.title}  [{_mmss(r.link_time)}]  score {r.score:.3f}")
        print(f"   {r.link}")
        print(f"   chunk {_mmss(r.start)}-{_mmss(r.stop)}: {_snippet(r.text, r.link_sentence)}")


def _snippet(text: str, sentence: str, width: int = 400) -> str:
    """The chunk around its linked sentence, which is marked, so the mark is never cut off."""
    at = text.find(sentence) if sentence else -1
    if at < 0:
        return text[:width] + ("..." if len(text) > width else "")
    begin = max(0, min(at - (width - len(sentence)) // 2, len(text) - width))
    end = max(begin + width, at + len(sentence))
    marked = text[begin:at] + f">>> {sentence} <<<" + text[at + len(sentence) : end]
    return ("..." if begin else "") + marked + ("..." if end < len(text) else "")


@app.command()
def search(
    question: Annotated[str | None, typer.Argument(help="The question to answer.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Results per question.")] = 5,
    questions: Annotated[Path | None, typer.Option(help="A file of questions, one per line.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line per question.")] = False,
) -> None:
    """Find the chunks, and the moments inside them, that answer a question."""
    from pstuts_pipeline import retrieval

    if (question is None) == (questions is None):
        console.print("give either a QUESTION or --questions FILE")
        raise typer.Exit(2)
    asked = [question] if question else [q.strip() for q in questions.read_text().splitlines() if q.strip()]
    resources = _definitions().resources
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    model = embeddings.query_embeddings()
    with qdrant.get_client() as client:
        if not client.collection_exists(qdrant.collection):
            console.print(f"collection {qdrant.collection!r} does not exist yet: run `pstuts ingest` first")
            raise typer.Exit(1)
        ranked = retrieval.search_many(
            client, qdrant.collection, model, embeddings.model_id, asked, top_k, reranker=resources["reranker"].get()
        )
        for q, results in zip(asked, ranked):
            _print_results(q, results, as_json)


@app.command()
def evaluate(
    qa: Annotated[list[Path], typer.Option("--qa", help="PsTuts-VQA-format file of questions (repeatable).")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Results per question (metrics use k<=10).")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as one JSON object.")] = False,
) -> None:
    """Score search on QA pairs: hit@k (answer's chunk found), link@k (link within 15 s of it), mrr@10."""
    from pstuts_pipeline import evaluation, retrieval

    questions = evaluation.load_questions(qa)
    resources = _definitions().resources
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    with qdrant.get_client() as client:
        if not client.collection_exists(qdrant.collection):
            console.print(f"collection {qdrant.collection!r} does not exist yet: run `pstuts ingest` first")
            raise typer.Exit(1)
        ranked = retrieval.search_many(
            client, qdrant.collection, embeddings.query_embeddings(), embeddings.model_id, [q.text for q in questions],
            top_k, reranker=resources["reranker"].get(),
        )
    asked = evaluation.folder_questions(resources["transcript_source"].path())
    metrics = evaluation.evaluate(questions, ranked, asked=asked)
    if as_json:
        print(json.dumps(metrics), flush=True)
        return
    single = int(metrics[f"{evaluation.UNAMBIGUOUS}_questions"])
    table = Table(title=f"pstuts evaluate: {len(questions)} questions ({single} asked of one video only), top {top_k}")
    table.add_column("metric")
    table.add_column("all", justify="right")
    table.add_column("asked of one video", justify="right")
    names = [f"{kind}@{k}" for kind in ("hit", "link") for k in evaluation.KS if k <= top_k]
    for name in [*names, *(f"video@{k}" for k in evaluation.VIDEO_KS), "mrr@10"]:
        table.add_row(name, f"{metrics[name]:.3f}", f"{metrics[f'{evaluation.UNAMBIGUOUS}_{name}']:.3f}")
    out = Console()
    out.print(table)
    out.print(f"median distance from the first hit's link to the answer {metrics['median_link_distance_s']:.1f} s")


def main() -> None:
    """Console-script entry point."""
    # Dagster flags preview features (partitioned checks) at import; users of the CLI cannot act on that.
    warnings.filterwarnings("ignore", module="dagster")
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - a clear one-line error beats a traceback for users
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
