"""What the commands take from the project: the code location or only the resources, the collection, the question."""

import contextlib
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypedDict, cast

import typer

from pstuts_pipeline.cli.render import print_error, print_line

if TYPE_CHECKING:
    import dagster as dg

    from pstuts_pipeline.defs.resources import (
        ChatModelResource,
        ChunkerResource,
        EmbeddingsResource,
        QdrantResource,
        RerankerResource,
        TranscriptSource,
    )
    from pstuts_pipeline.search.store import Store


@functools.cache
def definitions() -> "dg.Definitions":
    """The code location, built once per command."""
    from pstuts_pipeline.definitions import build_definitions

    return build_definitions()


class Resources(TypedDict, total=False):
    """What `resources_from_env` builds, by name (it types them all as dg.ConfigurableResource)."""

    transcript_source: "TranscriptSource"
    embeddings: "EmbeddingsResource"
    reranker: "RerankerResource"
    chunker: "ChunkerResource"
    qdrant: "QdrantResource"
    chat_model: "ChatModelResource"


def resources(*names: str) -> Resources:
    """The resources `names` from the environment, for commands that read or search and run no job.

    Not the whole code location, and only the resources the command uses: a setting only the sensor, the runs or
    another command read (the chat model's, for a search) must not stop it.
    """
    from pstuts_pipeline.defs.resources import resources_from_env

    return cast(Resources, resources_from_env(*names))


@contextlib.contextmanager
def collection(qdrant: "QdrantResource", read_only: bool = True) -> Iterator["Store"]:
    """The configured collection, opened, or exit 1 saying why it cannot answer."""
    from pstuts_pipeline.search.collection import CollectionDamaged, CollectionUnavailable, require_points

    with qdrant.get_store(read_only=read_only) as store:
        try:
            require_points(store)
        except CollectionDamaged as error:
            print_error("error:", str(error))
            raise typer.Exit(1) from None
        except CollectionUnavailable as error:
            print_line(str(error))
            raise typer.Exit(1) from None
        yield store


def question_or_exit(question: str) -> str:
    """The question as search and answers take it, or exit 2 with the same reason the API gives."""
    from pstuts_pipeline.search.questions import QuestionError, checked_question

    try:
        return checked_question(question, from_command_line=True)
    except QuestionError as error:
        print_line(str(error))
        raise typer.Exit(2) from None
