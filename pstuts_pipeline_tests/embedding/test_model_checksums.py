"""Every model folder with a known sha256 is checked before use: the bundled one however it is named, copies of
it, and tuned versions by the sha256 their card records; a mismatch is refused with the file named."""

import json
import re
import shutil
from pathlib import Path

import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline.embedding import EmbeddingSpec, ModelIntegrityError, bundled_model_path, verify_model_folder
from pstuts_pipeline.embedding.checksums import sha256_file
from pstuts_pipeline.embedding.versions import CARD_FILE
from pstuts_pipeline.training import skeleton
from pstuts_pipeline_tests.support.helpers import flip_byte


@pytest.fixture
def model_copy(tmp_path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(bundled_model_path(), copy)
    return copy


def refusal(spec: EmbeddingSpec) -> str:
    """The one-line error loading a spec gives (before any weights are read)."""
    with pytest.raises(ModelIntegrityError) as refused:
        embedding.load_embeddings(spec)
    return str(refused.value)


def test_naming_the_bundled_folder_by_its_own_path_is_checked_too(model_copy, monkeypatch):
    monkeypatch.setattr(embedding.models, "bundled_model_path", lambda: model_copy)  # the tampered install
    flip_byte(model_copy / "model.safetensors", 4096)
    message = refusal(EmbeddingSpec(model=str(model_copy), batch_size=3))
    assert message.startswith(f"{model_copy / 'model.safetensors'}: sha256 ")
    assert "the official all-MiniLM-L6-v2 release" in message and "refusing to use it" in message


def test_a_copy_of_the_bundled_model_elsewhere_is_recognised_and_checked(model_copy):
    verify_model_folder(model_copy)  # an exact copy passes
    flip_byte(model_copy / "model.safetensors", 8192)
    message = refusal(EmbeddingSpec(model=str(model_copy), batch_size=4))
    assert re.match(
        rf"{re.escape(str(model_copy / 'model.safetensors'))}: sha256 [0-9a-f]{{64}} differs from the "
        r"official all-MiniLM-L6-v2 release \(53aa5117",
        message,
    )


def tune_like(folder: Path) -> None:
    """Make a copy look like a tuned version: its own config.json, and a card recording its weights' sha256."""
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "transformers_version": "5.24.0"}))
    card = {"name": "minilm-pstuts-test", "model_sha256": sha256_file(folder / "model.safetensors")}
    (folder / CARD_FILE).write_text(json.dumps(card))


def test_a_tuned_version_is_checked_against_its_card(model_copy):
    tune_like(model_copy)
    verify_model_folder(model_copy)
    flip_byte(model_copy / "model.safetensors", 12288)
    message = refusal(EmbeddingSpec(model=str(model_copy), batch_size=5))
    assert message.startswith(f"{model_copy / 'model.safetensors'}: sha256 ")
    assert f"differs from the sha256 recorded in {model_copy / CARD_FILE}" in message


def test_a_card_without_a_checksum_is_refused(model_copy):
    tune_like(model_copy)
    (model_copy / CARD_FILE).write_text(json.dumps({"name": "minilm-pstuts-test"}))
    assert refusal(EmbeddingSpec(model=str(model_copy), batch_size=6)) == (
        f"{model_copy / CARD_FILE}: holds no model_sha256; refusing a tuned model whose weights cannot be checked"
    )


def test_a_folder_with_no_known_checksum_is_used_as_given(model_copy):
    tune_like(model_copy)
    (model_copy / CARD_FILE).unlink()
    flip_byte(model_copy / "model.safetensors", 16384)
    verify_model_folder(model_copy)  # nothing to check it against: the user's own model
    assert embedding.known_checksums(model_copy) == ({}, "")


def test_training_log_keeps_small_learning_rates_readable() -> None:
    shown = skeleton.shown_metrics({"loss": 0.123456, "learning_rate": 3.2e-05, "epoch": 1})
    assert shown == {"loss": 0.1235, "learning_rate": 3.2e-05, "epoch": 1}
