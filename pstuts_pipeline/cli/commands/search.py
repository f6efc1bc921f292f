"""`pstuts search`: the chunks and the moments in them that answer a question, each with its confidence."""

import json
from pathlib import Path
from typing import Annotated

import typer

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console, percent, print_line
from pstuts_pipeline.cli.text_safety import printable, safe_link


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
        print_line(f"{questions} holds no question")
        raise typer.Exit(2)
    asked = [project.question_or_exit(q) for q in asked]
    threshold = confidence.threshold()
    resources = project.resources("embeddings", "qdrant", "reranker")
    embeddings = resources["embeddings"]
    with project.collection(resources["qdrant"]) as store:
        model = embeddings.query_embeddings()
        ranked = retrieval.search_many(
            store, model, embeddings.model_id, asked, top_k, reranker=resources["reranker"].get()
        )
        for q, results in zip(asked, ranked):
            print_results(q, results, as_json, threshold)


def print_results(question: str, results: list, as_json: bool, threshold: float = 0.0) -> None:
    """One question's results: a JSON line, or each result's title, moment, link and the chunk around the moment."""
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
        print(f"   chunk {mmss(r.start)}-{mmss(r.stop)}: {printable(snippet(r.text, r.link_sentence))}")


def snippet(text: str, sentence: str, width: int = 400) -> str:
    """The chunk around its linked sentence, which is marked, so the mark is never cut off."""
    at = text.find(sentence) if sentence else -1
    if at < 0:
        return text[:width] + ("..." if len(text) > width else "")
    begin = max(0, min(at - (width - len(sentence)) // 2, len(text) - width))
    end = max(begin + width, at + len(sentence))
    marked = text[begin:at] + f">>> {sentence} <<<" + text[at + len(sentence) : end]
    return ("..." if begin else "") + marked + ("..." if end < len(text) else "")
