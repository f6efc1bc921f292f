"""`pstuts ask`: an answer in words that cites the moments in the videos where it is said."""

import json
from typing import Annotated

import typer

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console, percent, print_error, print_line, seconds_so_far
from pstuts_pipeline.cli.text_safety import printable, safe_link
from pstuts_pipeline.redaction import redact

HOW_TO_GENERATE = (
    "extractive answer (no chat model configured): set PSTUTS_CHAT_MODEL, and PSTUTS_CHAT_BASE_URL for a server "
    "other than OpenAI's (`bash scripts/chat_server.sh start` serves a local one), to have answers written"
)


def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Chunks given to the chat model.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as one JSON object.")] = False,
) -> None:
    """Answer in words, citing the moments in the videos where it is said (offline: the best sentence)."""
    from pstuts_pipeline.answers.answering import answer_chain, mmss
    from pstuts_pipeline.search.langchain_retriever import PstutsRetriever

    question = project.question_or_exit(question)
    resources = project.resources("embeddings", "chat_model", "qdrant")
    embeddings, settings = resources["embeddings"], resources["chat_model"].settings()
    # Answering only reads the collection: a read-only folder opens as it does for `search`.
    with project.collection(resources["qdrant"]) as store:
        retriever = PstutsRetriever(
            store=store,
            embeddings=embeddings.query_embeddings(),
            model_id=embeddings.model_id,
            k=top_k,
        )
        answer = answer_chain(retriever, settings).invoke(question)
    if answer.error:
        print_error("chat failed, extractive answer given:", answer.error)
    elif not settings.enabled:
        console.print(HOW_TO_GENERATE, soft_wrap=True)
    for note in answer.notes:
        print_line(redact(note))
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
    print(f"({printable(answer.model or 'extractive')}, {seconds_so_far():.1f} s)")
