"""Secrets stay secret: API keys come from the environment only and appear in no event, run config, metadata,
log, stored file or error, whether the run succeeds or the key is refused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline.defs.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline_tests.support.helpers import events_text, files_containing
from pstuts_pipeline_tests.support.servers import REPO, SERVED_MODEL

pytestmark = [pytest.mark.slow, pytest.mark.server]
BIN = Path(sys.executable).parent


def materialize(storage: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`dagster asset materialize` of video 9001, as an operator runs it, steps in one process to save time."""
    home = storage / "dagster_home"
    (home / "dagster.yaml").write_text(DEFAULT_INSTANCE_YAML)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(video_partitions.name, ["9001"])
    return subprocess.run(
        [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "pstuts_pipeline.definitions",
            "--select",
            ",".join(INGESTION_ASSET_NAMES),
            "--partition",
            "9001",
            "--config-json",
            json.dumps({"execution": {"config": {}}}),
        ],
        env={**os.environ, **env, "DAGSTER_HOME": str(home), "PSTUTS_STORAGE_DIR": str(storage)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def openai_env(base_url: str, key: str) -> dict[str, str]:
    return {
        "PSTUTS_EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": key,
        "QDRANT_API_KEY": f"qdrant-{key}",
        "PSTUTS_EMBEDDING_MODEL": SERVED_MODEL,
        "PSTUTS_MAX_CHUNK_TOKENS": "256",
        "PSTUTS_DATA_DIR": str(REPO / "data"),
    }


def test_keys_appear_nowhere_after_a_successful_run(storage, keyed_server):
    base_url, key = keyed_server
    done = materialize(storage, openai_env(base_url, key))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    events = events_text(storage / "dagster_home")
    # The control: what is not secret (the server's URL, inside the model id) is recorded and found.
    assert base_url in events and files_containing(storage, base_url)
    for secret in (key, f"qdrant-{key}"):
        assert secret not in events
        assert secret not in done.stdout and secret not in done.stderr
        assert files_containing(storage, secret) == []


def test_a_refused_key_fails_at_once_with_a_clear_error_and_no_trace_of_the_key(storage, keyed_server):
    base_url, key = keyed_server
    wrong = f"wrong-{key}"
    done = materialize(storage, openai_env(base_url, wrong))
    assert done.returncode != 0
    expected = f"openai embeddings provider at {base_url}: the API key in OPENAI_API_KEY was refused (HTTP 401)"
    assert expected in done.stdout + done.stderr
    events = events_text(storage / "dagster_home")
    assert expected in events and "STEP_UP_FOR_RETRY" not in events  # a refused key is not worth retrying
    for secret in (wrong, f"qdrant-{wrong}"):
        assert secret not in events
        assert secret not in done.stdout and secret not in done.stderr
        assert files_containing(storage, secret) == []
