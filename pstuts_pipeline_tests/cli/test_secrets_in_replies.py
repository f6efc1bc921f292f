"""Secrets out of every reply (issue 33): URLs with credentials work in real commands, a chat answer that quotes the
key reaches no one, and every secret variable the code reads is in the redaction list."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pstuts_pipeline.redaction import SECRET_VARIABLES, URL_VARIABLES, redact
from pstuts_pipeline_tests.support.servers import FakeChatServer

PACKAGE = Path(__file__).resolve().parents[2] / "pstuts_pipeline"
CONFIGURATION = PACKAGE.parent / "docs" / "configuration.md"
SECRET_NAME = re.compile(r"^[A-Z0-9_]*(API_KEY|PASSWORD|TOKEN|SECRET)$")
KEY = "pstuts-chat-key-" + "7" * 20
PASSWORD = "pa55word-in-url"


def variables_the_project_reads() -> set[str]:
    """Every environment variable named in the package's code or in docs/configuration.md's table."""
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"[\"']([A-Z][A-Z0-9_]{2,})[\"']", path.read_text()))
    named |= set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", CONFIGURATION.read_text(), re.MULTILINE))
    return named


def test_every_secret_variable_the_code_reads_is_redacted():
    secrets = {name for name in variables_the_project_reads() if SECRET_NAME.match(name)}
    assert {"OPENAI_API_KEY", "PSTUTS_CHAT_API_KEY", "QDRANT_API_KEY"} <= secrets, "the scan finds what it must"
    assert secrets - set(SECRET_VARIABLES) == set()


def test_a_url_password_is_blanked_even_without_its_url(monkeypatch):
    monkeypatch.setenv("PSTUTS_CHAT_BASE_URL", f"http://user:{PASSWORD}@127.0.0.1:9/v1")
    assert "PSTUTS_CHAT_BASE_URL" in URL_VARIABLES
    assert PASSWORD not in redact(f"the server said: I got user:{PASSWORD} and {PASSWORD}")


@pytest.mark.slow
def test_pstuts_ask_with_credentials_in_the_chat_url_works_and_never_shows_them(ingested, storage):
    """A real `pstuts ask` against a chat server on loopback whose 200 answer quotes the key and the URL's password."""
    chat = FakeChatServer()
    try:
        host = chat.url.removeprefix("http://")
        chat.reply(content=f"Press Command+T [00:15]. (Request had Authorization: Bearer {KEY}, user:{PASSWORD})")
        env = {
            **os.environ,
            "PSTUTS_CHAT_MODEL": "fake-model",
            "PSTUTS_CHAT_BASE_URL": f"http://user:{PASSWORD}@{host}",
            "PSTUTS_CHAT_API_KEY": KEY,
            "PSTUTS_CHAT_JSON_SCHEMA": "0",
            "COLUMNS": "300",
        }
        done = subprocess.run(
            [str(Path(sys.executable).with_name("pstuts")), "ask", "How do I open Free Transform?", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        chat.close()
    assert done.returncode == 0, done.stderr
    assert chat.requests, "the chat server was asked"
    answer = json.loads(done.stdout)
    assert "Command+T" in answer["answer"] and answer["model"] == "fake-model"
    for secret in (KEY, PASSWORD):
        assert secret not in done.stdout and secret not in done.stderr
