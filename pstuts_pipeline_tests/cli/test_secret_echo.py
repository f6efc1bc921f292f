"""A server that echoes the API key in an error other than a 401 leaks it nowhere: not in the CLI's output, the
run's event log or compute logs, nor any stored file."""

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pstuts_pipeline.redaction import redact
from pstuts_pipeline_tests.support.helpers import events_text, files_containing

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-pstuts-echo400-" + "5" * 24


class EchoingServer:
    """An OpenAI-compatible endpoint on loopback that answers every request 400, quoting the request's headers."""

    def __init__(self, status: int = 400):
        self.presented: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.presented.append(self.headers.get("Authorization", ""))
                message = f"Invalid request. Headers received: Authorization: {self.headers.get('Authorization')}"
                body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def echoing_server() -> Iterator[EchoingServer]:
    server = EchoingServer()
    yield server
    server.close()


@pytest.mark.slow
def test_a_400_that_echoes_the_key_leaks_it_nowhere(storage, echoing_server):
    env = {
        **os.environ,
        "PSTUTS_EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": echoing_server.url,
        "OPENAI_API_KEY": SECRET,
        "PSTUTS_EMBEDDING_MODEL": "echo-model",  # not an OpenAI name: no tiktoken download
        "PSTUTS_MAX_CHUNK_TOKENS": "256",
        "PSTUTS_DATA_DIR": str(REPO / "data"),
        "COLUMNS": "300",
    }
    done = subprocess.run(
        [str(Path(sys.executable).with_name("pstuts")), "ingest"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert echoing_server.presented and all(SECRET in h for h in echoing_server.presented)  # the key was sent
    assert f"openai embeddings provider at {echoing_server.url}: HTTP 400" in output, output
    assert "Bearer [redacted]" in output
    assert SECRET not in output
    events = events_text(storage / "dagster_home")
    assert "HTTP 400" in events and SECRET not in events
    assert "STEP_UP_FOR_RETRY" not in events  # a 400 is not transient: no retry
    assert files_containing(storage, SECRET) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-123", "Authorization: Bearer [redacted]"),
        ("key sk-proj-ABCdef123456789 was wrong", "key [redacted] was wrong"),
        ('{"api_key": "hunter2hunter2"}', '{"api_key": "[redacted]"}'),
        ("the configured one: configured-secret-value", "the configured one: [redacted]"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_redact_blanks_configured_secrets_and_key_shaped_text(monkeypatch, text, expected):
    monkeypatch.setenv("OPENAI_API_KEY", "configured-secret-value")
    assert redact(text) == expected
