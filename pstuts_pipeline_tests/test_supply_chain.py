"""Supply chain: the repackaged model is checked against the official release; installs use the pinned constraints."""

import re
import shutil
from importlib import metadata
from pathlib import Path

import pytest

from pstuts_pipeline import embedding
from pstuts_pipeline.embedding import EmbeddingSpec, ModelIntegrityError, bundled_model_path, verify_bundled_model
from pstuts_pipeline_tests.support.helpers import flip_byte

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bundled_copy(tmp_path) -> Path:
    """The bundled model folder, copied so it can be tampered with."""
    copy = tmp_path / "model"
    shutil.copytree(bundled_model_path(), copy)
    return copy


def test_the_bundled_model_matches_the_official_release():
    verify_bundled_model(bundled_model_path())
    assert embedding.OFFICIAL_MINILM_SHA256["model.safetensors"].startswith("53aa5117")
    assert embedding.OFFICIAL_MINILM_SHA256["tokenizer.json"].startswith("be50c362")


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json"])
def test_a_tampered_copy_is_refused_with_the_file_named(bundled_copy, monkeypatch, name):
    verify_bundled_model(bundled_copy)  # an exact copy passes, and its digests are now cached
    flip_byte(bundled_copy / name, (bundled_copy / name).stat().st_size // 2)
    with pytest.raises(ModelIntegrityError) as refused:
        verify_bundled_model(bundled_copy)
    message = str(refused.value)
    assert str(bundled_copy / name) in message and "official all-MiniLM-L6-v2 release" in message
    assert embedding.OFFICIAL_MINILM_SHA256[name] in message and "refusing to use it" in message

    # Loading the default model goes through the same check, before any weights are read.
    monkeypatch.setattr(embedding.models, "bundled_model_path", lambda: bundled_copy)
    with pytest.raises(ModelIntegrityError, match=re.escape(name)):
        embedding.load_embeddings(EmbeddingSpec(batch_size=3))


def test_a_missing_file_is_refused(bundled_copy):
    (bundled_copy / "tokenizer.json").unlink()
    with pytest.raises(ModelIntegrityError, match="tokenizer.json: missing"):
        verify_bundled_model(bundled_copy)


def constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not pinned with =="
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_install_uses_the_constraints_and_they_pin_what_is_installed():
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"pip install .*-c constraints\.txt -e '\.\[dev,postgres,chat,celery\]'", makefile)
    pins = constraints()
    # torch is installed first, on its own, pinned by the Makefile (a CPU build where one is at hand).
    pins["torch"] = re.search(r"^TORCH \?= torch==(\S+)$", makefile, re.M).group(1)
    requirements = metadata.requires("pstuts_pipeline") or []
    direct = {re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0]).lower() for r in requirements}
    assert direct - set(pins) == set(), f"dependencies without a pin in constraints.txt: {direct - set(pins)}"
    drifted = {}
    for name, pinned in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # an extra that is not installed here (e.g. tune)
        if installed.split("+")[0] != pinned.split("+")[0]:
            drifted[name] = (pinned, installed)
    assert not drifted, f"installed versions differ from constraints.txt: {drifted}"
