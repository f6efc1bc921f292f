"""The project's configuration from environment variables: the one module that reads them, each with its default.

Resource fields are filled from here by `resources.resources_from_env` (the settings the UI shows per resource);
process-wide settings (paths, schedule, run size) are the functions below. docs/configuration.md's table lists
every one. Nothing is read at import time: each function reads the environment when called.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def project_root() -> Path:
    """The checkout this package runs from, or the working directory when installed elsewhere."""
    checkout = PACKAGE_DIR.parent
    return checkout if (checkout / "pyproject.toml").exists() else Path.cwd()


DEFAULT_SENSOR_INTERVAL_S = 15
DEFAULT_CRON = "0 3 * * *"
DEFAULT_TIMEZONE = "UTC"


def env(name: str, default: str = "") -> str:
    """A setting from the environment; unset gives the default (an empty value stays empty)."""
    return os.environ.get(name, default)


def env_set(name: str) -> bool:
    """Whether a setting is present (even empty): some settings use an empty value to switch a default off."""
    return name in os.environ


def storage_dir() -> Path:
    """Everything the pipeline writes by default: Dagster instance, Qdrant store, caches."""
    return Path(env("PSTUTS_STORAGE_DIR") or project_root() / ".storage")


def data_dir() -> Path:
    """The folder of transcript files to ingest (PsTuts-VQA JSON and SRT/WebVTT captions)."""
    return Path(env("PSTUTS_DATA_DIR") or project_root() / "data")


def dagster_home() -> Path:
    """The Dagster instance the CLI uses when DAGSTER_HOME is not set."""
    return Path(env("DAGSTER_HOME") or storage_dir() / "dagster_home")


def tuned_models_dir() -> Path:
    """Where tuned model versions go by default, and where `latest` looks for them (PSTUTS_TUNED_MODELS_DIR)."""
    return Path(env("PSTUTS_TUNED_MODELS_DIR") or storage_dir() / "tuned_models")


def rerankers_dir() -> Path:
    """Where reranker versions go by default, and where `latest` looks for them (PSTUTS_RERANKERS_DIR)."""
    return Path(env("PSTUTS_RERANKERS_DIR") or storage_dir() / "rerankers")


# How the local models run: PyTorch in float32, or ONNX Runtime on an export of the same weights (docs/embedding-backends.md).
BACKENDS = ("torch", "onnx", "onnx-int8")
# The fastest backend whose dev hit@5 and link@5 are within 0.005 of float32 torch (measured 2026-12-05).
DEFAULT_BACKEND = "onnx"
# The same rule for the reranker, measured with a trained one on all dev questions, each question's pairs scored on
# their own, one phrase per candidate: int8 hit@5 +0.000, link@5 -0.002 (2026-12-06; with two phrases it had missed
# by 0.009 the evening before).
DEFAULT_RERANKER_BACKEND = "onnx-int8"


def embedding_backend() -> str:
    """How the local embedding model runs (PSTUTS_EMBEDDING_BACKEND): torch, onnx or onnx-int8.

    Unset, with a precision only torch runs (PSTUTS_EMBEDDING_PRECISION=bfloat16), it is torch.
    """
    return env("PSTUTS_EMBEDDING_BACKEND") or (DEFAULT_BACKEND if embedding_precision() == "float32" else "torch")


def embedding_precision() -> str:
    """The local model's precision (PSTUTS_EMBEDDING_PRECISION): float32, or bfloat16 under autocast (torch only)."""
    return env("PSTUTS_EMBEDDING_PRECISION", "float32")


def reranker_backend() -> str:
    """How the reranker runs (PSTUTS_RERANKER_BACKEND): torch, onnx or onnx-int8."""
    return env("PSTUTS_RERANKER_BACKEND") or DEFAULT_RERANKER_BACKEND


def onnx_models_dir() -> Path:
    """Where ONNX exports of the local models are made on first use (PSTUTS_ONNX_MODELS_DIR)."""
    return Path(env("PSTUTS_ONNX_MODELS_DIR") or storage_dir() / "onnx_models")


def io_path() -> str:
    """Where intermediate assets are stored (PSTUTS_IO_PATH; empty: io/ under the storage dir)."""
    return env("PSTUTS_IO_PATH")


def reingest_cron() -> str:
    """When the nightly schedules run (PSTUTS_REINGEST_CRON)."""
    return env("PSTUTS_REINGEST_CRON") or DEFAULT_CRON


def reingest_timezone() -> str:
    """The schedules' timezone (PSTUTS_REINGEST_TIMEZONE)."""
    return env("PSTUTS_REINGEST_TIMEZONE") or DEFAULT_TIMEZONE


def reingest_all() -> bool:
    """Whether the schedule re-ingests every video (PSTUTS_REINGEST_ALL=1, e.g. after a model change)."""
    return env("PSTUTS_REINGEST_ALL") == "1"


def openai_api_key() -> str:
    """OPENAI_API_KEY, for callers outside Dagster's resources (which get it through `dg.EnvVar`)."""
    return env("OPENAI_API_KEY")


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


def _env_number(name: str, default: float, convert: type, noun: str) -> float:
    """A number from the environment (the default when unset or empty), refused naming the variable if not one."""
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        return convert(value)
    except ValueError:
        raise ValueError(f"environment variable {name} is {value!r}, not {noun}") from None


def env_int(name: str, default: int) -> int:
    """An integer setting from the environment, with a clear error if it is not one."""
    return int(_env_number(name, default, int, "an integer"))


def env_weight(name: str, default: float) -> float:
    """A non-negative finite weight from the environment, refused naming the variable when it is not one."""
    weight = float(_env_number(name, default, float, "a number"))
    if not 0 <= weight < float("inf"):
        raise ValueError(f"environment variable {name} is {weight!r}; it must be a finite number of at least 0")
    return weight


def env_fraction(name: str, default: float) -> float:
    """A number from 0 to 1 from the environment, refused naming the variable when it is not one."""
    value = float(_env_number(name, default, float, "a number"))
    if not 0 <= value <= 1:
        raise ValueError(f"environment variable {name} is {value!r}; it must be a number from 0 to 1")
    return value


def max_videos_per_run() -> int:
    """How many videos one `pstuts ingest` run materializes at most (PSTUTS_MAX_VIDEOS_PER_RUN).

    A run holds its videos' texts and vectors in memory at once; bigger runs share more per-run overhead,
    smaller ones bound the memory. At 100, train+dev (65 videos) is one run.
    """
    limit = env_int("PSTUTS_MAX_VIDEOS_PER_RUN", 100)
    if limit < 1:
        raise ValueError(f"environment variable PSTUTS_MAX_VIDEOS_PER_RUN is {limit}; it must be at least 1")
    return limit


def max_phrases_per_run() -> int:
    """How many phrases one ingest run holds at most (PSTUTS_MAX_PHRASES_PER_RUN); a bigger video runs alone.

    A run holds its videos' texts and vectors until they are written; with the cap, a run of huge videos holds one.
    """
    return env_limit("PSTUTS_MAX_PHRASES_PER_RUN", 50_000)


def env_limit(name: str, default: int, minimum: int = 1) -> int:
    """A positive integer limit from the environment; a value below `minimum` is refused naming the variable."""
    limit = env_int(name, default)
    if limit < minimum:
        raise ValueError(f"environment variable {name} is {limit}; it must be at least {minimum}")
    return limit


def env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment, refused naming the variable when it is not one."""
    seconds = float(_env_number(name, default, float, "a number of seconds"))
    if not 0 < seconds < float("inf"):
        value = os.environ.get(name)
        raise ValueError(f"environment variable {name} is {value!r}; it must be a positive number of seconds")
    return seconds


def sensor_interval_seconds() -> int:
    """How often the folder sensor looks at the data folder (PSTUTS_SENSOR_INTERVAL_S)."""
    return env_limit("PSTUTS_SENSOR_INTERVAL_S", DEFAULT_SENSOR_INTERVAL_S)


def settle_seconds() -> float:
    """How long a source file must be left unwritten before it is read (PSTUTS_SETTLE_S; 0 reads it at once)."""
    seconds = float(_env_number("PSTUTS_SETTLE_S", 1.0, float, "a number of seconds"))
    if not 0 <= seconds <= 3600:
        raise ValueError(f"environment variable PSTUTS_SETTLE_S is {seconds!r}; it must be from 0 to 3600 seconds")
    return seconds


def max_removal_share() -> float:
    """The share of stored videos one reconcile may remove without a say-so (PSTUTS_MAX_REMOVAL_SHARE)."""
    share = float(_env_number("PSTUTS_MAX_REMOVAL_SHARE", 0.5, float, "a number"))
    if not 0 <= share <= 1:
        raise ValueError(f"environment variable PSTUTS_MAX_REMOVAL_SHARE is {share!r}; it must be from 0 to 1")
    return share


def allow_mass_removal() -> bool:
    """Whether removals over that share, or of every stored video, are made (PSTUTS_ALLOW_MASS_REMOVAL=1)."""
    return env("PSTUTS_ALLOW_MASS_REMOVAL") == "1"


def allow_links_outside() -> bool:
    """Whether source files that are links out of the data folder are read (PSTUTS_ALLOW_LINKS_OUTSIDE=1)."""
    return env("PSTUTS_ALLOW_LINKS_OUTSIDE") == "1"


def max_file_bytes() -> int:
    """The largest source file read (PSTUTS_MAX_FILE_BYTES, default 64 MB): a bigger one is refused unread."""
    return env_limit("PSTUTS_MAX_FILE_BYTES", 64 << 20)


def read_timeout_seconds() -> float:
    """How long reading one source file may take (PSTUTS_READ_TIMEOUT_S, default 60): a stalled mount fails it."""
    return env_seconds("PSTUTS_READ_TIMEOUT_S", 60.0)


def max_phrases_per_video() -> int:
    """The most phrases (or caption cues) one video may hold (PSTUTS_MAX_PHRASES_PER_VIDEO, default 100,000)."""
    return env_limit("PSTUTS_MAX_PHRASES_PER_VIDEO", 100_000)


def max_phrase_chars() -> int:
    """The longest phrase, question or answer, in characters (PSTUTS_MAX_PHRASE_CHARS, default 1,000,000)."""
    return env_limit("PSTUTS_MAX_PHRASE_CHARS", 1_000_000)


def max_field_chars() -> int:
    """The longest title, description or url, in characters (PSTUTS_MAX_FIELD_CHARS, default 4,096).

    Every phrase, chunk and point of a video carries these fields, so they cost their length many times over.
    """
    return env_limit("PSTUTS_MAX_FIELD_CHARS", 4096)


# Fewer tokens than this leave a chunk no room for words beside the model's special tokens.
MIN_CHUNK_TOKENS_CAP = 16


def max_chunk_tokens() -> int:
    """The cap on a chunk's tokens (PSTUTS_MAX_CHUNK_TOKENS; 0, the default, is the model's input window)."""
    cap = env_int("PSTUTS_MAX_CHUNK_TOKENS", 0)
    if cap != 0 and cap < MIN_CHUNK_TOKENS_CAP:
        raise ValueError(
            f"environment variable PSTUTS_MAX_CHUNK_TOKENS is {cap}; it must be 0 (the model's window) or at least "
            f"{MIN_CHUNK_TOKENS_CAP}, room for a few words beside the model's special tokens"
        )
    return cap


EXECUTORS = ("in_process", "celery")
# Named, never read, by the Celery executor's config ({"env": ...}): Dagster resolves it where the run executes.
CELERY_BROKER_VAR = "PSTUTS_CELERY_BROKER"


def executor_name() -> str:
    """Where a run's steps execute (PSTUTS_EXECUTOR): `in_process` (one process per run) or `celery` (workers)."""
    name = env("PSTUTS_EXECUTOR") or "in_process"
    if name not in EXECUTORS:
        raise ValueError(f"environment variable PSTUTS_EXECUTOR is {name!r}; expected one of {', '.join(EXECUTORS)}")
    return name


def celery_visibility_timeout_s() -> int:
    """Seconds before Redis hands a step whose worker vanished to another worker (PSTUTS_CELERY_VISIBILITY_TIMEOUT_S).

    Longer than the longest step: a step still running past it is handed out a second time.
    """
    return env_limit("PSTUTS_CELERY_VISIBILITY_TIMEOUT_S", 3600)
