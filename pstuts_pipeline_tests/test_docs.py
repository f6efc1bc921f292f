"""What the README and docs/ say stays true: the generated module layout, the links and paths they name, and the
demo output, which is what `make demo` prints."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A path in backticks under one of the checkout's folders, e.g. `scripts/chat_server.sh` or `deploy/k8s/`.
REPO_PATH = re.compile(
    r"`((?:pstuts_pipeline|pstuts_pipeline_tests|benchmarks|scripts|deploy|data|docs|\.ci)/[\w./-]*)`"
)
TEST_FILE = re.compile(r"`(test_\w+\.py)`")
MODULE_RUN = re.compile(r"python -m (benchmarks\.\w+)")


def page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def test_layout_section_names_every_module_as_the_tree_has_it() -> None:
    checked = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "docs_layout.py"), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    architecture = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for module in sorted((REPO / "pstuts_pipeline").rglob("*.py")):
        if module.name != "__init__.py":
            assert f"`{module.relative_to(REPO)}`" in architecture


def anchors(page: Path) -> set[str]:
    """The ids GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    headings = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_file_and_command_a_page_names_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    tests = {p.name for p in (REPO / "pstuts_pipeline_tests").rglob("test_*.py")}
    missing = [p for p in REPO_PATH.findall(text) if not (REPO / p).exists()]
    missing += [t for t in TEST_FILE.findall(text) if t not in tests]
    missing += [m for m in MODULE_RUN.findall(text) if not (REPO / (m.replace(".", "/") + ".py")).exists()]
    assert missing == []


@pytest.mark.slow
def test_the_readme_shows_what_make_demo_prints() -> None:
    """Runs the demo's commands on the sample data in a temporary store: about a minute (three model loads)."""
    checked = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo_output.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
