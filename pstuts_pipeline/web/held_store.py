"""The ask page's local store: kept open between questions, let go as soon as another process waits for it.

Qdrant Edge holds a folder in one process at a time. Opening it for every question would serialise the page's
questions behind the open; holding it for good would keep `pstuts ingest` from writing. So the page holds it while
nobody else asks for it: a user waiting for the lock leaves a marker (`edge_store.others_waiting`), and the page
closes the store as soon as no question is using it (a watcher thread does it while the page is idle), waits until
the other user has taken the lock, and opens it again for the next question (waiting up to the page's timeout).
Questions share the open store: Edge answers queries from several threads at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from pstuts_pipeline.search.store import Store

WATCH_S = 0.2  # how often an idle page looks for a waiting writer
HAND_OVER_S = 10.0  # how long the page waits for the waiting user to take the lock before opening again


class HeldStore:
    """One open store shared by the page's questions, closed whenever another process waits for it."""

    def __init__(self, open_store: Callable[[], AbstractContextManager[Store]], others_waiting: Callable[[], bool]):
        self._open = open_store
        self._others_waiting = others_waiting
        self._store: Store | None = None
        self._held = contextlib.ExitStack()
        self._users = 0
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self.opens = 0  # how many times the store was opened: once, unless another process needed it
        threading.Thread(target=self._watch, name="pstuts-held-store", daemon=True).start()

    @contextlib.contextmanager
    def use(self) -> Iterator[Store]:
        """The open store for one question (opened first if it is not); filelock.Timeout if it cannot be."""
        with self._changed:
            if self._store is not None and self._others_waiting():
                self._changed.wait_for(lambda: self._users == 0)
                self._let_go()
            if self._store is None:
                self._store = self._held.enter_context(self._open())
                self.opens += 1
            self._users += 1
        try:
            yield self._store
        finally:
            with self._changed:
                self._users -= 1
                if self._users == 0 and self._others_waiting():
                    self._let_go()
                self._changed.notify_all()

    def _let_go(self) -> None:
        """Close the store, then give the waiting user the time to take the lock before anyone opens it again."""
        self._held.close()
        self._store = None
        deadline = time.monotonic() + HAND_OVER_S
        while self._others_waiting() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _watch(self) -> None:
        while not self._closed.wait(WATCH_S):
            with self._changed:
                if self._store is not None and self._users == 0 and self._others_waiting():
                    self._let_go()

    def close(self) -> None:
        """Stop watching and close the store (the server is stopping)."""
        self._closed.set()
        with self._changed:
            self._held.close()
            self._store = None
