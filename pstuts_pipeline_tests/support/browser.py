"""Headless chromium on the ask page, for its browser tests and benchmarks/ask_page.py."""

import time

# Debian's chromium in a container: no sandbox or GPU, and none of its own network traffic beside the page's.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
CHROMIUM_FLAGS += ["--disable-background-networking", "--disable-component-update", "--disable-sync"]


def wait_until(page, expression: str, arg: object = None, timeout_s: float = 20.0) -> None:  # noqa: ANN001
    """Wait until `expression` (a JS expression or function of `arg`) is true on the page, polling from here.

    Playwright's `wait_for_function` re-evaluates its predicate inside the page with eval, which the page's CSP
    (script-src 'self') refuses whenever the first check is not already true; `page.evaluate` is not bound by it.
    """
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true after {timeout_s} s: {expression}")
        time.sleep(0.02)
