"""Imports point one way, CLI → ask page → Dagster definitions → domain, and in the domain sources → chunking →
embedding → search → answers and training; domain code never imports Dagster; no module imports itself back through
others: the folder tree is the architecture, and this keeps it so.

The first three are import-linter contracts in pyproject.toml (`make lint` checks them too); the cycle and private-API
rules, which import-linter cannot state per module, are checked here by hand.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pstuts_pipeline

PACKAGE = Path(pstuts_pipeline.__file__).parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on the package under `root`, with the contracts of `root`/pyproject.toml."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env={"PYTHONPATH": str(root)}, capture_output=True, text=True
    )


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module this one imports, at the top or inside a function (a lazy import still ties the two)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
GRAPH = {name: {m for m in imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def test_the_import_contracts_hold() -> None:
    run = lint_imports(PACKAGE.parent)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("sources/model.py", "pstuts_pipeline.chunking.chunker"),  # the domain's order
        ("search/scoring.py", "pstuts_pipeline.defs.partitions"),  # domain → Dagster definitions
        ("chunking/validation.py", "dagster"),  # the domain importing Dagster
    ],
)
def test_an_import_against_the_contracts_fails_them(tmp_path: Path, module: str, upward: str) -> None:
    shutil.copytree(PACKAGE, tmp_path / "pstuts_pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path)
    target = tmp_path / "pstuts_pipeline" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n\ndef _late() -> None:\n    import {upward}\n")
    run = lint_imports(tmp_path)
    assert run.returncode != 0 and "BROKEN" in run.stdout, run.stdout + run.stderr


def test_no_module_imports_itself_back_through_others() -> None:
    """A package's __init__ re-exporting its modules is not a cycle; anything else that comes back is."""

    def reaches(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in GRAPH[node]:
                if nxt == start and len(path) > 1:
                    return [*path, nxt]
                if nxt not in seen and not start.startswith(nxt + "."):
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
        return None

    cycles = [" → ".join(c) for m in MODULES if (c := reaches(m)) and not any(x.startswith(m + ".") for x in c)]
    assert cycles == []


def test_private_dagster_api_is_used_in_one_module_only() -> None:
    users = sorted(m for m, p in MODULES.items() if any(i.startswith("dagster._") for i in imports(p)))
    assert users == ["pstuts_pipeline.defs.dagster_private"]
