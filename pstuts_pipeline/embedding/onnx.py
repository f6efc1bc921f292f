"""ONNX Runtime for the local models: an export of a verified folder, made once, checked by sha256 at every load.

sentence-transformers' own `backend="onnx"` needs `optimum.onnxruntime` (the optimum-onnx package), whose releases
require transformers < 4.58 and fail to import with the transformers 5 this project runs; so the export is
`torch.onnx.export` of the same transformers model, int8 is onnxruntime's dynamic quantisation (per channel, reduced
range: the settings of sentence-transformers' "avx2" preset, exact on any x86 CPU), and inference is onnxruntime with
the model's own tokenizer, mean pooling and normalisation as sentence-transformers does them (vectors within 1e-6).

An export goes to `<onnx models dir>/<folder>-<weights sha256[:16]>/<kind>-<backend>/` through a hidden temporary
folder renamed when complete; its `pstuts_onnx.json` records the sha256 of the source weights and of the ONNX file,
and a load refuses a file whose sha256 differs. onnxruntime and torch are imported only when a model is loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from pstuts_pipeline.embedding import models
from pstuts_pipeline.embedding.checksums import sha256_file
from pstuts_pipeline.settings import BACKENDS

MANIFEST = "pstuts_onnx.json"
# How exports are made; an export recorded with another format is made again. 2: eager attention (was SDPA).
EXPORT_FORMAT = 2
FILE_NAMES = {"onnx": "model.onnx", "onnx-int8": "model_qint8.onnx"}
KINDS = {"embedder": "last_hidden_state", "reranker": "logits"}
# Files of the source folder the runtime needs beside the ONNX file.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "sentence_bert_config.json", "config.json")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def check_backend(backend: str, variable: str) -> None:
    """A clear error for a backend name we do not know."""
    if backend not in BACKENDS:
        raise ValueError(f"{variable} is {backend!r}; expected one of {', '.join(BACKENDS)}")


def export_folder(source: Path, backend: str, kind: str, root: Path) -> Path:
    """Where the export of `source` for `backend` lives (named by the source's weights, so a new model exports anew)."""
    return Path(root) / f"{source.name}-{models.fingerprint_folder(source)[:16]}" / f"{kind}-{backend}"


def exported(source: Path, backend: str, kind: str, root: Path) -> Path:
    """The verified ONNX export of a verified model folder, made on first use (one process exports, others wait)."""
    from filelock import FileLock

    models.verify_model_folder(source)  # the weights the export is made from are the trusted ones
    target = export_folder(source, backend, kind, root)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.exists() and _made_in_older_format(target):
            shutil.rmtree(target)  # made by an older version of this code: same weights, a slower graph
        if not target.exists():
            _export(source, backend, kind, target)
    verify_export(target, source)
    return target


def _made_in_older_format(folder: Path) -> bool:
    """Whether a readable export records another format (or none: made before formats were recorded).

    An unreadable manifest is not taken for an old format: `verify_export` refuses it, as it refuses any damage.
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") != EXPORT_FORMAT


def verify_export(folder: Path, source: Path) -> None:
    """Refuse an export whose manifest is missing or whose files differ from the sha256 it recorded."""
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        files, source_sha = dict(manifest["files"]), manifest["source_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise models.ModelIntegrityError(
            f"{manifest_path}: unreadable ({error}); delete {folder} to export it again"
        ) from None
    if source_sha != models.fingerprint_folder(source):
        raise models.ModelIntegrityError(
            f"{folder}: exported from weights with sha256 {source_sha}, not those of {source}; delete it to export again"
        )
    models._verify(folder, files, f"the sha256 recorded in {manifest_path}", f"Delete {folder} to export it again.")


def _export(source: Path, backend: str, kind: str, target: Path) -> None:
    """Export into a hidden temporary folder beside the target, then rename it: a crash leaves no half export."""
    started = time.perf_counter()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        float_file = staging / FILE_NAMES["onnx"]
        _torch_export(source, kind, float_file)
        if backend == "onnx-int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(
                float_file,
                staging / FILE_NAMES[backend],
                weight_type=QuantType.QInt8,
                per_channel=True,
                reduce_range=True,
            )
            float_file.unlink()
        for name in TOKENIZER_FILES:
            if (source / name).exists():
                shutil.copy2(source / name, staging / name)
        manifest = {
            "source": str(source),
            "source_sha256": models.fingerprint_folder(source),
            "kind": kind,
            "backend": backend,
            "format": EXPORT_FORMAT,
            "files": {FILE_NAMES[backend]: sha256_file(staging / FILE_NAMES[backend])},
            "versions": _library_versions(),
            "seconds": round(time.perf_counter() - started, 1),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2))
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the export from other users of a shared storage dir
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _torch_export(source: Path, kind: str, file: Path) -> None:
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification

    loader = AutoModel if kind == "embedder" else AutoModelForSequenceClassification
    # Eager attention traces to plain MatMul/Softmax ops, which onnxruntime runs about 30% faster on 256-token chunks
    # than the traced scaled_dot_product_attention (same vectors within 1e-6; docs/embedding-backends.md).
    model = loader.from_pretrained(str(source), local_files_only=True, attn_implementation="eager").eval()
    output = KINDS[kind]

    class Forward(torch.nn.Module):
        """Named inputs, one named output: transformers 5's forward takes more positional arguments than these."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN202 - traced by torch
            outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return getattr(outputs, output)

    example = torch.ones(2, 8, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS} | {output: {0: "batch"}}
    with torch.inference_mode(), warnings.catch_warnings():
        # The tracer warns of branches on shapes it fixes as constants (padding length, causal mask): both hold for
        # any input here, and the tests compare the exported model with torch on texts of many lengths.
        warnings.simplefilter("ignore")
        # The TorchScript exporter: the dynamo one needs onnxscript, and this graph needs nothing it adds.
        torch.onnx.export(
            Forward(),
            (example, example, torch.zeros_like(example)),
            str(file),
            input_names=list(INPUTS),
            output_names=[output],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _library_versions() -> dict[str, str]:
    import onnxruntime
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def _window(folder: Path) -> int:
    """The model's input window: sentence-transformers' max_seq_length, else the tokenizer's model_max_length."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        path = folder / name
        if path.exists() and isinstance(value := json.loads(path.read_text()).get(key), int) and value < 100_000:
            return value
    return 512


class OnnxModel:
    """One exported model in an onnxruntime session, with its tokenizer cutting and padding as the model was trained."""

    def __init__(self, folder: Path, backend: str, threads: int = 0):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        # As many threads as this process may use, like torch (onnxruntime's own default counts physical cores).
        options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
        # No busy-waiting between calls: on a shared CPU the spinning threads take time from everyone else.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(folder / FILE_NAMES[backend]), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=_window(folder))
        self.tokenizer.no_padding()
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0

    def run(self, texts: Sequence[str | tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """(the model's output, the attention mask) for a batch of texts or (question, passage) pairs."""
        encoded = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encoded)
        arrays = {name: np.zeros((len(encoded), width), dtype=np.int64) for name in INPUTS}
        arrays["input_ids"][:] = self.pad_id
        for row, e in enumerate(encoded):
            arrays["input_ids"][row, : len(e.ids)] = e.ids
            arrays["attention_mask"][row, : len(e.ids)] = e.attention_mask
            arrays["token_type_ids"][row, : len(e.ids)] = e.type_ids
        return self.session.run(None, arrays)[0], arrays["attention_mask"]


class OnnxEmbeddings(Embeddings):
    """A sentence-transformers embedder (mean pooling, normalised) run by onnxruntime."""

    def __init__(self, folder: Path, backend: str, batch_size: int = 32):
        self.model = OnnxModel(folder, backend)
        self.batch_size = max(1, batch_size)

    def _batch(self, texts: list[str]) -> list[list[float]]:
        hidden, mask = self.model.run(texts)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [
            v
            for start in range(0, len(texts), self.batch_size)
            for v in self._batch(texts[start : start + self.batch_size])
        ]

    def embed_query(self, text: str) -> list[float]:
        return self._batch([text])[0]


def check_mean_pooling(source: Path) -> None:
    """The ONNX embedder pools by mean as the bundled model and its fine-tunes do; refuse another pooling."""
    config = source / "1_Pooling" / "config.json"
    if config.exists():
        pooling: dict[str, Any] = json.loads(config.read_text())
        # A flag per mode (the bundled model's format) or one named mode (what sentence-transformers 6 saves).
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True]
        if isinstance(pooling.get("pooling_mode"), str):
            modes.append(f"pooling_mode_{pooling['pooling_mode']}")
        if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_mean"]):
            raise ValueError(
                f"{config}: pooling {modes}; the ONNX backends pool by mean only, use PSTUTS_EMBEDDING_BACKEND=torch"
            )


def load_embedder(source: Path, backend: str, root: Path, batch_size: int) -> OnnxEmbeddings:
    """The local embedder of `source` on ONNX Runtime (exported on first use)."""
    check_mean_pooling(source)
    return OnnxEmbeddings(exported(source, backend, "embedder", root), backend, batch_size)


def load_reranker(source: Path, backend: str, root: Path) -> OnnxModel:
    """A cross-encoder folder on ONNX Runtime (exported on first use); `run` gives its logits."""
    return OnnxModel(exported(source, backend, "reranker", root), backend)
