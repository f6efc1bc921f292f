"""The ask page's local store: a private copy kept open between questions, copied again when the store changes.

Opening a local-mode folder loads every point (about 0.4 s for train + dev) and admits one client at a time, so
the page cannot keep the store itself open: `pstuts ingest` needs it. Each question takes the store's lock only
long enough to see whether its files changed since the last copy (then copies and reopens), and is answered from
the open copy. While an ingest holds the lock, questions are answered from the last copy: the state before it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import Timeout

from pstuts_pipeline.defs.resources import copy_store, store_lock

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

# Files that change without the data changing: local mode's own lock file and SQLite's shared-memory index.
_NOT_DATA = (".lock", "-shm")
Signature = tuple[tuple[str, int, int], ...]


def signature(folder: Path) -> Signature:
    """Each data file of a local-mode folder with its size and modification time: any write changes it."""
    if not folder.is_dir():
        return ()
    return tuple(
        sorted(
            (str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns)
            for path in folder.rglob("*")
            if path.is_file() and not path.name.endswith(_NOT_DATA)
            for stat in [path.stat()]
        )
    )


class StoreCopy:
    """A local-mode folder as the ask page reads it: one open private copy, renewed when the folder changes.

    Not thread-safe: the engine asks one question at a time.
    """

    def __init__(self, folder: Path, lock_timeout_s: float):
        self.folder = folder
        self.lock_timeout_s = lock_timeout_s
        self._signature: Signature | None = None
        self._copy: tempfile.TemporaryDirectory | None = None
        self._client: QdrantClient | None = None
        self.copies = 0  # how many copies were made: one per change of the store seen by a question

    @contextlib.contextmanager
    def client(self) -> Iterator[QdrantClient]:
        """The open copy's client, copied anew first if the store changed; filelock.Timeout if none can be made."""
        try:
            self._refresh()
        except Timeout:
            if self._client is None:
                raise
            # An ingest is writing: the last copy is the store as it was before, which stays until it is replaced.
        yield self._client  # type: ignore[misc]

    def _refresh(self) -> None:
        # A folder this process may not write has no writer to wait for (and no room for a lock file).
        writable = os.access(self.folder if self.folder.exists() else self.folder.parent, os.W_OK)
        with store_lock(self.folder, self.lock_timeout_s) if writable else contextlib.nullcontext():
            now = signature(self.folder)
            if self._client is not None and now == self._signature:
                return
            copy = tempfile.TemporaryDirectory(prefix="pstuts-ask-")
            if self.folder.is_dir():
                copy_store(self.folder, Path(copy.name))
        from qdrant_client import QdrantClient

        client = QdrantClient(path=copy.name)
        self.close()
        self._client, self._copy, self._signature = client, copy, now
        self.copies += 1

    def close(self) -> None:
        """Close the copy's client and remove the copy."""
        if self._client is not None:
            self._client.close()
        if self._copy is not None:
            self._copy.cleanup()
        self._client = self._copy = None
