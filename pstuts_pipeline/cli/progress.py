"""Progress of long commands: a bar with counts, rate and time left on a terminal, plain lines elsewhere."""

import os
import time
from types import TracebackType
from typing import Literal

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from pstuts_pipeline.training.skeleton import timing


def own_stream(console: Console) -> Console:
    """A console like `console` on its own copy of the file descriptor it writes to.

    A run executed in this process redirects file descriptors 1 and 2 into its compute log while its steps run; a copy
    taken before keeps reaching the terminal (or the log) the user is watching. A console without a descriptor (a
    test's StringIO) is used as it is.
    """
    try:
        descriptor = console.file.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return console
    stream = os.fdopen(os.dup(descriptor), "w", buffering=1, encoding="utf-8", errors="replace")
    return Console(
        file=stream, force_terminal=console.is_terminal, width=console.width, color_system=_color_system(console)
    )


def _color_system(console: Console) -> Literal["standard", "256", "truecolor", "windows"] | None:
    """The console's colour system by the name Console takes (rich gives it back as a plain str; None: no colour)."""
    match console.color_system:
        case "standard" | "256" | "truecolor" | "windows" as name:
            return name
    return None


class Tracker:
    """One command's progress, fed by `update(done, total, what)`; `total=None` while the amount is not known yet."""

    def __init__(self, console: Console, title: str, unit: str) -> None:
        self.console, self.title, self.unit = console, title, unit
        self._out = console  # where it draws: its own copy of the console's descriptor, once entered
        self.started = time.perf_counter()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._last_line = ""

    def __enter__(self) -> "Tracker":
        self._out = own_stream(self.console)
        if self._out.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(self.unit),
                TimeElapsedColumn(),
                TextColumn("elapsed,"),
                TimeRemainingColumn(),
                TextColumn("left"),
                console=self._out,
                transient=True,  # the summary that follows is what stays on screen
                auto_refresh=False,  # drawn on each update (at least once a second while a run executes)
            )
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=None)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self._out is not self.console:
            self._out.file.close()

    def update(self, done: int, total: int | None, what: str = "") -> None:
        """Show `done` of `total` units, with `what` saying where the work is."""
        description = f"{self.title}: {what}" if what else self.title
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=total, description=description, refresh=True)
            return
        line = f"{description} ({done}/{total} {self.unit})" if total else description
        if line != self._last_line:  # a log reads better without the same line twice
            self._last_line = line
            so_far = timing(done, total, time.perf_counter() - self.started, self.unit)
            self._out.print(f"{line}, {so_far}", highlight=False, soft_wrap=True)
