"""The `pstuts` command: ingest the data folder through Dagster, search the collection, score the search."""

import functools
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pstuts_pipeline.redaction import redact
from pstuts_pipeline.text_safety import printable, safe_link

if TYPE_CHECKING:
    import dagster as dg
    from rich.console import JustifyMethod

    from pstuts_pipeline.defs.resources import (
        ChatModelResource,
        ChunkerResource,
        EmbeddingsResource,
        QdrantResource,
        RerankerResource,
        TranscriptSource,
    )
    from pstuts_pipeline.search.store import Store

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Tutorial transcripts to a searchable Qdrant collection."
)
console = Console(stderr=True)
# What a user waits for is the whole command, imports and model loading included, not only the work inside it.
COMMAND_STARTED = time.perf_counter()
_option_type = typer.core.TyperOption.display_type_rich


def _flag_without_type(self: typer.core.TyperOption, ctx: "typer.Context") -> str | None:
    """Typer 0.29 labels every flag `<bool>` in help, though a flag takes no value: show no type for flags."""
    return None if self.is_flag else _option_type(self, ctx)


# A patch of typer's method (its ctx is typer's vendored click Context); the CLI split removes it (issue 37 item 3).
typer.core.TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign,assignment]


TrainFiles = Annotated[list[Path], typer.Option("--train", help="PsTuts-VQA-format file to train on (repeatable).")]
DevFiles = Annotated[list[Path], typer.Option("--dev", help="File to validate on, never trained on (repeatable).")]
OutDir = Annotated[Path | None, typer.Option("--out", help="Parent folder of model versions.")]
MaxSteps = Annotated[int, typer.Option(min=0, help="Cap on steps (0 = no cap).")]
EvalSteps = Annotated[int, typer.Option(min=0, help="Evaluate on dev every N steps (0 = start and end).")]
Threads = Annotated[
    int, typer.Option(min=1, help="Torch threads (default: all cores; 1 is fastest on a CPU busy with other work).")
]
# A user's machine is rarely shared: train on every core it gives this process.
ALL_CORES = len(os.sched_getaffinity(0))


@app.callback()
def options(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show libraries' progress bars, banners and warnings.")
    ] = False,
) -> None:
    """Tutorial transcripts to a searchable Qdrant collection."""
    if not verbose:
        from pstuts_pipeline.settings import quiet_third_party

        quiet_third_party()
        warnings.filterwarnings("ignore")
        logging.getLogger("sentence_transformers").setLevel(logging.ERROR)


class TrainingFiles(TypedDict):
    train_files: list[str]
    dev_files: list[str]
    out_dir: str


def _training_files(train: list[Path], dev: list[Path], out: Path | None) -> TrainingFiles:
    """The files and output folder of a training command, as the training assets' config takes them."""
    return {
        "train_files": [str(f.resolve()) for f in train],
        "dev_files": [str(f.resolve()) for f in dev],
        "out_dir": str(out.resolve()) if out else "",
    }


@functools.cache
def _definitions() -> "dg.Definitions":
    """The code location, built once per command."""
    from pstuts_pipeline.definitions import build_definitions

    return build_definitions()


class Resources(TypedDict):
    """What `resources_from_env` builds, by name (it types them all as dg.ConfigurableResource)."""

    transcript_source: "TranscriptSource"
    embeddings: "EmbeddingsResource"
    reranker: "RerankerResource"
    chunker: "ChunkerResource"
    qdrant: "QdrantResource"
    chat_model: "ChatModelResource"


def _resources() -> Resources:
    """The resources the environment configures, for commands that read or search and run no job.

    Not the whole code location: a setting only the sensor, the schedules or the runs read must not stop a search.
    """
    from pstuts_pipeline.defs.resources import resources_from_env

    return cast(Resources, resources_from_env())


@app.command()
def ingest(
    video: Annotated[list[str] | None, typer.Option("--video", help="Only these video ids (repeatable).")] = None,
    force: Annotated[bool, typer.Option(help="Re-ingest even videos that look unchanged.")] = False,
    allow_mass_removal: Annotated[
        bool,
        typer.Option(help="Remove the videos whose files are gone even if they are most or all of the collection."),
    ] = False,
) -> None:
    """Register every video in the data folder as a partition and materialize the new or changed ones."""
    from pstuts_pipeline.cli.report import IngestSettings, unchanged_report

    # With nothing to do, the ledger says so without importing Dagster, the pipeline or Qdrant.
    config = IngestSettings.from_env()
    report = None if force else unchanged_report(config, only=video, allow_removal=allow_mass_removal)
    if report is None:
        from pstuts_pipeline.cli.ingest import ingest as run_ingest
        from pstuts_pipeline.cli.progress import Tracker
        from pstuts_pipeline.defs.instance import instance_for_cli

        instance = instance_for_cli()
        defs = _definitions()
        with Tracker(console, "pstuts ingest", "steps") as progress:
            report = run_ingest(
                defs, instance, only=video, force=force, on_progress=progress.update, allow_removal=allow_mass_removal
            )
    plan = report.plan
    for line in report.reclaimed:
        console.print(f"[yellow]reclaimed[/yellow] {escape(printable(line))}")
    table = Table(title="pstuts ingest", show_header=False)
    table.add_row("videos ingested", str(len(plan.to_ingest) - len(report.unfinished)))
    table.add_row("videos unchanged (skipped)", str(len(plan.unchanged)))
    table.add_row("videos removed", str(len(plan.removed)))
    if plan.held_back:
        table.add_row("videos kept (file unreadable)", str(len(plan.held_back)))
    table.add_row("videos failed", str(len(plan.failed) + len(report.unfinished)))
    table.add_row("chunks written", str(report.chunks))
    table.add_row("points in collection", str(report.points_in_collection))
    table.add_row("seconds", f"{time.perf_counter() - COMMAND_STARTED:.1f}")
    if report.step_seconds:
        from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES

        for step, seconds in report.step_seconds.items():
            if step in INGESTION_ASSET_NAMES:
                table.add_row(f"  {step}", f"{seconds:.1f}s")
    table.add_row("dagster home", report.dagster_home)
    console.print(table)
    for key, error in plan.failed.items():
        # A file's own errors already start with its name.
        _print_error("failed", error if error.startswith(f"{key}: ") else f"{key}: {error}")
    for run in report.failed_runs:
        _print_error("run failed", run)
    if plan.removal_refused:
        _print_error("removal refused:", plan.removal_refused)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def register() -> None:
    """Register every video in the data folder as a partition, so `dagster asset materialize --partition ID` works."""
    from pstuts_pipeline.cli.ingest import register_partitions
    from pstuts_pipeline.defs.instance import instance_for_cli
    from pstuts_pipeline.sources import load_catalog

    instance = instance_for_cli()
    catalog = load_catalog(_resources()["transcript_source"].path())
    keys = register_partitions(instance, catalog)
    console.print(f"{len(keys)} video partitions registered in {instance.root_directory}")
    for error in catalog.errors:
        _print_error("not registered:", str(error))
    if catalog.errors:
        raise typer.Exit(1)


@app.command("migrate-store")
def migrate_store() -> None:
    """Copy a store written by an older pstuts (qdrant-client's local mode) into Qdrant Edge, keeping the old one."""
    from pstuts_pipeline.search.migration import backup_folder, migrate_local_mode

    folder = _resources()["qdrant"].local_path
    copied = migrate_local_mode(folder)
    for collection, points in copied.items():
        console.print(f"{collection}: {points} points copied into Qdrant Edge", soft_wrap=True)
    console.print(f"{folder} is now a Qdrant Edge store; the old one is in {backup_folder(folder)}", soft_wrap=True)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def dev(context: typer.Context) -> None:
    """`dg dev` on the project's instance (DAGSTER_HOME, with its run queue and Qdrant writer pool)."""
    from pstuts_pipeline.defs.instance import prepare_home
    from pstuts_pipeline.settings import project_root

    home = prepare_home()
    os.environ["DAGSTER_HOME"] = str(home)
    # dg runs the project in the environment it finds active; this one is where pstuts (and so dg) is installed.
    os.environ["VIRTUAL_ENV"] = sys.prefix
    console.print(f"dg dev with DAGSTER_HOME={home}")
    dg_command = Path(sys.executable).with_name("dg")
    os.chdir(project_root())  # pyproject.toml's [tool.dg]
    os.execv(dg_command, [str(dg_command), "dev", *context.args])


@app.command()
def tune(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training pairs.")] = 2.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Pairs per step.")] = 64,
    max_steps: MaxSteps = 0,
    eval_steps: EvalSteps = 0,
    threads: Threads = ALL_CORES,
) -> None:
    """Fine-tune the embedder on the training files' questions (the `tuned_embedder` asset); print the model folder."""
    from pstuts_pipeline.defs.assets.tuning import TunedEmbedderConfig, materialize_tuned_embedder
    from pstuts_pipeline.defs.instance import instance_for_cli

    config = TunedEmbedderConfig(
        **_training_files(train, dev, out),
        epochs=epochs,
        batch_size=batch_size,
        max_steps=max_steps,
        eval_steps=eval_steps,
        threads=threads,
    )
    _print_trained(
        materialize_tuned_embedder(instance_for_cli(), config),
        "pstuts tune",
        ("pairs", "steps", "training_seconds", "dev_accuracy@5", "dev_mrr@10"),
        "use it: PSTUTS_EMBEDDING_MODEL=<folder below> (or =latest), then `pstuts ingest` into a new collection",
    )


def _print_trained(event: "dg.AssetMaterialization", title: str, names: tuple[str, ...], hint: str) -> None:
    """A training run's figures and dev metrics, how to use the model, and its folder as the last line."""
    table = Table(title=title, show_header=False)
    for name in names:
        table.add_row(name, str(event.metadata[name].value))
    console.print(table)
    console.print(event.metadata["dev_metrics"].value)
    console.print(hint)
    print(event.metadata["model_folder"].value, flush=True)


@app.command("tune-reranker")
def tune_reranker(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training questions.")] = 1.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Questions per step.")] = 32,
    max_steps: Annotated[
        int | None, typer.Option(min=0, help="Cap on steps (0 = no cap; default: the asset's, 220).")
    ] = None,
    learning_rate: Annotated[float, typer.Option(min=0, help="Peak learning rate.")] = 5e-5,
    eval_steps: EvalSteps = 0,
    threads: Threads = ALL_CORES,
) -> None:
    """Train the cross-encoder reranker on the training files' questions (the `reranker` asset); print its folder."""
    from pstuts_pipeline.defs.assets.reranker import DEFAULTS, RerankerConfig, materialize_reranker
    from pstuts_pipeline.defs.instance import instance_for_cli

    config = RerankerConfig(
        **_training_files(train, dev, out),
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        eval_steps=eval_steps,
        threads=threads,
        max_steps=DEFAULTS.max_steps if max_steps is None else max_steps,
    )
    _print_trained(
        materialize_reranker(instance_for_cli(), config),
        "pstuts tune-reranker",
        ("pairs", "steps", "training_seconds", "dev_mrr@10"),
        "use it: PSTUTS_RERANKER=<folder below> (or =latest) with `pstuts search` / `pstuts evaluate`",
    )


def _require_collection(store: "Store") -> None:
    """Stop with a hint when the collection is missing, empty or unreadable: none of these is "no matches"."""
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    collection = store.collection
    name = printable(repr(collection))
    try:
        exists = store.exists()
        points = store.count() if exists else 0
    except (ResponseHandlingException, UnexpectedResponse):
        raise  # a server that cannot be reached or refuses: the Qdrant resource names the server
    except Exception as error:  # noqa: BLE001 - any storage error: say it is the collection, not the question
        _print_error(
            "error:",
            f"collection {collection!r} cannot be read ({type(error).__name__}: {error}): the store looks damaged; "
            "re-create it with `pstuts ingest --force` (or restore a backup of the Qdrant folder)",
        )
        raise typer.Exit(1) from None
    if not exists:
        console.print(f"collection {escape(name)} does not exist yet: run `pstuts ingest` first", soft_wrap=True)
        raise typer.Exit(1)
    if points == 0:
        console.print(
            f"collection {escape(name)} is empty (its store may have been emptied or damaged): "
            "run `pstuts ingest --force` to fill it again",
            soft_wrap=True,
        )
        raise typer.Exit(1)


def _utf8_question(question: str) -> str:
    """A question typed in another encoding arrives with undecodable bytes as surrogates: refuse it by name."""
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        console.print(
            f"the question is not UTF-8 text (byte {error.start} cannot be read): set a UTF-8 locale, "
            "or give the question in UTF-8",
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    return question


def _checked(question: str) -> str:
    """The question as search and answers take it, or exit 2 with the same reason the API gives."""
    from pstuts_pipeline.search.questions import QuestionError, checked_question

    try:
        return checked_question(_utf8_question(question))
    except QuestionError as error:
        console.print(escape(printable(str(error))), soft_wrap=True)
        raise typer.Exit(2) from None


def _print_results(question: str, results: list, as_json: bool, threshold: float = 0.0) -> None:
    from pstuts_pipeline.answers.answering import mmss
    from pstuts_pipeline.search import confidence

    answered = confidence.answers_well(results, threshold)
    if as_json:
        reply = {
            "question": question,
            "answered": answered,
            "min_confidence": threshold,
            "note": None if answered else confidence.NO_GOOD_MATCH,
            "results": [r.as_json() for r in results],
        }
        print(json.dumps(reply), flush=True)
        return
    print(f"\n? {printable(question)}")
    if not answered:
        print(confidence.NO_GOOD_MATCH)
    for rank, r in enumerate(results, 1):
        weak = "" if r.confidence >= threshold else "  weak match"
        print(f"{rank}. {printable(r.title)}  [{mmss(r.link_time)}]  confidence {percent(r.confidence)}{weak}")
        link = safe_link(r.link) if r.link else ""
        print(f"   {link}" if link else f"   at {mmss(r.link_time)} in {printable(r.source_file or r.title)}")
        print(f"   chunk {mmss(r.start)}-{mmss(r.stop)}: {printable(_snippet(r.text, r.link_sentence))}")


def percent(value: float) -> str:
    """A confidence as a learner reads it."""
    return f"{100 * value:.0f}%"


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
    """Find the chunks, and the moments inside them, that answer a question, each with how likely it holds the answer."""
    from pstuts_pipeline.search import confidence, retrieval

    if question is not None and questions is None:
        asked = [question]
    elif questions is not None and question is None:
        asked = [q.strip() for q in questions.read_text().splitlines() if q.strip()]
    else:
        console.print("give either a QUESTION or --questions FILE")
        raise typer.Exit(2)
    if not asked:
        console.print(f"{escape(printable(str(questions)))} holds no question", soft_wrap=True)
        raise typer.Exit(2)
    asked = [_checked(q) for q in asked]
    threshold = confidence.threshold()
    resources = _resources()
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    with qdrant.get_store(read_only=True) as store:
        _require_collection(store)
        model = embeddings.query_embeddings()
        ranked = retrieval.search_many(
            store, model, embeddings.model_id, asked, top_k, reranker=resources["reranker"].get()
        )
        for q, results in zip(asked, ranked):
            _print_results(q, results, as_json, threshold)


@app.command()
def videos(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object: the videos, and the collection.")] = False,
) -> None:
    """List the videos the collection holds: title, chunks, points, when ingested, from which file."""
    import dagster as dg

    from pstuts_pipeline.defs.instance import instance_for_cli
    from pstuts_pipeline.defs.materializations import latest_by_partition
    from pstuts_pipeline.search import vectorstore

    qdrant = _resources()["qdrant"]
    with qdrant.get_store(read_only=True) as store:
        _require_collection(store)
        stored = vectorstore.stored_videos(store)
    with instance_for_cli() as instance:
        latest = latest_by_partition(instance, dg.AssetKey("qdrant_collection"), [str(v) for v in stored])
    rows = []
    for video_id, video in stored.items():
        record = latest.get(str(video_id))
        materialization = record.asset_materialization if record else None
        written = materialization.metadata.get("points_written") if materialization else None
        rows.append(
            {
                "video_id": video_id,
                "title": video["title"],
                "chunks": written.value if written is not None else None,
                "points": video["points"],
                "ingested": _iso(record.timestamp) if record else None,
                "source_file": video["source_file"],
            }
        )
    if as_json:
        print(json.dumps({"collection": qdrant.collection, "videos": rows}), flush=True)
        return
    table = Table(title=f"{len(rows)} videos in {escape(printable(repr(qdrant.collection)))}")
    columns: list[tuple[str, JustifyMethod]] = [
        ("video", "right"),
        ("title", "left"),
        ("chunks", "right"),
        ("points", "right"),
    ]
    for name, justify in columns:
        table.add_column(name, justify=justify)
    table.add_column("ingested (UTC)")
    table.add_column("file")
    for row in rows:
        table.add_row(
            str(row["video_id"]),
            escape(printable(row["title"])),
            "?" if row["chunks"] is None else str(row["chunks"]),
            str(row["points"]),
            row["ingested"] or "?",
            escape(printable(row["source_file"])),
        )
    Console(width=max(Console().width, 130)).print(table)
    if any(row["ingested"] is None for row in rows):
        console.print("?: not ingested through this Dagster instance (DAGSTER_HOME)", soft_wrap=True)


def _iso(timestamp: float) -> str:
    """A materialization's time, to the second, in UTC."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


HOW_TO_GENERATE = (
    "extractive answer (no chat model configured): set PSTUTS_CHAT_MODEL, and PSTUTS_CHAT_BASE_URL for a server "
    "other than OpenAI's (`bash scripts/chat_server.sh start` serves a local one), to have answers written"
)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Chunks given to the chat model.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object.")] = False,
) -> None:
    """Answer in words, citing the moments in the videos where it is said (offline: the best sentence)."""
    from pstuts_pipeline.answers.answering import answer_chain, mmss
    from pstuts_pipeline.search.langchain_retriever import PstutsRetriever

    question = _checked(question)
    resources = _resources()
    embeddings, qdrant, settings = resources["embeddings"], resources["qdrant"], resources["chat_model"].settings()
    # Answering only reads the collection: a read-only folder opens as it does for `search`.
    with qdrant.get_store(read_only=True) as store:
        _require_collection(store)
        retriever = PstutsRetriever(
            store=store,
            embeddings=embeddings.query_embeddings(),
            model_id=embeddings.model_id,
            k=top_k,
        )
        answer = answer_chain(retriever, settings).invoke(question)
    if answer.error:
        _print_error("chat failed, extractive answer given:", answer.error)
    elif not settings.enabled:
        console.print(HOW_TO_GENERATE, soft_wrap=True)
    for note in answer.notes:
        console.print(escape(printable(redact(note))), soft_wrap=True)
    if answer.invented_citations:
        console.print(f"{answer.invented_citations} invented citation(s) removed from the answer")
    if as_json:
        print(json.dumps(answer.as_json()), flush=True)
        return
    # The answer may run over several lines; each line is escaped, so none can carry a terminal sequence.
    body = "\n".join(printable(line) for line in answer.answer.splitlines())
    print(f"\n? {printable(question)}\n{body}")
    for citation in answer.citations:
        print(f"  [{mmss(citation.time)}] {printable(citation.title)}  {safe_link(citation.link)}".rstrip())
    if answer.answered:
        print(f"  confidence that a moment answers this: {percent(answer.confidence)}")
    for chunk in [] if answer.answered else answer.chunks:
        meta = chunk.metadata
        where = f"[{mmss(float(meta['link_time']))}] {printable(meta['title'])}  {safe_link(meta.get('link') or '')}"
        print(f"  weak match ({percent(float(meta.get('confidence', 0.0)))}): {where}".rstrip())
    print(f"({printable(answer.model or 'extractive')}, {time.perf_counter() - COMMAND_STARTED:.1f} s)")


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (anything but loopback exposes the page).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """The learner's ask page and its JSON API: answers that play the video from the cited moment (docs/serving.md)."""
    import uvicorn

    from pstuts_pipeline.web.app import allowed_hosts, create_app
    from pstuts_pipeline.web.engine import Engine

    engine = Engine.from_resources(_resources())
    with console.status("loading the embedder"):
        engine.warm_up()
    status = engine.status()
    console.print(status.problem or f"{status.points} chunks in {status.collection!r}; answers: {status.answers}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        console.print(
            f"[yellow]listening on {escape(host)}: the page has no login, anyone who reaches it can ask[/yellow]"
        )
    console.print(f"ask page on http://{escape(host)}:{port}/  (API schema: /openapi.json)")
    uvicorn.run(create_app(engine, allowed_hosts(host)), host=host, port=port, log_level="warning")


def _evaluate_answers(questions: list, sample: int, top_k: int, as_json: bool) -> None:
    from pstuts_pipeline.answers import metrics as answer_metrics

    resources = _resources()
    embeddings, qdrant, settings = resources["embeddings"], resources["qdrant"], resources["chat_model"].settings()
    asked = answer_metrics.sample_questions(questions, sample)
    with qdrant.get_store() as store:
        _require_collection(store)
        extractive, generated, search_seconds = answer_metrics.answer_questions(
            store, embeddings.query_embeddings(), embeddings.model_id, asked, settings, top_k
        )
    figures = {"extractive": answer_metrics.summarize(asked, extractive, search_seconds)}
    if generated is not None:
        figures[settings.model] = answer_metrics.summarize(asked, generated, search_seconds)
    if as_json:
        print(json.dumps(figures), flush=True)
        return
    table = Table(title=f"pstuts evaluate --answers: {len(asked)} questions, top {top_k} chunks")
    table.add_column("metric")
    for name in figures:
        table.add_column(name, justify="right")
    for metric in figures["extractive"]:
        table.add_row(metric, *(f"{f[metric]:.3f}" for f in figures.values()))
    Console().print(table)


@app.command()
def evaluate(
    qa: Annotated[list[Path], typer.Option("--qa", help="PsTuts-VQA-format file of questions (repeatable).")],
    top_k: Annotated[
        int | None,
        typer.Option(
            "--top-k",
            "-k",
            min=1,
            help="Results per question (default 10; with --answers, chunks per answer, default 3).",
        ),
    ] = None,
    answers: Annotated[bool, typer.Option("--answers", help="Score `pstuts ask` instead of search.")] = False,
    sample: Annotated[int, typer.Option(help="With --answers: questions in the fixed sample (0 = all).")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as one JSON object.")] = False,
) -> None:
    """Score search on QA pairs (hit@k, link@k, mrr@10), or with --answers the answers (token F1, citation link@1)."""
    from pstuts_pipeline.cli.progress import Tracker
    from pstuts_pipeline.search import evaluation
    from pstuts_pipeline.search.scoring import score_search

    questions = evaluation.load_questions(qa)
    if answers:
        _evaluate_answers(questions, sample, top_k or 3, as_json)
        return
    top_k = top_k or 10
    resources = _resources()
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    asked = evaluation.folder_questions(resources["transcript_source"].path())
    with qdrant.get_store() as store, Tracker(console, "pstuts evaluate", "questions") as progress:
        _require_collection(store)
        metrics = score_search(
            store,
            embeddings.query_embeddings(),
            embeddings.model_id,
            questions,
            top_k,
            reranker=resources["reranker"].get(),
            asked=asked,
            on_progress=progress.update,
        )
    if as_json:
        print(json.dumps(metrics), flush=True)
        return
    single = int(metrics[f"{evaluation.UNAMBIGUOUS}_questions"])
    # Title lines broken between phrases, never inside one, however narrow the terminal.
    table = Table(title=f"pstuts evaluate: {len(questions)} questions, top {top_k}\n({single} asked of one video only)")
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
        _print_error("error:", describe_error(exc))
        sys.exit(1)


def describe_error(exc: BaseException) -> str:
    """One line for an error that escaped a command, naming the store it concerns when the error does not."""
    if type(exc).__module__.startswith("sqlalchemy"):
        # Dagster's instance storage: SQLAlchemy's text carries the SQL, not the folder.
        from pstuts_pipeline.settings import paths

        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return f"Dagster instance in {paths().dagster_home} (DAGSTER_HOME): {reason}"
    if isinstance(exc, MemoryError):
        return "out of memory: lower PSTUTS_MAX_PHRASES_PER_RUN or PSTUTS_MAX_VIDEOS_PER_RUN, or give it more memory"
    return str(exc) or type(exc).__name__


def _print_error(label: str, text: str) -> None:
    """An error as one unwrapped line (however wide the terminal, or none), secrets and control characters removed."""
    console.print(f"[red]{escape(label)}[/red] {escape(printable(redact(text)))}", soft_wrap=True)


if __name__ == "__main__":
    main()
