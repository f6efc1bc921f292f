"""The FastAPI app: the page (static HTML, CSS and JS), the JSON API under /api, and local media under /media."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.collection import CollectionUnavailable
from pstuts_pipeline.search.questions import QuestionError, checked_question, excerpt
from pstuts_pipeline.web.engine import Engine
from pstuts_pipeline.web.media import MEDIA_ROUTE
from pstuts_pipeline.web.schemas import AskReply, AskRequest, Problem, Status

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The page's own files only: no inline script or style, no frames, no plugins; media may come from any http(s) host.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "media-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
PROBLEMS: dict[int | str, dict[str, Any]] = {
    503: {"model": Problem, "description": "The collection is missing, empty or being written."}
}


def allowed_hosts(bound: str) -> list[str] | None:
    """The Host names a server bound to `bound` answers (DNS rebinding): loopback names on loopback; None: any."""
    if bound in LOOPBACK:
        return list(LOOPBACK)
    if bound in ("0.0.0.0", "::", ""):
        return None  # every interface: the names it is reached by are not known here
    return [bound]


def host_name(header: str) -> str:
    """The name of a Host header, without its port ('[::1]:8000' -> '::1')."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def validation_problem(error: RequestValidationError) -> str:
    """One line per invalid field, quoting at most a short excerpt of what was sent (never a number's NaN/inf)."""
    lines = []
    for item in error.errors()[:3]:
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body") or "body"
        sent = item.get("input")
        quoted = f" (got {excerpt(sent)})" if isinstance(sent, str) else ""
        lines.append(f"{where}: {item.get('msg', 'invalid')}{quoted}")
    return "; ".join(lines) or "the request was not understood"


def create_app(engine: Engine, hosts: Sequence[str] | None = None) -> FastAPI:
    """The app over one engine, answering only requests whose Host is one of `hosts` (None: any).

    Swagger's /docs page is off: it loads its scripts from a CDN; /openapi.json stays.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()  # before uvicorn re-raises the SIGTERM that stopped it: Python's exit hooks never run then

    app = FastAPI(
        lifespan=lifespan,
        title="pstuts ask",
        summary="Answers to Photoshop questions, citing the moments in the tutorial videos.",
        docs_url=None,
        redoc_url=None,
    )

    @app.middleware("http")
    async def security_headers(request: Request, call_next) -> Response:  # noqa: ANN001 - Starlette's callable
        name = host_name(request.headers.get("host", ""))
        if hosts is not None and name not in hosts:
            # A page of another site whose name was made to resolve here (DNS rebinding) is not answered.
            response: Response = JSONResponse(
                {"detail": f"host {excerpt(name)} is not served here (serve --host names the address)"}, 400
            )
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_problem(error)}, status_code=422)

    @app.exception_handler(QuestionError)
    async def unaskable(request: Request, error: QuestionError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=422)

    @app.exception_handler(CollectionUnavailable)
    async def unavailable(request: Request, error: CollectionUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=503)

    @app.exception_handler(vectorstore.ModelMismatchError)
    async def mismatch(request: Request, error: vectorstore.ModelMismatchError) -> JSONResponse:
        return JSONResponse({"detail": f"{error}: serve with the model it was built with"}, status_code=503)

    @app.get("/api/status", response_model=Status)
    def status() -> Status:
        """The collection searched, its size, and whether a chat model writes the answers."""
        return engine.status()

    @app.post("/api/ask", response_model=AskReply, responses={422: {"model": Problem}, **PROBLEMS})
    def ask(request: AskRequest) -> AskReply:
        """Answer a question with its cited moments and the top results, each with how to play its moment."""
        return engine.ask(checked_question(request.question), request.top_k)

    @app.get(f"{MEDIA_ROUTE}/{{video_id}}", response_class=FileResponse, responses={404: {"model": Problem}})
    def media(video_id: int) -> FileResponse:
        """A video's local media file: only one found beside its caption file in the data folder."""
        found = engine.media.files().get(video_id)
        if found is None:
            raise HTTPException(404, f"no local media for video {video_id}")
        return FileResponse(found)

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
