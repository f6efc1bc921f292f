"""`pstuts serve`: the learner's ask page and its JSON API (docs/serving.md)."""

from typing import Annotated

import typer
from rich.markup import escape

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console


def serve(
    host: Annotated[
        str, typer.Option(help="Address to listen on (anything but loopback exposes the page).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """The learner's ask page and its JSON API: answers that play the video from the cited moment (docs/serving.md)."""
    import uvicorn

    from pstuts_pipeline.web.app import LOOPBACK, allowed_hosts, create_app
    from pstuts_pipeline.web.engine import Engine

    engine = Engine.from_resources(
        project.resources("embeddings", "qdrant", "chat_model", "transcript_source", "reranker")
    )
    with console.status("loading the embedder"):
        engine.warm_up()
    status = engine.status()
    console.print(status.problem or f"{status.points} chunks in {status.collection!r}; answers: {status.answers}")
    if host not in LOOPBACK:
        console.print(
            f"[yellow]listening on {escape(host)}: the page has no login, anyone who reaches it can ask[/yellow]"
        )
    console.print(f"ask page on http://{escape(host)}:{port}/  (API schema: /openapi.json)")
    uvicorn.run(create_app(engine, allowed_hosts(host)), host=host, port=port, log_level="warning")
