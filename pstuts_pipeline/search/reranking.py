"""Query time: a trained cross-encoder rescoring the first stage's best candidates (PSTUTS_RERANKER).

It reads the question with each candidate chunk's most promising phrases (by the link score), so a chunk is
scored by its best phrase, as the first stage scores it; its score is standardised over the candidates and added
to the first stage's fused score with a weight. Depth, phrases per chunk and weight were chosen on dev
(benchmarks/rerank_benchmark.py) for quality within the single-question latency goal.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pstuts_pipeline.embedding import onnx
from pstuts_pipeline.settings import RerankerSettings, offline_model_hub, paths
from pstuts_pipeline.settings.base import default

# Measured on dev, see docs/benchmarks.md, "Reranker". One phrase per candidate ranked all dev questions as well as
# two (hit@5 +0.0004, link@5 -0.0008, video@5 +0.010) in 60% of the time (2026-12-06, embedding-backends.md).
DEPTH: int = default(RerankerSettings, "depth")
PHRASES_PER_CHUNK: int = default(RerankerSettings, "phrases")
WEIGHT: float = default(RerankerSettings, "weight")
# Pairs per ONNX Runtime call, shortest together: a batch is padded to its longest pair, and 8 wasted the least
# (one question's 20 pairs: 56 ms in batches of 8, 64 ms in one batch, 2026-12-05).
ONNX_BATCH = 8


@dataclass(frozen=True)
class RerankSettings:
    """How many first-stage candidates are rescored, with how many phrases each, and how much the score counts."""

    depth: int = DEPTH
    phrases: int = PHRASES_PER_CHUNK
    weight: float = WEIGHT
    relink: bool = False  # the link goes to the cross-encoder's best phrase instead of the link score's


class Reranker:
    """A trained cross-encoder folder, loaded once per process, and how search uses it."""

    def __init__(self, folder: Path, settings: RerankSettings = RerankSettings(), backend: str = "torch"):
        offline_model_hub()
        onnx.check_backend(backend, "PSTUTS_RERANKER_BACKEND")
        if not (Path(folder) / "config.json").exists():
            raise FileNotFoundError(
                f"{folder}: not a reranker folder (PSTUTS_RERANKER); train one with `pstuts tune-reranker`"
            )
        self.folder = Path(folder)
        self.settings = settings
        self.backend = backend
        if backend != "torch":  # ONNX Runtime on a verified export; torch is not imported
            self.onnx = onnx.load_reranker(self.folder, backend, paths().onnx_models_dir)
            return
        from sentence_transformers.cross_encoder import CrossEncoder

        self.model = CrossEncoder(str(folder), device="cpu", local_files_only=True)

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The cross-encoder's logit for each (question, phrase) pair, shortest pairs batched together."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        if self.backend != "torch":
            order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
            scores = np.zeros(len(pairs), dtype=np.float32)
            for start in range(0, len(order), ONNX_BATCH):
                batch = order[start : start + ONNX_BATCH]
                scores[batch] = self.onnx.run([pairs[i] for i in batch])[0].reshape(-1)
            return scores
        import torch

        # float32: bfloat16 autocast took 1.6x as long here (AVX512-BF16 without AMX).
        with torch.inference_mode():
            scores = self.model.predict(
                list(pairs), batch_size=64, show_progress_bar=False, activation_fn=torch.nn.Identity()
            )
        return np.asarray(scores, dtype=np.float32).reshape(-1)


@functools.cache
def load_reranker(folder: str, settings: RerankSettings = RerankSettings(), backend: str = "torch") -> Reranker:
    """The reranker of a folder, loaded once per process."""
    return Reranker(Path(folder), settings, backend)


def standardised(scores: np.ndarray) -> np.ndarray:
    """Zero mean and unit spread over the candidates, so the cross-encoder's scale does not set its weight."""
    spread = scores.std()
    return (scores - scores.mean()) / (spread if spread > 0 else 1.0)


def top_phrases(link_scores: np.ndarray, count: int) -> list[int]:
    """Positions of a chunk's `count` best phrases by the link score, best first."""
    return [int(i) for i in np.argsort(-link_scores, kind="stable")[:count]]
