"""The `pstuts` command: the typer app, assembled from one module per command (`cli/commands/`)."""

import atexit
import gc
import logging
import sys
import warnings
from collections.abc import Callable
from typing import Annotated, Any, Protocol, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from pstuts_pipeline.cli.commands import ask, dev, evaluate, ingest, migrate_store, search, serve, training, videos
from pstuts_pipeline.cli.render import describe_error, print_error


class Param(Protocol):
    metavar: str | None


P = TypeVar("P", bound=Param)


def without_flag_types(params: list[P]) -> list[P]:
    """Typer 0.29 labels every flag `<bool>` in help, though a flag takes no value: show no type for flags.

    Typer shows an option's metavar, when it has one, in place of its type: every flag (`--help` included, which
    typer makes itself) gets an empty one as its command lists its parameters.
    """
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


# get_params returns typer's vendored click.Parameter, which has no public name: list[Any] stands for it.
class Command(TyperCommand):
    """A `pstuts` command."""

    def get_params(self, ctx: Any) -> list[Any]:
        return without_flag_types(super().get_params(ctx))


class Group(TyperGroup):
    """The `pstuts` command group, with its global options."""

    def get_params(self, ctx: Any) -> list[Any]:
        return without_flag_types(super().get_params(ctx))


app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    help="Tutorial transcripts to a searchable Qdrant collection.",
)


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


COMMANDS: list[tuple[str, Callable[..., None], dict[str, Any]]] = [
    ("ingest", ingest.ingest, {}),
    ("register", ingest.register, {}),
    ("migrate-store", migrate_store.migrate_store, {}),
    ("dev", dev.dev, {"allow_extra_args": True, "ignore_unknown_options": True}),
    ("tune", training.tune, {}),
    ("tune-reranker", training.tune_reranker, {}),
    ("search", search.search, {}),
    ("videos", videos.videos, {}),
    ("ask", ask.ask, {}),
    ("serve", serve.serve, {}),
    ("evaluate", evaluate.evaluate, {}),
]
for name, command, settings in COMMANDS:
    app.command(name, cls=Command, context_settings=settings)(command)


def main() -> None:
    """Console-script entry point."""
    # Dagster flags preview features (partitioned checks) at import; users of the CLI cannot act on that.
    warnings.filterwarnings("ignore", module="dagster")
    # A command imports Dagster, LangChain and Qdrant's client: some 270,000 objects that live until it exits, which
    # every full collection walks again. Fewer full collections save ~1 s of each command's start; frozen at exit
    # (atexit runs before the interpreter's last collections), they are not walked several more times (1.5 s).
    gc.set_threshold(700, 10, 100)
    atexit.register(gc.freeze)
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - a clear one-line error beats a traceback for users
        print_error("error:", describe_error(exc))
        sys.exit(1)


if __name__ == "__main__":
    main()
