"""Dagster's PostgreSQL storages, keeping their connections open per process instead of opening one for every query.

dagster-postgres builds its engines with SQLAlchemy's NullPool (dagster-io/dagster#20325, #33935): every event a
step writes, every run lookup and every concurrency-slot poll opens a TCP connection, authenticates (SCRAM) and
makes PostgreSQL fork a backend. Measured here: 17 ms a connection (12 ms of the server's CPU, 6 of the client's),
against 0.2 ms for a query on an open one. A one-video ingest opened 476 connections to store 103 events; in a
65-video ingest on two Celery workers PostgreSQL spent 61 CPU seconds, on the cores the workers needed (4 s with these).

These classes are the stock ones with one engine per database and process, shared by the three storages and by
every instance the process builds (a Celery worker builds one per step and never disposes it). The pool keeps two
idle connections, opens more while threads need them at once (`max_overflow=-1`, as NullPool would) and checks the
idle one before use (`pool_pre_ping`), so a restarted database costs a reconnect, not a failed step. A forked
process never uses its parent's engine: the cache is per process id. The webserver still swaps in its own pool
(`optimize_for_webserver`). deploy/dagster.yaml selects them.
"""

import os
import threading
from collections.abc import Mapping
from typing import Any, Self, cast

import sqlalchemy
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage
from dagster_postgres.utils import create_pg_engine, get_token_provider_from_config, pg_url_from_config

from pstuts_pipeline.defs.dagster_private import ConfigurableClassData, PostgresStorageConfig, use_engine

# A pooled connection idle longer than this is replaced, before a server or a proxy would drop it.
RECYCLE_S = 3600
# Two: a storage asks "does this table exist?" on a second connection while it holds the first (store_event).
POOL_SIZE = 2
_engines: dict[tuple[int, str], sqlalchemy.Engine] = {}
_engines_lock = threading.Lock()
# (process, database, storage class) whose tables this process has already found or created.
_tables_checked: set[tuple[int, str, type]] = set()


def process_engine(postgres_url: str, token_provider: Any = None) -> sqlalchemy.Engine:
    """The engine every storage of this process uses for `postgres_url`, made on first use."""
    key = (os.getpid(), postgres_url)
    with _engines_lock:
        if key not in _engines:
            _engines[key] = create_pg_engine(
                postgres_url,
                token_provider,
                isolation_level="AUTOCOMMIT",
                pool_size=POOL_SIZE,
                max_overflow=-1,
                pool_recycle=RECYCLE_S,
                pool_pre_ping=True,
            )
        return _engines[key]


class _PerProcessEngine:
    """Builds the stock storage, then points it at the process's pooled engine.

    The stock storage looks for its tables (creating them if asked) on connections of its own, each time an instance
    is built; here once per process and class, as the tables cannot go away under a running process.
    """

    postgres_url: str
    should_autocreate_tables: bool

    def __init__(
        self,
        postgres_url: str,
        should_autocreate_tables: bool = True,
        inst_data: ConfigurableClassData | None = None,
        token_provider: Any = None,
    ) -> None:
        checked = (os.getpid(), postgres_url, type(self))
        check_tables = should_autocreate_tables and checked not in _tables_checked
        super().__init__(postgres_url, check_tables, inst_data, token_provider)  # type: ignore[call-arg]
        _tables_checked.add(checked)
        self.should_autocreate_tables = should_autocreate_tables
        use_engine(self, process_engine(postgres_url, token_provider))

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]) -> Self:
        return cls(
            postgres_url=pg_url_from_config(cast(PostgresStorageConfig, config_value)),
            should_autocreate_tables=bool(config_value.get("should_autocreate_tables", True)),
            inst_data=inst_data,
            token_provider=get_token_provider_from_config(config_value),
        )


class PooledPostgresRunStorage(_PerProcessEngine, PostgresRunStorage):  # type: ignore[misc]  # stock signatures differ
    """Runs, their tags and snapshots."""


class PooledPostgresEventLogStorage(_PerProcessEngine, PostgresEventLogStorage):  # type: ignore[misc]  # stock signatures differ
    """Events, asset materializations and check results, concurrency slots."""


class PooledPostgresScheduleStorage(_PerProcessEngine, PostgresScheduleStorage):  # type: ignore[misc]  # stock signatures differ
    """Sensor and schedule state, their ticks."""
