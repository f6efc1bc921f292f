"""The project's configuration: typed models, one per concern, read from environment variables when asked for.

Each accessor below reads its concern now, so a bad value fails only the commands that use that concern, with one
line naming the variable (`SettingsError`). docs/configuration.md's tables are made from the models
(`python -m pstuts_pipeline.settings.table`); test_settings.py fails when they are stale.
"""

import os

from pstuts_pipeline.settings.base import SettingsError, load, project_root
from pstuts_pipeline.settings.models import (
    BACKENDS,
    CELERY_BROKER_VAR,
    DEFAULT_BACKEND,
    MIN_CHUNK_TOKENS_CAP,
    ChatSettings,
    ChunkingSettings,
    EmbeddingSettings,
    OperationsSettings,
    PathSettings,
    RerankerSettings,
    SearchSettings,
    SourceSettings,
    StoreSettings,
)

__all__ = [
    "BACKENDS",
    "CELERY_BROKER_VAR",
    "DEFAULT_BACKEND",
    "MIN_CHUNK_TOKENS_CAP",
    "ChatSettings",
    "ChunkingSettings",
    "EmbeddingSettings",
    "OperationsSettings",
    "PathSettings",
    "RerankerSettings",
    "SearchSettings",
    "SettingsError",
    "SourceSettings",
    "StoreSettings",
    "env",
    "load",
    "offline_model_hub",
    "paths",
    "project_root",
    "quiet_third_party",
    "source_limits",
]


def paths() -> PathSettings:
    """Where the pipeline reads and writes (every command needs these)."""
    return load(PathSettings)


def source_limits() -> SourceSettings:
    """Source reading limits, removal policy and run sizes (ingest, the sensor, the schedules)."""
    return load(SourceSettings)


def env(name: str) -> str:
    """One variable's raw value ('' when unset), for code that must see a value as set, e.g. to blank a secret."""
    return os.environ.get(name, "")


def offline_model_hub() -> None:
    """Process setup before transformers loads: never ask a model hub (none is reachable), no tokenizer threads.

    Kept as defaults: a user who sets either variable wins.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def quiet_third_party() -> None:
    """Before transformers loads, for `pstuts` without -v: no "Loading weights" bars, no library advice or warnings.

    Kept as defaults: a user who sets any of these variables wins.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
