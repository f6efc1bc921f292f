"""The embedding cache around any provider: keyed by model and text, on disk, or in this process's memory."""

from __future__ import annotations

import array
import contextlib
import functools
import hashlib
import logging
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings
from langchain_core.stores import ByteStore

if TYPE_CHECKING:
    from pstuts_pipeline.embedding import EmbeddingSpec


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


class _NoStore(ByteStore):
    """Keeps nothing: behind a MemoizedByteStore it leaves only the bounded in-memory copy."""

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        return [None] * len(keys)

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        pass

    def mdelete(self, keys: Sequence[str]) -> None:
        pass

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        yield from ()


@functools.cache
def _memory_store() -> MemoizedByteStore:
    """With the disk cache off: the newest vectors in this process only (64 MB at most), shared by its steps."""
    return MemoizedByteStore(_NoStore())


# An entry: this tag, an 8-byte BLAKE2b digest of the vector, then the vector as float64. A torn, emptied or
# altered entry fails the check and is embedded again.
ENTRY_TAG = b"pv1:"
DIGEST_BYTES = 8
log = logging.getLogger(__name__)


def _vector_to_bytes(vector: Sequence[float]) -> bytes:
    # float64 keeps every value exactly (float32 models and API floats alike) at a tenth of JSON's cost.
    data = array.array("d", vector).tobytes()
    return ENTRY_TAG + hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest() + data


def entry_problem(entry: bytes) -> str | None:
    """Why a stored entry is not a vector this cache wrote, or None when it is one."""
    header = len(ENTRY_TAG) + DIGEST_BYTES
    data = entry[header:]
    if not entry.startswith(ENTRY_TAG) or len(entry) <= header or len(data) % 8:
        return f"{len(entry)} bytes, not an entry of this cache"
    if hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest() != entry[len(ENTRY_TAG) : header]:
        return "its content does not match its checksum"
    if not all(math.isfinite(v) for v in array.array("d", data)):
        return "it holds values that are not finite"
    return None


def _vector_from_bytes(entry: bytes) -> list[float]:
    return array.array("d", entry[len(ENTRY_TAG) + DIGEST_BYTES :]).tolist()


class CheckedFileStore(ByteStore):
    """One file per entry, written atomically (a temporary file renamed into place) and checked when read.

    Written in place, a full disk left empty entries that failed every later ingest; a damaged entry is now
    dropped and embedded again, with one warning line per process naming the folder.
    """

    def __init__(self, root: Path):
        self.root = root
        self.warned = False

    def _path(self, key: str) -> Path:
        return self.root / key

    def _read(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            entry = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            self._bad(path, f"cannot be read: {error.strerror}")
            return None
        problem = entry_problem(entry)
        if problem is not None:
            self._bad(path, problem)
            return None
        return entry

    def _bad(self, path: Path, problem: str) -> None:
        with contextlib.suppress(OSError):
            path.unlink()
        if not self.warned:
            self.warned = True
            log.warning(
                "embedding cache entry %s in %s (PSTUTS_EMBEDDING_CACHE_DIR) is damaged (%s): embedding it again "
                "(further damaged entries are replaced without a word)",
                path.name,
                self.root,
                problem,
            )

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self._read(key) for key in keys]

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for key, value in key_value_pairs:
            fd, temporary = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(value)
                os.replace(temporary, self._path(key))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def mdelete(self, keys: Sequence[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._path(key).unlink()

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        for path in self.root.iterdir() if self.root.is_dir() else ():
            if not path.name.startswith(".tmp-") and path.name.startswith(prefix or ""):
                yield path.name


@functools.cache
def _cache_store(cache_dir: Path) -> MemoizedByteStore:
    return MemoizedByteStore(CheckedFileStore(cache_dir))


def _cache_key(namespace: str, text: str) -> str:
    return namespace + hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_namespace(spec: EmbeddingSpec) -> str:
    """The cache's key prefix: the model, and the value format (raw float64)."""
    # LocalFileStore admits only [A-Za-z0-9_.-/] in keys; an OpenAI model id holds ':' '@' and a URL.
    # "_f64c_": entries with a checksum; older unchecked ones ("_f64_") are left unread.
    return re.sub(r"[^A-Za-z0-9_.-]", "_", spec.model_id) + "_f64c_"


def cached(
    spec: EmbeddingSpec, load: Callable[[], Embeddings], cache_dir: Path | None
) -> tuple[Embeddings, CountingEmbeddings]:
    """The model behind a cache keyed by model and text; returns (what to embed with, the counter).

    Without a cache folder the newest vectors are kept in this process's memory: the chunker's windows,
    embedded in one batch and then asked for again video by video, and the phrases the collection step embeds
    after them in the same run, still reach the model once.
    """
    from langchain_classic.embeddings import CacheBackedEmbeddings
    from langchain_classic.storage import EncoderBackedStore

    counter = CountingEmbeddings(load)
    byte_store = _memory_store() if cache_dir is None else _cache_store(Path(cache_dir).resolve())
    store = EncoderBackedStore[str, list[float]](
        byte_store,
        functools.partial(_cache_key, cache_namespace(spec)),
        _vector_to_bytes,
        _vector_from_bytes,
    )
    return CacheBackedEmbeddings(counter, store), counter
