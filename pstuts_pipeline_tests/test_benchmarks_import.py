"""Every benchmark still imports: helpers move between modules, and a benchmark is run by hand, rarely."""

import subprocess
import sys

import pytest

from pstuts_pipeline_tests.support import REPO


@pytest.mark.slow
def test_every_benchmark_module_imports():
    names = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem != "__init__")
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(f'benchmarks.{name}')\n"
    done = subprocess.run([sys.executable, "-c", code, *names], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert len(names) >= 20 and done.returncode == 0, done.stderr[-2000:]
