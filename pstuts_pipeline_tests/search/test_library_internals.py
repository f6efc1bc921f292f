"""A speed-up that reaches past a public API (SQLAlchemy's global connect event): this test fails on the library
upgrade that turns it into a silent no-op or leaves it switched on."""

import sqlite3

import sqlalchemy

from pstuts_pipeline.cli.sqlite_sync import batched_sqlite_syncs


def test_sqlalchemy_connections_to_a_wal_database_skip_full_syncs_only_inside(tmp_path) -> None:
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
    engine = sqlalchemy.create_engine(f"sqlite:///{path}", poolclass=sqlalchemy.pool.NullPool)

    def synchronous() -> int:
        with engine.connect() as connection:
            return connection.exec_driver_sql("PRAGMA synchronous").scalar()

    with batched_sqlite_syncs():
        inside = synchronous()
    assert (inside, synchronous()) == (1, 2)  # NORMAL inside, back to SQLite's FULL default after
