"""A real Dagster instance on PostgreSQL, configured by deploy/dagster.yaml: a video is materialized with it and the
run, its materializations and check results are read back from the database; its storages hold a connection per
process (defs/postgres_storage.py) and survive a dropped connection and a fork."""

import multiprocessing
import os
import shutil
import uuid
from collections.abc import Iterator

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline.defs.postgres_storage import (
    PooledPostgresEventLogStorage,
    PooledPostgresRunStorage,
    PooledPostgresScheduleStorage,
)
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline_tests.support.servers import REPO, postgres_server

psycopg2 = pytest.importorskip("psycopg2", reason="dagster-postgres is an extra: pip install -e '.[postgres]'")
pytestmark = [pytest.mark.slow, pytest.mark.server]


def query(pg: dict[str, str], database: str, sql: str, *args: object) -> list[tuple]:
    connection = psycopg2.connect(dbname=database, **pg)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()
    finally:
        connection.close()


def admin(pg: dict[str, str], sql: str) -> None:
    connection = psycopg2.connect(dbname="postgres", **pg)
    connection.autocommit = True  # CREATE/DROP DATABASE cannot run in a transaction
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    finally:
        connection.close()


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """This module's own PostgreSQL cluster (a temporary folder, a free port), removed when the module ends."""
    with postgres_server() as pg:
        yield pg


@pytest.fixture
def fresh_database(postgres) -> Iterator[str]:
    name = f"pstuts_{uuid.uuid4().hex[:12]}"
    admin(postgres, f'CREATE DATABASE "{name}"')
    yield name
    admin(postgres, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def production_instance(storage, postgres, fresh_database, monkeypatch) -> None:
    """DAGSTER_HOME holds deploy/dagster.yaml, its variables point at a fresh database, PSTUTS_DATA_DIR at data/."""
    shutil.copy(REPO / "deploy" / "dagster.yaml", storage / "dagster_home" / "dagster.yaml")
    for name, value in {
        "DAGSTER_PG_HOST": postgres["host"],
        "DAGSTER_PG_PORT": postgres["port"],
        "DAGSTER_PG_DB": fresh_database,
        "DAGSTER_PG_USERNAME": postgres["user"],
        "DAGSTER_PG_PASSWORD": postgres["password"],
        "PSTUTS_DATA_DIR": str(REPO / "data"),
    }.items():
        monkeypatch.setenv(name, value)


def sessions(pg: dict[str, str], database: str) -> int:
    """Connections PostgreSQL has accepted to the database since it started (each one a forked backend)."""
    [(count,)] = query(pg, "postgres", "SELECT sessions FROM pg_stat_database WHERE datname = %s", database)
    return count


def test_a_video_materialized_with_the_production_instance_is_recorded_in_postgres(
    storage, postgres, fresh_database, production_instance
):
    home = storage / "dagster_home"
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PooledPostgresRunStorage)
        assert isinstance(instance.event_log_storage, PooledPostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PooledPostgresScheduleStorage)
        before = sessions(postgres, fresh_database)
        report = ingest(build_definitions(resources_from_env()), instance, only=["9001"])
        opened = sessions(postgres, fresh_database) - before
    assert report.ok and report.plan.to_ingest == ["9001"] and len(report.run_ids) == 1
    run_id = report.run_ids[0]

    runs = query(postgres, fresh_database, "SELECT run_id, pipeline_name, status FROM runs")
    assert runs == [(run_id, "ingest_videos", "SUCCESS")]
    events = query(postgres, fresh_database, "SELECT count(*) FROM event_logs WHERE run_id = %s", run_id)[0][0]
    # The stock storages open one connection per query: more than one per stored event.
    assert events > 40 and opened <= 10, f"{opened} connections opened for a run that stored {events} events"
    tags = dict(query(postgres, fresh_database, "SELECT key, value FROM run_tags WHERE run_id = %s", run_id))
    assert tags["pstuts/trigger"] == "cli" and tags["dagster/asset_partition_range_start"] == "9001"

    materialized = query(
        postgres,
        fresh_database,
        "SELECT asset_key, partition FROM event_logs WHERE run_id = %s AND dagster_event_type = 'ASSET_MATERIALIZATION'",
        run_id,
    )
    assert sorted(materialized) == sorted((f'["{name}"]', "9001") for name in INGESTION_ASSET_NAMES)
    checks = query(
        postgres,
        fresh_database,
        "SELECT check_name, execution_status FROM asset_check_executions WHERE run_id = %s"
        " AND execution_status != 'PLANNED'",
        run_id,
    )
    assert sorted(checks) == [
        (name, "SUCCEEDED")
        for name in (
            "chunk_times_ordered_and_bounded",
            "chunks_fit_token_window",
            "phrases_linked_exactly_once",
            "points_match_chunks",
        )
    ]
    partitions = query(
        postgres, fresh_database, "SELECT partition FROM dynamic_partitions WHERE partitions_def_name = 'videos'"
    )
    assert sorted(p for (p,) in partitions) == ["9001", "9002", "9003", "9004"]  # 9004: the WebVTT sample

    # A second process (another instance object) reads the same history, as the webserver and daemon do.
    with dg.DagsterInstance.get() as reader:
        event = reader.get_latest_materialization_event(dg.AssetKey("qdrant_collection"))
        assert event.run_id == run_id and event.asset_materialization.partition == "9001"
        assert event.asset_materialization.metadata["points_written"].value == report.chunks > 0
    assert not list((home).glob("**/*.db")), "nothing may fall back to SQLite under DAGSTER_HOME"


def test_the_pooled_storages_survive_a_dropped_connection_and_a_fork(postgres, fresh_database, production_instance):
    """A connection the server closed is replaced before use; a forked process opens its own and leaves the parent's."""
    run_id = str(uuid.uuid4())
    with dg.DagsterInstance.get() as instance:
        report(instance, run_id, "before")
        # What a database restart or an idle timeout does to the pooled connections.
        query(
            postgres,
            "postgres",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            fresh_database,
        )
        report(instance, run_id, "after the server dropped the connections")
        opened = sessions(postgres, fresh_database)

        child = multiprocessing.get_context("fork").Process(target=_report_from_a_child, args=(run_id,), daemon=True)
        child.start()
        child.join(60)
        assert child.exitcode == 0
        assert sessions(postgres, fresh_database) > opened, "the child must open its own connection"

        report(instance, run_id, "after the fork")
        logged = [e.message for e in instance.all_logs(run_id)]
    assert logged == [
        "before",
        "after the server dropped the connections",
        "from the child",
        "after the fork",
    ]


def report(instance: dg.DagsterInstance, run_id: str, message: str) -> None:
    instance.report_engine_event(message, job_name="pooled_storage_probe", run_id=run_id)


def _report_from_a_child(run_id: str) -> None:
    code = 1
    try:
        with dg.DagsterInstance.get() as instance:
            report(instance, run_id, "from the child")
        code = 0
    finally:
        os._exit(code)  # as cli/runs_elsewhere.py: nothing of the parent's runs here
