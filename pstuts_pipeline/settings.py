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
    """The folder of `*.json` transcript files to ingest."""
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
