"""Every benchmark still imports: helpers move between modules, and a benchmark is run by hand, rarely."""

import ast
import subprocess
import sys

import pytest

from pstuts_pipeline_tests.support import REPO

OURS = ("pstuts_pipeline", "pstuts_pipeline_tests", "benchmarks")


def imported_names(source: str) -> list[str]:
    """Every `module` and `module:name` a file imports from our packages, the imports inside functions too."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in OURS:
            found += [f"{node.module}:{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in OURS]
    return found


@pytest.mark.slow
def test_every_benchmark_module_and_its_deferred_imports_resolve():
    files = sorted(p for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")
    names = sorted({name for f in files for name in imported_names(f.read_text())})
    names += [f"benchmarks.{f.stem}" for f in files]
    code = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    module, _, attr = name.partition(':')\n"
        "    loaded = importlib.import_module(module)\n"
        "    if attr and not hasattr(loaded, attr):\n"
        "        importlib.import_module(f'{module}.{attr}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert len(files) >= 20 and any("." in n and ":" in n for n in names), names
    assert done.returncode == 0, done.stderr[-2000:]
