"""Two speed-ups reach past public APIs (qdrant-client's local storage, SQLAlchemy's global connect event): these
tests fail on the library upgrade that turns either into a silent no-op or leaves it switched on."""

import sqlite3

import sqlalchemy
from qdrant_client import QdrantClient, models

from pstuts_pipeline.cli.sqlite_sync import batched_sqlite_syncs
from pstuts_pipeline.search.vectorstore import sync_local_writes_lazily


def test_local_mode_writes_switch_to_wal_without_a_sync_per_point(tmp_path) -> None:
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        client.create_collection("c", vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE))
        sync_local_writes_lazily(client, "c")
        client.upsert("c", points=[models.PointStruct(id=1, vector=[0.1, 0.2])], wait=True)
    finally:
        client.close()
    databases = list((tmp_path / "qdrant").rglob("storage.sqlite"))
    assert databases, "qdrant-client's local mode no longer keeps a storage.sqlite per collection"
    with sqlite3.connect(databases[0]) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


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
