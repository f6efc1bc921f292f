"""Imports point one way, CLI (and the web page) → Dagster definitions → domain, domain code never imports Dagster, and no module
imports itself back through others: the folder tree is the architecture, and this keeps it so."""

import ast
from pathlib import Path

import pytest

import pstuts_pipeline

PACKAGE = Path(pstuts_pipeline.__file__).parent
# Higher layers may import lower ones, never the reverse (the CLI and the ask page on top). settings and redaction
# serve every layer.
LAYERS = {"cli": 3, "web": 3, "defs": 2, "definitions": 2}
DOMAIN = 1


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    return LAYERS.get(module.split(".")[1] if "." in module else "", DOMAIN)


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


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_from_the_cli_to_dagster_definitions_to_the_domain(module: str) -> None:
    upward = sorted(m for m in GRAPH[module] if layer(m) > layer(module))
    assert upward == [], f"{module} (layer {layer(module)}) imports a higher layer: {upward}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if layer(m) == DOMAIN))
def test_domain_code_does_not_import_dagster(module: str) -> None:
    dagster = sorted(m for m in imports(MODULES[module]) if m == "dagster" or m.startswith("dagster"))
    assert dagster == [], f"{module} is domain code but imports {dagster}"


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
