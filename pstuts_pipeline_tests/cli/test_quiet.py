"""What a user reads in the terminal: `pstuts search` over ingested videos prints the results and nothing else."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow
QUIETING = {"HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TRANSFORMERS_NO_ADVISORY_WARNINGS"}


def pstuts(*args: str, onnx_models: Path) -> subprocess.CompletedProcess:
    # The fixtures set PSTUTS_DATA_DIR, PSTUTS_STORAGE_DIR and DAGSTER_HOME in this process's environment.
    # No disk cache of query vectors and an empty folder of ONNX exports: each call loads the model and exports it
    # for the default backend (through sentence-transformers), whose loading bar is what must stay hidden.
    # The quieting variables `pstuts` sets are dropped: a test that ran the CLI in this process left them here.
    env = {k: v for k, v in os.environ.items() if k not in QUIETING}
    env |= {"PSTUTS_EMBEDDING_CACHE_DIR": "", "PSTUTS_ONNX_MODELS_DIR": str(onnx_models)}
    return subprocess.run([str(BIN / "pstuts"), *args], env=env, capture_output=True, text=True, timeout=300)


def test_search_prints_results_on_stdout_and_nothing_on_stderr(ingested, tmp_path):
    question = ("search", "How do I open Free Transform?", "--top-k", "2")
    quiet = pstuts(*question, onnx_models=tmp_path / "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""  # no "Loading weights" bar, no library warnings
    assert "Free Transform" in quiet.stdout and "1. " in quiet.stdout
    assert "#t=" not in quiet.stdout.replace("mp4#t=", "")  # every link is a URL at a moment, or there is none

    # -v lets the libraries speak: the bar this test guards against is really there to hide.
    verbose = pstuts("-v", *question, onnx_models=tmp_path / "verbose")
    assert verbose.returncode == 0 and "Loading weights" in verbose.stderr
    assert verbose.stdout == quiet.stdout
