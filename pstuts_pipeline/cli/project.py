"""What the commands load from the project: the code location to run jobs, or only the resources to read."""

import contextlib
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import typer

from pstuts_pipeline.cli.render import console, print_error, print_line

if TYPE_CHECKING:
    import dagster as dg

    from pstuts_pipeline.defs.resources import QdrantResource
    from pstuts_pipeline.search.store import Store


@functools.cache
def definitions() -> "dg.Definitions":
    """The code location, built once per command."""
    from pstuts_pipeline.definitions import build_definitions

    return build_definitions()


def resources() -> "dict[str, dg.ConfigurableResource]":
    """The resources the environment configures, for commands that read or search and run no job.

    Not the whole code location: a setting only the sensor, the schedules or the runs read must not stop a search.
    """
    from pstuts_pipeline.defs.resources import resources_from_env

    return resources_from_env()


def require_collection(store: "Store") -> None:
    """Stop with a hint when the collection is missing, empty or unreadable: none of these is "no matches"."""
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

    collection = store.collection
    try:
        exists = store.exists()
        points = store.count() if exists else 0
    except (ResponseHandlingException, UnexpectedResponse):
        raise  # a server that cannot be reached or refuses: the Qdrant resource names the server
    except Exception as error:  # noqa: BLE001 - any storage error: say it is the collection, not the question
        print_error(
            "error:",
            f"collection {collection!r} cannot be read ({type(error).__name__}: {error}): the store looks damaged; "
            "re-create it with `pstuts ingest --force` (or restore a backup of the Qdrant folder)",
        )
        raise typer.Exit(1) from None
    if not exists:
        print_line(f"collection {collection!r} does not exist yet: run `pstuts ingest` first")
        raise typer.Exit(1)
    if points == 0:
        print_line(
            f"collection {collection!r} is empty (its store may have been emptied or damaged): "
            "run `pstuts ingest --force` to fill it again"
        )
        raise typer.Exit(1)


@contextlib.contextmanager
def collection(qdrant: "QdrantResource", read_only: bool = True) -> Iterator["Store"]:
    """The configured collection, opened, or exit 1 saying why it cannot answer."""
    with qdrant.get_store(read_only=read_only) as store:
        require_collection(store)
        yield store


def checked_question(question: str) -> str:
    """The question as search and answers take it, or exit 2 with the same reason the API gives."""
    from pstuts_pipeline.search.questions import QuestionError, checked_question

    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        # A question typed in another encoding arrives with its undecodable bytes as surrogates.
        console.print(
            f"the question is not UTF-8 text (byte {error.start} cannot be read): set a UTF-8 locale, "
            "or give the question in UTF-8",
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    try:
        return checked_question(question)
    except QuestionError as error:
        print_line(str(error))
        raise typer.Exit(2) from None
