"""Where the project keeps its data and state by default, from environment variables with sane fallbacks."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The checkout this package runs from, or the working directory when installed elsewhere."""
    checkout = PACKAGE_DIR.parent
    return checkout if (checkout / "pyproject.toml").exists() else Path.cwd()


def storage_dir() -> Path:
    """Everything the pipeline writes by default: Dagster instance, Qdrant store, caches."""
    return Path(os.environ.get("PSTUTS_STORAGE_DIR") or project_root() / ".storage")


def data_dir() -> Path:
    """The folder of transcript files to ingest (PsTuts-VQA JSON and SRT/WebVTT captions)."""
    return Path(os.environ.get("PSTUTS_DATA_DIR") or project_root() / "data")


def dagster_home() -> Path:
    """The Dagster instance the CLI uses when DAGSTER_HOME is not set."""
    return Path(os.environ.get("DAGSTER_HOME") or storage_dir() / "dagster_home")


def env_int(name: str, default: int) -> int:
    """An integer setting from the environment, with a clear error if it is not one."""
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} is {value!r}, not an integer") from None


def max_videos_per_run() -> int:
    """How many videos one `pstuts ingest` run materializes at most (PSTUTS_MAX_VIDEOS_PER_RUN).

    A run holds its videos' texts and vectors in memory at once; bigger runs share more per-run overhead,
    smaller ones bound the memory. At 100, train+dev (65 videos) is one run.
    """
    limit = env_int("PSTUTS_MAX_VIDEOS_PER_RUN", 100)
    if limit < 1:
        raise ValueError(f"environment variable PSTUTS_MAX_VIDEOS_PER_RUN is {limit}; it must be at least 1")
    return limit
