"""`pstuts evaluate`: search scored on question-answer pairs, or with --answers the answers `pstuts ask` gives."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console


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
        evaluate_answers(questions, sample, top_k or 3, as_json)
        return
    top_k = top_k or 10
    resources = project.resources("embeddings", "transcript_source", "qdrant", "reranker")
    embeddings = resources["embeddings"]
    asked = evaluation.folder_questions(resources["transcript_source"].path())
    with (
        project.collection(resources["qdrant"], read_only=False) as store,
        Tracker(console, "pstuts evaluate", "questions") as progress,
    ):
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


def evaluate_answers(questions: list, sample: int, top_k: int, as_json: bool) -> None:
    """`pstuts evaluate --answers`: the extractive answers, and the chat model's when one is configured, scored."""
    from pstuts_pipeline.answers import metrics as answer_metrics

    resources = project.resources("embeddings", "chat_model", "qdrant")
    embeddings, settings = resources["embeddings"], resources["chat_model"].settings()
    asked = answer_metrics.sample_questions(questions, sample)
    with project.collection(resources["qdrant"], read_only=False) as store:
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
