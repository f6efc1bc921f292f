"""The ask page measured: seconds from question to answer through its JSON API and on the page in chromium
(p50/p95), extractive and with the local chat model, and the page's weight in bytes.

Run from the checkout:  .venv/bin/python -m benchmarks.ask_page [--questions 50] [--page-questions 10] [--no-chat]

dev.json's 11 videos are ingested into fresh folders with `pstuts ingest`; a fixed sample of dev questions (the one
`pstuts evaluate --answers` uses) is then asked of `pstuts serve` in a child process: each through POST /api/ask,
timed by the client (search, answer and HTTP, one question at a time), and the first `--page-questions` of them on
the page, timed from the click on Ask until the answer is shown (Debian's chromium, driven by Playwright). Then the
same with SmolLM2-135M-Instruct served by scripts/chat_server.py (1 thread). The machine is shared: the load
average is printed before and after each series; compare medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pstuts_pipeline.answers import metrics as answer_metrics
from pstuts_pipeline.search import evaluation
from pstuts_pipeline_tests.support import REPO
from pstuts_pipeline_tests.support.browser import CHROMIUM_FLAGS, wait_until
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR
from pstuts_pipeline_tests.support.servers import free_port, http_json
from pstuts_pipeline_tests.support.workspace import Workspace, load, machine, pstuts_command

PAGE_FILES = ("/", "/static/app.js", "/static/style.css")
CHAT_MODEL = "smollm2-135m-instruct"
CHAT_GGUF = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pstuts/models/SmolLM2-135M-Instruct.Q4_1.gguf"
)


def wait_for(url: str, process: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start (see its log)") from None
            time.sleep(0.5)


@contextmanager
def child(command: list[str], env: dict[str, str], log: Path, ready: str, what: str) -> Iterator[subprocess.Popen]:
    """A server in a child process, until the block ends."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(ready, process, f"{what} (log {log})")
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50_s": round(statistics.median(ordered), 3), "p95_s": round(p95, 3)}


def api_series(url: str, questions: list[str]) -> tuple[list[float], list[dict]]:
    """Each question through POST /api/ask, one at a time: (seconds per question, replies)."""
    http_json(f"{url}/api/ask", {"question": "warm up"}, timeout=300)
    seconds, replies = [], []
    for question in questions:
        started = time.perf_counter()
        replies.append(http_json(f"{url}/api/ask", {"question": question}, timeout=300))
        seconds.append(time.perf_counter() - started)
    return seconds, replies


def page_series(url: str, questions: list[str]) -> list[float]:
    """Each question typed on the page in headless chromium: seconds from the click on Ask to the answer shown."""
    from playwright.sync_api import sync_playwright

    seconds = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.goto(url)
        for question in questions:
            page.fill("#question", question)
            started = time.perf_counter()
            page.click("#ask")
            wait_until(page, "q => document.getElementById('answer-box').dataset.question === q", question, 300)
            seconds.append(time.perf_counter() - started)
        browser.close()
    return seconds


def page_weight(url: str) -> dict[str, int]:
    """Bytes of the page's own files as served (no compression), and their total."""
    sizes = {}
    for path in PAGE_FILES:
        with urllib.request.urlopen(url + path) as answer:
            sizes[path] = len(answer.read())
    return {**sizes, "total": sum(sizes.values())}


def measure(space: Workspace, settings: dict[str, str], questions: list[str], page_questions: int, name: str) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**space.env(), **settings}
    command = [*pstuts_command(), "serve", "--port", str(port)]
    with child(command, env, space.logs / f"serve-{name}.log", f"{url}/api/status", f"pstuts serve ({name})"):
        before = load()
        api, replies = api_series(url, questions)
        page = page_series(url, questions[:page_questions]) if page_questions else []
        after = load()
        weight = page_weight(url)
    failed = sum(1 for r in replies if r.get("error"))
    return {
        "api": percentiles(api),
        "page": percentiles(page) if page else None,
        "chat_errors": failed,
        "load_before": before,
        "load_after": after,
        "page_bytes": weight,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50, help="dev questions asked through the API")
    parser.add_argument("--page-questions", type=int, default=10, help="of them, asked on the page too")
    parser.add_argument("--no-chat", action="store_true", help="extractive answers only")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    dev = PSTUTS_DIR / "dev.json"
    asked = answer_metrics.sample_questions(evaluation.load_questions([dev]), args.questions)
    questions = [q.text for q in asked]
    results: dict = {"machine": machine(), "questions": len(questions)}
    with tempfile.TemporaryDirectory(prefix="pstuts-ask-page-") as tmp:
        space = Workspace(Path(tmp), "dev")
        space.link([dev])
        ingest = space.ingest("ingest")
        if ingest.returncode:
            raise SystemExit(f"pstuts ingest failed:\n{ingest.output}")
        results["ingest_s"] = round(ingest.seconds, 1)
        results["extractive"] = measure(space, {"PSTUTS_CHAT_MODEL": ""}, questions, args.page_questions, "extractive")
        if not args.no_chat:
            if not CHAT_GGUF.exists():
                raise SystemExit(f"{CHAT_GGUF} is missing: `bash scripts/chat_server.sh start` fetches it")
            port = free_port()
            base = f"http://127.0.0.1:{port}/v1"
            command = [
                sys.executable,
                str(REPO / "scripts" / "chat_server.py"),
                str(CHAT_GGUF),
                str(port),
                CHAT_MODEL,
                "1",
            ]
            with child(command, space.env(), space.logs / "chat.log", f"{base}/models", "the chat server"):
                chat = {"PSTUTS_CHAT_MODEL": CHAT_MODEL, "PSTUTS_CHAT_BASE_URL": base}
                results[CHAT_MODEL] = measure(space, chat, questions, args.page_questions, "chat")
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
