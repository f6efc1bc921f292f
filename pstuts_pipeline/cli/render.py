"""How every command prints: one stderr console, one-line errors, percentages and times, every field made safe."""

import time
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape

from pstuts_pipeline.cli.text_safety import printable
from pstuts_pipeline.redaction import redact

# What a user waits for is the whole command, imports and model loading included, not only the work inside it.
COMMAND_STARTED = time.perf_counter()
console = Console(stderr=True)


def seconds_so_far() -> float:
    """How long the user has waited for this command."""
    return time.perf_counter() - COMMAND_STARTED


def print_error(label: str, text: str) -> None:
    """An error as one unwrapped line (however wide the terminal, or none), secrets and control characters removed."""
    console.print(f"[red]{escape(label)}[/red] {escape(printable(redact(text)))}", soft_wrap=True)


def print_line(text: str) -> None:
    """A message from data (a collection's name, a question) as one unwrapped line, never read as markup."""
    console.print(escape(printable(text)), soft_wrap=True)


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


def percent(value: float) -> str:
    """A confidence as a learner reads it."""
    return f"{100 * value:.0f}%"


def iso(timestamp: float) -> str:
    """A materialization's time, to the second, in UTC."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")
