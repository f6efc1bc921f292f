"""Every setting, one model per concern, each default declared here once (docs/configuration.md is made from them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from pstuts_pipeline.settings.base import Settings, load, project_root, setting

Backend = Literal["torch", "onnx", "onnx-int8"]
BACKENDS: tuple[Backend, ...] = ("torch", "onnx", "onnx-int8")
# The fastest backend whose dev hit@5 and link@5 are within 0.005 of float32 torch (measured 2026-12-05).
DEFAULT_BACKEND: Backend = "onnx"
# Fewer tokens than this leave a chunk no room for words beside the model's special tokens.
MIN_CHUNK_TOKENS_CAP = 16
# Named, never read, by the Celery executor's config ({"env": ...}): Dagster resolves it where the run executes.
CELERY_BROKER_VAR = "PSTUTS_CELERY_BROKER"


def _storage(data: dict[str, Any], folder: str) -> Path:
    return Path(data["storage_dir"]) / folder


class PathSettings(Settings):
    """Where the pipeline reads and writes; every default is a folder in the project or under the storage dir."""

    storage_dir: Path = setting(
        "PSTUTS_STORAGE_DIR",
        default_factory=lambda: project_root() / ".storage",
        shown="`.storage/` in the project",
        doc="where the defaults below live",
    )
    data_dir: Path = setting(
        "PSTUTS_DATA_DIR",
        default_factory=lambda: project_root() / "data",
        shown="`data/` in the project",
        doc="folder of video files: `*.json` in PsTuts-VQA form, `*.srt` and `*.vtt` captions (each with an optional "
        "`<name>.toml` sidecar); other files are ignored",
    )
    dagster_home: Path = setting(
        "DAGSTER_HOME",
        default_factory=lambda data: _storage(data, "dagster_home"),
        shown="`$PSTUTS_STORAGE_DIR/dagster_home` (`pstuts`, `make dev`)",
        doc="Dagster instance; `pstuts` writes its `dagster.yaml` if there is none",
    )
    onnx_models_dir: Path = setting(
        "PSTUTS_ONNX_MODELS_DIR",
        default_factory=lambda data: _storage(data, "onnx_models"),
        shown="`$PSTUTS_STORAGE_DIR/onnx_models`",
        doc="where the ONNX exports of the local models are made on first use, each with the sha256 it is checked "
        "against at every load",
    )
    tuned_models_dir: Path = setting(
        "PSTUTS_TUNED_MODELS_DIR",
        default_factory=lambda data: _storage(data, "tuned_models"),
        shown="`$PSTUTS_STORAGE_DIR/tuned_models`",
        doc="where `pstuts tune` writes model versions, and where `latest` looks for them",
    )
    rerankers_dir: Path = setting(
        "PSTUTS_RERANKERS_DIR",
        default_factory=lambda data: _storage(data, "rerankers"),
        shown="`$PSTUTS_STORAGE_DIR/rerankers`",
        doc="where `pstuts tune-reranker` writes versions, and where `latest` looks",
    )
    io_path: str = setting(
        "PSTUTS_IO_PATH",
        "",
        shown="`$PSTUTS_STORAGE_DIR/io`",
        doc="intermediate asset storage, one JSON file per asset and video (a folder or an fsspec URL such as "
        "`s3://bucket/pstuts`)",
    )


class EmbeddingSettings(Settings):
    """The embedding model shared by the chunker, the collection and search."""

    provider: Literal["local", "openai"] = setting(
        "PSTUTS_EMBEDDING_PROVIDER", "local", doc="`local` (bundled all-MiniLM-L6-v2) or `openai`"
    )
    model: str = setting(
        "PSTUTS_EMBEDDING_MODEL",
        "",
        shown="bundled all-MiniLM-L6-v2 / `text-embedding-3-small`",
        doc="local: a sentence-transformers folder, or `latest` for the newest tuned version; openai: a model name",
    )
    openai_base_url: str | None = setting(
        "OPENAI_BASE_URL", shown="OpenAI's API", doc="an OpenAI-compatible embeddings server"
    )
    batch_size: int = setting("PSTUTS_EMBEDDING_BATCH_SIZE", 32, ge=1, doc="texts per forward pass or request")
    precision: Literal["float32", "bfloat16"] = setting(
        "PSTUTS_EMBEDDING_PRECISION",
        "float32",
        doc="local: `bfloat16` runs the model's matrix products under bfloat16 autocast (faster on AMX/AVX-512 CPUs; "
        "counts as another model id)",
    )
    backend: Backend = setting(
        "PSTUTS_EMBEDDING_BACKEND",
        default_factory=lambda data: DEFAULT_BACKEND if data["precision"] == "float32" else "torch",
        shown=f"`{DEFAULT_BACKEND}` (`torch` with `PSTUTS_EMBEDDING_PRECISION=bfloat16`)",
        doc="local: ONNX Runtime on an export of the model folder's weights, `onnx` (float32, torch's vectors to "
        "1e-4) or `onnx-int8` (dynamic int8), or `torch`; each is another model id "
        "([embedding-backends.md](embedding-backends.md))",
    )
    cache_dir: str | None = setting(
        "PSTUTS_EMBEDDING_CACHE_DIR",
        keeps_empty=True,
        shown="`$PSTUTS_STORAGE_DIR/embedding_cache`",
        doc="embedding cache keyed by model and text (empty: no disk cache; each process then keeps its newest 64 MB "
        "of vectors in memory, so a run still embeds each text once)",
    )
    openai_api_key: str | None = setting(
        "OPENAI_API_KEY",
        secret=True,
        doc="key for the `openai` provider (read from the environment only; the embeddings resource gets it as "
        "`dg.EnvVar`, so the UI shows where it comes from, never its value)",
    )

    def cache_path(self) -> Path | None:
        """The disk cache's folder, or None when it is off (set to empty)."""
        if self.cache_dir == "":
            return None
        return Path(self.cache_dir) if self.cache_dir else load(PathSettings).storage_dir / "embedding_cache"


class ChunkingSettings(Settings):
    """How Kamradt chunks are cut and bounded, and the context each chunk carries."""

    breakpoint_threshold_type: Literal["percentile", "standard_deviation", "interquartile", "gradient"] = setting(
        "PSTUTS_BREAKPOINT_THRESHOLD_TYPE", "percentile", doc="SemanticChunker's breakpoint rule"
    )
    breakpoint_threshold_amount: float | None = setting(
        "PSTUTS_BREAKPOINT_THRESHOLD_AMOUNT", shown="LangChain's for the rule", doc="its amount"
    )
    # 0: the chunker embeds bare phrases, the very texts the phrase vectors need, so they cost nothing twice;
    # on train + dev that ingests 1.5x faster than Kamradt's 1 and retrieves as well (docs/benchmarks.md).
    buffer_size: int = setting(
        "PSTUTS_CHUNKER_BUFFER_SIZE",
        0,
        ge=0,
        doc="phrases on each side embedded with a phrase to find breakpoints (Kamradt's notebook: 1)",
    )
    max_chunk_tokens: int = setting(
        "PSTUTS_MAX_CHUNK_TOKENS",
        0,
        shown="the model's window",
        doc=f"cap on a chunk's tokens, special tokens included (`0`: the window; otherwise at least "
        f"{MIN_CHUNK_TOKENS_CAP})",
    )
    min_chunk_tokens: int = setting(
        "PSTUTS_MIN_CHUNK_TOKENS", 8, ge=0, doc="a smaller chunk joins a neighbour if it fits"
    )
    context: Literal["", "title", "neighbours", "title+neighbours"] = setting(
        "PSTUTS_CHUNK_CONTEXT",
        "",
        shown="(none)",
        doc="ingest: a situating context per chunk, `title` (title and description reduced to content words), "
        "`neighbours` (the neighbouring chunks' key words) or `title+neighbours`; part of the fingerprint when set, so "
        "changing it re-ingests",
    )
    context_use: Literal["bm25", "dense", "both"] = setting(
        "PSTUTS_CHUNK_CONTEXT_USE",
        "bm25",
        doc="ingest: where that context goes: `bm25` (the BM25 terms), `dense` (the whole-chunk vector) or `both`",
    )

    @field_validator("max_chunk_tokens")
    @classmethod
    def _room_for_words(cls, cap: int) -> int:
        if cap != 0 and cap < MIN_CHUNK_TOKENS_CAP:
            raise ValueError(
                f"it must be 0 (the model's window) or at least {MIN_CHUNK_TOKENS_CAP}, room for a few words beside "
                "the model's special tokens"
            )
        return cap


class StoreSettings(Settings):
    """The Qdrant collection: a local folder (Qdrant Edge, in-process) or a Qdrant server."""

    path: str = setting(
        "PSTUTS_QDRANT_PATH",
        "",
        shown="`$PSTUTS_STORAGE_DIR/qdrant`",
        doc="the local store (Qdrant Edge): one shard per collection, `<collection>/`, with `<collection>.json` and "
        "`<collection>.lock` beside it",
    )
    url: str | None = setting("QDRANT_URL", doc="a Qdrant server (the local folder is then not used)")
    api_key: str | None = setting("QDRANT_API_KEY", secret=True, doc="its API key")
    collection: str = setting("PSTUTS_COLLECTION", "pstuts_transcripts", min_length=1, doc="collection name")
    timeout_s: int = setting("PSTUTS_QDRANT_TIMEOUT_S", 60, ge=1, doc="seconds a request to the server may take")
    lock_timeout_s: float = setting(
        "PSTUTS_QDRANT_LOCK_TIMEOUT_S",
        1800,
        ge=0,
        doc="seconds a writer waits for another process that holds the local store",
    )

    def folder(self) -> Path:
        """The local store's folder (unused when a server URL is set)."""
        return Path(self.path) if self.path else load(PathSettings).storage_dir / "qdrant"


class RerankerSettings(Settings):
    """The cross-encoder that rescores search's best candidates; search runs without it when none is set."""

    model: str = setting(
        "PSTUTS_RERANKER",
        "",
        shown="(none)",
        doc="a reranker folder written by `pstuts tune-reranker`, or `latest` for the newest one; unset: search "
        "without a reranker",
    )
    depth: int = setting(
        "PSTUTS_RERANK_DEPTH",
        10,
        ge=1,
        doc="first-stage candidates (chunks) the reranker rescores per question (at least `--top-k`)",
    )
    phrases: int = setting(
        "PSTUTS_RERANK_PHRASES", 1, ge=1, doc="phrases of each candidate it reads (the best by the link score)"
    )
    weight: float = setting(
        "PSTUTS_RERANK_WEIGHT", 1.0, ge=0, allow_inf_nan=False, doc="weight of its standardised score in the sum"
    )
    # The same rule as the embedder's, measured with a trained reranker on all dev questions, each question's pairs
    # scored on their own, one phrase per candidate: int8 hit@5 +0.000, link@5 -0.002 (2026-12-06).
    backend: Backend = setting(
        "PSTUTS_RERANKER_BACKEND",
        "onnx-int8",
        doc="how the reranker runs: `onnx-int8`, `onnx` or `torch` (as `PSTUTS_EMBEDDING_BACKEND`; with one phrase "
        "per candidate int8 ranks dev within 0.002 of torch in 30% of its time, onnx exactly as torch, "
        "[embedding-backends.md](embedding-backends.md))",
    )


class SearchSettings(Settings):
    """First-stage knobs beyond the fixed fusion, and when an answer says it does not know."""

    # Chosen on train by benchmarks/abstention.py as the threshold that best separates questions of absent videos
    # from those of present ones (balanced accuracy); see docs/benchmarks.md.
    min_confidence: float = setting(
        "PSTUTS_MIN_CONFIDENCE",
        0.14,
        ge=0,
        le=1,
        doc="search, ask, the page: a first result whose confidence (0-1, the calibrated probability that it holds "
        'the answer) is under this is "no good match": the results are shown as weak and nothing is answered (`0`: '
        "always answer); chosen on PsTuts-VQA train ([benchmarks.md](benchmarks.md#knowing-when-it-does-not-know))",
    )
    # Measured on dev (docs/retrieval-experiments.md): off unless they gain.
    chunk_vector_weight: float = setting(
        "PSTUTS_CHUNK_VECTOR_WEIGHT",
        0.0,
        ge=0,
        allow_inf_nan=False,
        shown="`0` (off)",
        doc="search: weight of the whole-chunk dense vector's ranking beside the best-phrase and BM25 rankings",
    )
    temporal_weight: float = setting(
        "PSTUTS_TEMPORAL_WEIGHT",
        0.0,
        ge=0,
        allow_inf_nan=False,
        shown="`0` (off)",
        doc="search: how much a chunk's same-video neighbours' fused scores add to its own, each weighted by a "
        "Gaussian over the time between the chunks' midpoints ([retrieval-experiments.md](retrieval-experiments.md))",
    )
    temporal_sigma_s: float = setting(
        "PSTUTS_TEMPORAL_SIGMA_S", 30.0, gt=0, allow_inf_nan=False, doc="search: the Gaussian's width in seconds"
    )
    temporal_relink: bool = setting(
        "PSTUTS_TEMPORAL_RELINK",
        False,
        shown="off",
        doc="`1`: search may move a result's link to a near neighbour's phrase when that phrase, discounted by the "
        "Gaussian, matches the question better",
    )


class ChatSettings(Settings):
    """The chat model that words answers; separate from the embeddings' server. No model: extractive answers."""

    model: str = setting(
        "PSTUTS_CHAT_MODEL",
        "",
        shown="(none)",
        doc="chat model that words `pstuts ask`'s answers (e.g. `gpt-4o-mini`, or `smollm2-135m-instruct` from "
        "`scripts/chat_server.sh`); unset: offline extractive answers",
    )
    base_url: str | None = setting(
        ("PSTUTS_CHAT_BASE_URL", "OPENAI_BASE_URL"),
        shown="`OPENAI_BASE_URL`, else OpenAI's API",
        doc="the chat model's OpenAI-compatible server (separate from the embeddings': embed locally, chat remotely, "
        "or the reverse)",
    )
    api_key: str | None = setting(
        ("PSTUTS_CHAT_API_KEY", "OPENAI_API_KEY"),
        secret=True,
        shown="`OPENAI_API_KEY`",
        doc="the chat server's key (read from the environment only, never printed; local servers need none)",
    )
    timeout_s: float = setting(
        "PSTUTS_CHAT_TIMEOUT_S", 60.0, gt=0, doc="seconds to wait for one answer before the extractive fallback"
    )
    max_tokens: int = setting("PSTUTS_CHAT_MAX_TOKENS", 120, ge=1, doc="longest answer, in tokens")
    json_schema: bool = setting(
        "PSTUTS_CHAT_JSON_SCHEMA",
        True,
        shown="`1`",
        doc="`0`: ask for plain text instead of a JSON schema (servers without structured output are detected anyway)",
    )


class SourceSettings(Settings):
    """How source files are read and bounded, and how many videos one run and one removal may take."""

    max_file_bytes: int = setting(
        "PSTUTS_MAX_FILE_BYTES",
        64 << 20,
        ge=1,
        shown="`67108864` (64 MB)",
        doc="largest source file read; a bigger one, like a FIFO, device or socket named like a source, is refused "
        "unread, naming the file",
    )
    read_timeout_s: float = setting(
        "PSTUTS_READ_TIMEOUT_S",
        60.0,
        gt=0,
        allow_inf_nan=False,
        doc="seconds reading one source file may take before it is refused (a stalled mount holds back no other file)",
    )
    settle_s: float = setting(
        "PSTUTS_SETTLE_S",
        1.0,
        ge=0,
        le=3600,
        doc="seconds a source file must be left unwritten before it is read: the sensor leaves a file still being "
        "copied for its next tick (its videos held back meanwhile), `pstuts ingest` waits for it (up to 30 s); `0` "
        "reads at once",
    )
    allow_links_outside: bool = setting(
        "PSTUTS_ALLOW_LINKS_OUTSIDE",
        False,
        shown="off",
        doc="`1` reads source files that are symbolic links out of the data folder; otherwise such a file is refused "
        "unread (its videos held back), so a link to `/etc/shadow` is never read or quoted",
    )
    max_removal_share: float = setting(
        "PSTUTS_MAX_REMOVAL_SHARE",
        0.5,
        ge=0,
        le=1,
        doc="most of the stored videos one ingest, sensor tick or schedule may remove because their files are gone; "
        "removing more, or all of them (an emptied or unmounted folder), is refused with one line listing them",
    )
    allow_mass_removal: bool = setting(
        "PSTUTS_ALLOW_MASS_REMOVAL",
        False,
        shown="off",
        doc="`1` makes such removals anyway (what `pstuts ingest --allow-mass-removal` does for one run)",
    )
    max_phrases_per_video: int = setting(
        "PSTUTS_MAX_PHRASES_PER_VIDEO",
        100_000,
        ge=1,
        doc="most phrases, caption cues or QA pairs one video may hold; more is a record error naming the variable",
    )
    max_phrase_chars: int = setting(
        "PSTUTS_MAX_PHRASE_CHARS", 1_000_000, ge=1, doc="longest phrase, cue, question or answer, in characters"
    )
    max_field_chars: int = setting(
        "PSTUTS_MAX_FIELD_CHARS",
        4096,
        ge=1,
        doc="longest title, description or url, in characters (every phrase, chunk and point carries them)",
    )
    # A run holds its videos' texts and vectors in memory at once; bigger runs share more per-run overhead,
    # smaller ones bound the memory. At 100, train+dev (65 videos) is one run.
    max_videos_per_run: int = setting(
        "PSTUTS_MAX_VIDEOS_PER_RUN",
        100,
        ge=1,
        doc="the CLI, the sensor, the schedules and a backfill from the UI put at most this many videos in one run "
        "(bounds memory)",
    )
    max_phrases_per_run: int = setting(
        "PSTUTS_MAX_PHRASES_PER_RUN",
        50_000,
        ge=1,
        doc="and at most this many phrases; a video with more runs alone (an ingest's peak memory is set by its "
        "largest video: [benchmarks.md](benchmarks.md#hostile-input))",
    )
    min_runs_per_ingest: int = setting(
        "PSTUTS_MIN_RUNS_PER_INGEST",
        1,
        ge=1,
        doc="the CLI, the sensor and the schedules split an ingest of more videos into at least this many runs, of about equal work "
        "(their transcripts' characters), so that many Celery workers each take one and end together; set it to the "
        "number of workers (a backfill from the UI is split by count alone) ([operations-distributed.md](operations-distributed.md#how-an-ingest-spreads))",
    )


class OperationsSettings(Settings):
    """How the code location runs: the sensor, the schedules and where steps execute."""

    sensor_interval_s: int = setting(
        "PSTUTS_SENSOR_INTERVAL_S",
        15,
        ge=1,
        doc="seconds between two looks of `transcript_folder_sensor` at the data folder (read when the code location "
        "loads)",
    )
    reingest_cron: str = setting(
        "PSTUTS_REINGEST_CRON", "0 3 * * *", doc="when `nightly_reingest` and `nightly_removal` run"
    )
    reingest_timezone: str = setting("PSTUTS_REINGEST_TIMEZONE", "UTC", doc="the schedule's timezone")
    reingest_all: bool = setting(
        "PSTUTS_REINGEST_ALL",
        False,
        shown="off",
        doc="`1`: the schedule re-ingests every video (e.g. after a model change)",
    )
    executor: Literal["in_process", "celery"] = setting(
        "PSTUTS_EXECUTOR",
        "in_process",
        doc="where a run's steps execute: `in_process` (one process per run) or `celery` (each step on a "
        "`dagster-celery` worker; the `celery` extra; [operations-distributed.md](operations-distributed.md))",
    )
    celery_visibility_timeout_s: int = setting(
        "PSTUTS_CELERY_VISIBILITY_TIMEOUT_S",
        3600,
        ge=1,
        doc="Redis broker: seconds before a step whose worker was lost whole is handed to another worker; longer "
        "than the longest step. Read by the executor and by every worker's app (`-A pstuts_pipeline.defs.celery_app`)",
    )


# In the order of docs/configuration.md.
CONCERNS: tuple[type[Settings], ...] = (
    PathSettings,
    EmbeddingSettings,
    ChunkingSettings,
    StoreSettings,
    SourceSettings,
    RerankerSettings,
    SearchSettings,
    ChatSettings,
    OperationsSettings,
)
