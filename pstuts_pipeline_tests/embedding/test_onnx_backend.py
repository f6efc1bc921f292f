"""The ONNX Runtime backends: a real export of the bundled model and of a cross-encoder, their vectors and scores
against torch's, the model ids apart, and an export that was damaged, half made, or made from other weights refused."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.embedding import local, onnx
from pstuts_pipeline.embedding.models import ModelIntegrityError, bundled_model_path, fingerprint_folder
from pstuts_pipeline.search import reranking
from pstuts_pipeline_tests.support.helpers import SAMPLE, flip_byte

TEXTS = [p["sent"] for video in SAMPLE for p in video["transcripts"]] + [
    "How do I open Free Transform?",
    "what is the shortcut to undo",
]
# Measured on the sample phrases (and on 875 dev phrases and questions): onnx agrees with torch to 1e-6; dynamic int8
# gives a median cosine of 0.992 and a worst of 0.966.
INT8_MIN_COSINE = 0.95
INT8_MEAN_COSINE = 0.985


def test_the_backend_is_part_of_the_model_id_and_torch_keeps_todays_id():
    folder = bundled_model_path()
    ids = {b: embedding.EmbeddingSpec(backend=b).model_id for b in ("torch", "onnx", "onnx-int8")}
    assert ids["torch"] == f"local:{folder.name}:{fingerprint_folder(folder)[:16]}"
    assert ids["onnx"] == ids["torch"] + "@onnx" and ids["onnx-int8"] == ids["torch"] + "@onnx-int8"
    namespaces = {embedding.cache_namespace(embedding.EmbeddingSpec(backend=b)) for b in ids}
    assert len(namespaces) == 3


def test_the_backends_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PSTUTS_EMBEDDING_BACKEND", "onnx-int8")
    monkeypatch.setenv("PSTUTS_RERANKER_BACKEND", "onnx")
    resources = resources_from_env()
    assert resources["embeddings"].spec.backend == "onnx-int8"
    assert resources["reranker"].backend == "onnx"
    with pytest.raises(ValueError, match="PSTUTS_EMBEDDING_BACKEND is 'openvino'"):
        local._loaded(embedding.EmbeddingSpec(backend="openvino"))
    with pytest.raises(ValueError, match="bfloat16 runs on torch only"):
        local._loaded(embedding.EmbeddingSpec(backend="onnx", precision="bfloat16"))


def test_the_defaults_are_onnx_and_int8_for_the_reranker_and_bfloat16_alone_means_torch(monkeypatch):
    for name in ("PSTUTS_EMBEDDING_BACKEND", "PSTUTS_RERANKER_BACKEND", "PSTUTS_EMBEDDING_PRECISION"):
        monkeypatch.delenv(name, raising=False)
    resources = resources_from_env()
    assert (resources["embeddings"].spec.backend, resources["reranker"].backend) == ("onnx", "onnx-int8")
    assert resources["embeddings"].model_id.endswith("@onnx")
    monkeypatch.setenv("PSTUTS_EMBEDDING_PRECISION", "bfloat16")  # a precision only torch runs picks torch
    assert resources_from_env()["embeddings"].spec.backend == "torch"
    monkeypatch.setenv("PSTUTS_EMBEDDING_BACKEND", "onnx")  # unless the backend is asked for: then refused at load
    assert resources_from_env()["embeddings"].spec.backend == "onnx"


def test_importing_the_package_loads_no_onnx_runtime():
    """Startup counts: a no-op ingest or a search with the torch backend must not pay for onnxruntime's import."""
    code = (
        "import sys, pstuts_pipeline.definitions, pstuts_pipeline.defs.resources, pstuts_pipeline.search.reranking, "
        "pstuts_pipeline.embedding.onnx; print(sorted(m for m in ('onnxruntime', 'onnx', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_failed_export_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(source: Path, kind: str, file: Path) -> None:
        file.write_bytes(b"half an onnx file")
        raise RuntimeError("the exporter stopped")

    monkeypatch.setattr(onnx, "_torch_export", broken)
    with pytest.raises(RuntimeError, match="the exporter stopped"):
        onnx.exported(bundled_model_path(), "onnx", "embedder", tmp_path)
    target = onnx.export_folder(bundled_model_path(), "onnx", "embedder", tmp_path)
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == [target.name + ".lock"]


def test_an_export_made_in_an_older_format_is_made_again_and_a_damaged_one_is_not(tmp_path, monkeypatch):
    def exporter(graph: bytes):
        return lambda source, kind, file: file.write_bytes(graph)

    target = onnx.export_folder(bundled_model_path(), "onnx", "embedder", tmp_path)
    monkeypatch.setattr(onnx, "EXPORT_FORMAT", 1)
    monkeypatch.setattr(onnx, "_torch_export", exporter(b"graph of format 1"))
    onnx.exported(bundled_model_path(), "onnx", "embedder", tmp_path)
    monkeypatch.setattr(onnx, "EXPORT_FORMAT", 2)
    monkeypatch.setattr(onnx, "_torch_export", exporter(b"graph of format 2"))
    onnx.exported(bundled_model_path(), "onnx", "embedder", tmp_path)
    assert (target / "model.onnx").read_bytes() == b"graph of format 2"
    assert json.loads((target / onnx.MANIFEST).read_text())["format"] == 2
    monkeypatch.setattr(onnx, "_torch_export", exporter(b"not made again"))
    onnx.exported(bundled_model_path(), "onnx", "embedder", tmp_path)
    assert (target / "model.onnx").read_bytes() == b"graph of format 2"
    (target / onnx.MANIFEST).write_text("{not json")
    with pytest.raises(ModelIntegrityError, match="pstuts_onnx.json: unreadable"):
        onnx.exported(bundled_model_path(), "onnx", "embedder", tmp_path)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    """The bundled model exported for both ONNX backends, once for the module."""
    root = tmp_path_factory.mktemp("onnx_models")
    for backend in ("onnx", "onnx-int8"):
        onnx.exported(bundled_model_path(), backend, "embedder", root)
    return root


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return np.array(embedding.load_embeddings(embedding.EmbeddingSpec(backend="torch")).embed_documents(TEXTS))


@pytest.mark.slow
def test_onnx_vectors_match_torch(exports, torch_vectors):
    model = onnx.load_embedder(bundled_model_path(), "onnx", exports, 8)
    vectors = np.array(model.embed_documents(TEXTS))
    assert vectors.shape == torch_vectors.shape
    assert (vectors * torch_vectors).sum(axis=1).min() > 0.99
    assert np.abs(vectors - torch_vectors).max() < 1e-4
    assert np.allclose(model.embed_query(TEXTS[0]), vectors[0], atol=1e-5)


@pytest.mark.slow
def test_int8_vectors_stay_close_to_torch(exports, torch_vectors):
    model = onnx.load_embedder(bundled_model_path(), "onnx-int8", exports, 32)
    cosines = (np.array(model.embed_documents(TEXTS)) * torch_vectors).sum(axis=1)
    assert cosines.min() > INT8_MIN_COSINE and cosines.mean() > INT8_MEAN_COSINE
    manifest = json.loads(
        (onnx.export_folder(bundled_model_path(), "onnx-int8", "embedder", exports) / onnx.MANIFEST).read_text()
    )
    assert list(manifest["files"]) == ["model_qint8.onnx"]
    assert manifest["source_sha256"] == fingerprint_folder(bundled_model_path())


@pytest.mark.slow
def test_the_embeddings_seam_runs_the_onnx_backend(exports, torch_vectors, monkeypatch):
    monkeypatch.setenv("PSTUTS_ONNX_MODELS_DIR", str(exports))
    spec = embedding.EmbeddingSpec(backend="onnx")
    try:
        vectors = np.array(embedding.load_embeddings(spec).embed_documents(TEXTS))
    finally:
        local._loaded.cache_clear()
    assert np.abs(vectors - torch_vectors).max() < 1e-4


@pytest.mark.slow
def test_a_damaged_export_is_refused(exports, tmp_path):
    source = onnx.export_folder(bundled_model_path(), "onnx", "embedder", exports)
    root = tmp_path / "copy"
    damaged = onnx.export_folder(bundled_model_path(), "onnx", "embedder", root)
    shutil.copytree(source, damaged)
    onnx.verify_export(damaged, bundled_model_path())  # an intact copy passes
    flip_byte(damaged / "model.onnx", 4096)
    with pytest.raises(ModelIntegrityError, match=r"model\.onnx: sha256 .* differs from the sha256 recorded in"):
        onnx.exported(bundled_model_path(), "onnx", "embedder", root)
    (damaged / onnx.MANIFEST).unlink()
    with pytest.raises(ModelIntegrityError, match="pstuts_onnx.json: unreadable"):
        onnx.verify_export(damaged, bundled_model_path())


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory) -> Path:
    """A cross-encoder folder as `pstuts tune-reranker` writes one (MiniLM with a seeded, untrained head)."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("reranker") / "version"
    model = CrossEncoder(str(bundled_model_path()), num_labels=1, max_length=64, device="cpu", local_files_only=True)
    model.save(str(folder))
    return folder


@pytest.mark.slow
def test_the_reranker_runs_on_onnx(cross_encoder, tmp_path, monkeypatch):
    monkeypatch.setenv("PSTUTS_ONNX_MODELS_DIR", str(tmp_path))
    pairs = [(TEXTS[-1], text) for text in TEXTS[:40]] + [(TEXTS[-2], "x " * 200)]
    expected = reranking.Reranker(cross_encoder).score(pairs)
    for backend, tolerance in (("onnx", 1e-4), ("onnx-int8", None)):
        scores = reranking.Reranker(cross_encoder, backend=backend).score(pairs)
        assert scores.shape == expected.shape and scores.dtype == np.float32
        if tolerance:
            assert np.abs(scores - expected).max() < tolerance
        else:
            assert np.corrcoef(scores, expected)[0, 1] > 0.9
    assert (tmp_path / f"{cross_encoder.name}-{fingerprint_folder(cross_encoder)[:16]}" / "reranker-onnx").is_dir()
    assert reranking.Reranker(cross_encoder, backend="onnx").score([]).shape == (0,)
    with pytest.raises(ValueError, match="PSTUTS_RERANKER_BACKEND is 'tensorrt'"):
        reranking.Reranker(cross_encoder, backend="tensorrt")


@pytest.mark.parametrize(
    ("pooling", "accepted"),
    [
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, True),  # the bundled model's format
        ({"embedding_dimension": 384, "pooling_mode": "mean", "include_prompt": True}, True),  # a fine-tune's (ST 6)
        ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, False),
        ({"pooling_mode": "cls"}, False),
    ],
)
def test_the_onnx_embedder_takes_mean_pooling_in_either_format_and_refuses_others(tmp_path, pooling, accepted):
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    if accepted:
        onnx.check_mean_pooling(tmp_path)
    else:
        with pytest.raises(ValueError, match="pool by mean only, use PSTUTS_EMBEDDING_BACKEND=torch"):
            onnx.check_mean_pooling(tmp_path)
