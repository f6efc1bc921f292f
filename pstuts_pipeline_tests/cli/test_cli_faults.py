"""What the `pstuts` command says when something is off: empty questions, hostile titles, long errors, stores that
cannot be reached, written or filled. Each message is one line and names the server or folder concerned."""

import http.server
import importlib.metadata
import json
import os
import sqlite3
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import sqlalchemy.exc

from pstuts_pipeline.cli import app as cli
from pstuts_pipeline.cli.commands.search import print_results
from pstuts_pipeline.defs.resources import QdrantResource, QdrantStorageError, QdrantUnavailableError
from pstuts_pipeline.search.retrieval import SearchResult
from pstuts_pipeline_tests.support.helpers import COLLECTION, run_main, small_collection
from pstuts_pipeline_tests.support.servers import free_port

REPO = Path(__file__).resolve().parents[2]
QDRANT_CLIENT = importlib.metadata.version("qdrant-client")


@pytest.mark.parametrize("command", ["search", "ask"])
@pytest.mark.parametrize("question", ["", "   ", "\t?!", "___"])
def test_a_question_without_a_word_is_refused_in_one_line_by_search_and_ask_alike(
    monkeypatch, capsys, command, question
):
    code, out, err = run_main(monkeypatch, capsys, command, question)
    assert code == 2 and out == ""
    assert err == f"a question needs at least one word (a letter or digit); got {question.strip()!r}\n"


def test_a_setting_only_runs_read_does_not_stop_a_command_that_runs_none(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PSTUTS_STORAGE_DIR", str(tmp_path))
    small_collection(tmp_path / "qdrant")
    for name in ("PSTUTS_SENSOR_INTERVAL_S", "PSTUTS_MAX_VIDEOS_PER_RUN"):
        monkeypatch.setenv(name, "0")  # refused by the sensor and the backfill policy: `pstuts videos` reads neither
    code, out, err = run_main(monkeypatch, capsys, "videos", "--json")
    assert code == 0 and err == "" and '"videos"' in out


def test_a_bad_chat_setting_stops_ask_and_not_videos(monkeypatch, capsys, tmp_path):
    """Each command reads only its own resources' settings: the chat model's are ask's, not the store listing's."""
    monkeypatch.setenv("PSTUTS_STORAGE_DIR", str(tmp_path))
    small_collection(tmp_path / "qdrant")
    monkeypatch.setenv("PSTUTS_CHAT_MAX_TOKENS", "0")
    code, out, err = run_main(monkeypatch, capsys, "videos", "--json")
    assert code == 0 and err == "" and '"videos"' in out
    code, out, err = run_main(monkeypatch, capsys, "ask", "free transform")
    assert code == 1 and out == ""
    assert (
        err == "error: environment variable PSTUTS_CHAT_MAX_TOKENS is '0'; input should be greater than or equal to 1\n"
    )


def test_a_batch_size_below_one_is_refused_naming_the_variable(monkeypatch, capsys):
    monkeypatch.setenv("PSTUTS_EMBEDDING_BATCH_SIZE", "-3")
    code, out, err = run_main(monkeypatch, capsys, "search", "free transform")
    assert code == 1 and out == ""
    assert (
        err
        == "error: environment variable PSTUTS_EMBEDDING_BATCH_SIZE is '-3'; input should be greater than or equal to 1\n"
    )


def test_titles_and_snippets_cannot_drive_the_terminal(capsys):
    result = SearchResult(
        video_id=1,
        title="\x1b[2J\x1b[31mEvil title",
        url="https://example.com/v.mp4",
        start=0,
        stop=5,
        link_time=1,
        link="https://example.com/v.mp4#t=1.0\x07",
        score=1.0,
        text="Before. \x1b]0;owned\x07Linked. After.",
        chunk_index=0,
        link_sent_id=1,
        link_sentence="\x1b]0;owned\x07Linked.",
    )
    print_results("why\x1b[5m?", [result], as_json=False)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b[31mEvil title" in out and ">>> \\x1b]0;owned\\x07Linked. <<<" in out


def test_an_error_is_one_unwrapped_line_without_secrets_or_control_characters(monkeypatch, capsys):
    long = "x" * 150
    monkeypatch.setenv("OPENAI_API_KEY", "sk-configured-0123456789")

    def broken() -> None:
        raise RuntimeError(f"/data/{long}.json: video 1: title: server said Bearer sk-configured-0123456789 \x1b[31m")

    monkeypatch.setattr(cli, "app", broken)
    code, _, err = run_main(monkeypatch, capsys)
    assert code == 1
    assert err.count("\n") == 1 and long in err  # not wrapped at 80 columns though stderr is no terminal
    assert "sk-configured" not in err and "Bearer [redacted]" in err and "\x1b" not in err


def test_a_dagster_storage_error_names_the_instance_folder(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))

    def read_only() -> None:
        raise sqlalchemy.exc.OperationalError(
            "INSERT INTO runs ...", {}, sqlite3.OperationalError("attempt to write a readonly database")
        )

    monkeypatch.setattr(cli, "app", read_only)
    code, _, err = run_main(monkeypatch, capsys)
    assert code == 1
    assert (
        err.strip()
        == f"error: Dagster instance in {tmp_path / 'home'} (DAGSTER_HOME): attempt to write a readonly database"
    )


def test_an_unreachable_qdrant_server_is_named_and_no_thread_is_left_to_race_the_exit(monkeypatch):
    started = []
    original_start = threading.Thread.start

    def recording_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        original_start(thread)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(QdrantUnavailableError) as refused:
        with QdrantResource(url=url, timeout_s=5).get_store() as store:
            store.exists()
    assert str(refused.value).startswith(f"Qdrant server at {url} (QDRANT_URL): ")
    assert "Connection refused" in str(refused.value)
    # qdrant-client's version check in a daemon thread made `pstuts search` crash at exit in about half its runs.
    assert started == []


@pytest.mark.parametrize(("version", "warned"), [(QDRANT_CLIENT, False), ("0.9.0", True)])
def test_a_server_of_another_major_version_is_warned_about(version, warned):
    class Root(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            body = json.dumps({"title": "qdrant", "version": version}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with QdrantResource(url=f"http://127.0.0.1:{server.server_port}").get_store():
                pass
    finally:
        server.shutdown()
        server.server_close()
    messages = [str(w.message) for w in caught if "Qdrant server's version" in str(w.message)]
    assert messages == (
        [
            f"qdrant-client {QDRANT_CLIENT} may not work with the Qdrant server's version {version}: "
            "the major versions should match and the minor ones differ by at most 1"
        ]
        if warned
        else []
    )


@pytest.mark.slow
def test_search_against_an_unreachable_server_says_which(storage):
    url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "QDRANT_URL": url, "PSTUTS_DATA_DIR": str(REPO / "data")}
    done = subprocess.run(
        [str(Path(sys.executable).with_name("pstuts")), "search", "How do I crop?"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert f"error: Qdrant server at {url} (QDRANT_URL): [Errno 111] Connection refused" in done.stderr, done.stderr


def test_an_engine_error_opening_the_local_store_names_the_folder(tmp_path):
    small_collection(tmp_path / "qdrant")
    (tmp_path / "qdrant" / COLLECTION / "edge_config.json").write_text("{not json")  # a damaged shard
    qdrant = QdrantResource(path=str(tmp_path / "qdrant"))
    with pytest.raises(QdrantStorageError) as damaged:
        with qdrant.get_store():
            pass
    assert str(damaged.value).startswith(f"local Qdrant folder {tmp_path / 'qdrant'} (PSTUTS_QDRANT_PATH): ")


def test_a_folder_that_cannot_be_written_is_named(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    qdrant = QdrantResource(path=str(tmp_path / "file" / "qdrant"))
    with pytest.raises(
        QdrantStorageError, match=f"local Qdrant folder {tmp_path / 'file' / 'qdrant'} .*cannot be opened"
    ):
        with qdrant.get_store():
            pass


def test_search_reads_a_read_only_folder_through_a_private_copy(tmp_path, monkeypatch):
    folder = tmp_path / "qdrant"
    small_collection(folder, "c")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    real_access = os.access
    # As root every folder is writable, so the read-only mount is simulated where the resource asks.
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == folder else real_access(path, mode))

    with QdrantResource(path=str(folder), collection="c").get_store(read_only=True) as reader:
        assert reader.count() == 1

    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no lock file written beside or inside it
