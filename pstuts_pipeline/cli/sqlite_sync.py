"""Fewer disk syncs while a run writes its Dagster records to SQLite (no Dagster imports)."""

import contextlib
import sqlite3
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def batched_sqlite_syncs() -> Iterator[None]:
    """While inside, SQLite databases in WAL mode opened through SQLAlchemy commit without syncing each event.

    Dagster's SQLite storage opens a connection per event, commits it with synchronous=FULL and closes it,
    and closing the last connection to a WAL database checkpoints it: two or three syncs per event, about
    60 events a second on this disk, while one run of 65 videos writes some 800 events. Here each such
    connection runs with synchronous=NORMAL, and one extra connection per database stays open so that the
    others' closes do not checkpoint; it checkpoints once when closed at the end. WAL with NORMAL never
    corrupts the database; a power cut may lose the last events, as it may with any buffered write.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    keepers: dict[str, sqlite3.Connection] = {}
    lock = threading.Lock()

    def on_connect(dbapi_connection: object, _record: object) -> None:
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        path = dbapi_connection.execute("PRAGMA database_list").fetchone()[2]
        if not path or dbapi_connection.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            return
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")
        with lock:
            if path not in keepers:
                keeper = sqlite3.connect(path, check_same_thread=False)
                keeper.execute("PRAGMA schema_version").fetchone()  # opens the WAL index, which is what counts
                keepers[path] = keeper

    event.listen(Engine, "connect", on_connect)
    try:
        yield
    finally:
        event.remove(Engine, "connect", on_connect)
        with lock:
            for keeper in keepers.values():
                keeper.close()
            keepers.clear()
