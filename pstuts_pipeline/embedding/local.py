"""The local provider: a sentence-transformers folder (default: the bundled all-MiniLM-L6-v2), verified, on CPU."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from pstuts_pipeline.embedding import models, onnx
from pstuts_pipeline.settings import offline_model_hub, paths

if TYPE_CHECKING:
    from pstuts_pipeline.embedding import EmbeddingSpec, TokenCounter

PRECISIONS = ("float32", "bfloat16")
DEFAULT_WINDOW_TOKENS = 256


class LocalProvider:
    """sentence-transformers on CPU, loaded once per process, its batches sorted by token count."""

    name = "local"

    def model_name(self, spec: EmbeddingSpec) -> str:
        return str(Path(spec.model).resolve()) if spec.model else str(models.bundled_model_path())

    def model_id(self, spec: EmbeddingSpec) -> str:
        folder = Path(self.model_name(spec))
        model_id = f"local:{folder.name}:{models.fingerprint_folder(folder)[:16]}"
        model_id = model_id if spec.precision == "float32" else f"{model_id}@{spec.precision}"
        return model_id if spec.backend == "torch" else f"{model_id}@{spec.backend}"

    def load(self, spec: EmbeddingSpec, api_key: str | None = None) -> Embeddings:
        with _load_lock:  # a preload in another thread and the first use wait for one load, not two
            return _loaded(spec)

    def preload(self, spec: EmbeddingSpec) -> None:
        """Start loading the model in a background thread, so the load overlaps the run's first steps.

        Loading takes seconds (torch, transformers, the weights and their checksum) while the run's start and
        its first three steps need no model; errors surface where the model is first used, as without a preload.
        """
        if _loaded.cache_info().currsize:
            return

        def load_quietly() -> None:
            with contextlib.suppress(Exception):
                self.load(spec)

        # Not a daemon: the interpreter waits for it at exit. A daemon thread stopped inside torch or onnxruntime
        # (an ingest whose texts all came from the cache can end before the load does) aborts the process.
        threading.Thread(target=load_quietly, name="pstuts-model-preload", daemon=False).start()

    def token_counter(self, spec: EmbeddingSpec) -> TokenCounter:
        tokenizer = _tokenizer(spec)
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)

    def window(self, spec: EmbeddingSpec) -> tuple[int, int]:
        config = Path(spec.model_name) / "sentence_bert_config.json"
        window = (
            json.loads(config.read_text()).get("max_seq_length", DEFAULT_WINDOW_TOKENS)
            if config.exists()
            else DEFAULT_WINDOW_TOKENS
        )
        return int(window), 2


@functools.cache
def _loaded(spec: EmbeddingSpec) -> Embeddings:
    if spec.precision not in PRECISIONS:
        raise ValueError(f"PSTUTS_EMBEDDING_PRECISION is {spec.precision!r}; expected one of {', '.join(PRECISIONS)}")
    onnx.check_backend(spec.backend, "PSTUTS_EMBEDDING_BACKEND")
    if spec.backend != "torch" and spec.precision != "float32":
        raise ValueError(
            f"PSTUTS_EMBEDDING_PRECISION={spec.precision} runs on torch only, not PSTUTS_EMBEDDING_BACKEND={spec.backend}"
        )
    offline_model_hub()
    folder = Path(spec.model_name)
    if not (folder / "modules.json").exists() and not (folder / "config.json").exists():
        raise FileNotFoundError(f"{folder}: not a sentence-transformers model folder (PSTUTS_EMBEDDING_MODEL)")
    # Whatever folder is named (the bundled one by its own path too), before any weights are read.
    models.verify_model_folder(folder)
    if spec.backend != "torch":
        inner = onnx.load_embedder(folder, spec.backend, paths().onnx_models_dir, spec.batch_size)
        return LengthSortedBatches(inner, token_lengths_of(spec), spec.batch_size)
    from langchain_huggingface import HuggingFaceEmbeddings

    model = HuggingFaceEmbeddings(
        model_name=str(folder),
        model_kwargs={"device": "cpu", "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True, "batch_size": spec.batch_size},
    )
    return LengthSortedBatches(model, token_lengths_of(spec), spec.batch_size, spec.precision)


def model_loads() -> int:
    """How many times this process has loaded a local model (a Celery worker serving many steps: once per model)."""
    return _loaded.cache_info().misses


_load_lock = threading.Lock()


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
        if self.precision == "bfloat16":
            import torch  # only here: the ONNX backends run without it

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
def _tokenizer(spec: EmbeddingSpec):  # -> tokenizers.Tokenizer, imported lazily
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(spec.model_name) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def token_lengths_of(spec: EmbeddingSpec) -> Callable[[list[str]], list[int]]:
    """Token counts of many texts at once, by the local model's tokenizer (to order its batches)."""
    tokenizer = _tokenizer(spec)
    return lambda texts: [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
