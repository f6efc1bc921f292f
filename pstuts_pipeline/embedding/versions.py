"""Versioned model folders with a card, shared by the tuned embedder and the reranker.

A training run writes into a hidden staging folder and renames it once its card is written, so `latest` only
ever sees complete versions. The card records the base model and data with their sha256, the settings, the
metrics and the seconds spent.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pstuts_pipeline.embedding.checksums import sha256_file

BASE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
CARD_FILE = "pstuts_tuning.json"
LATEST = "latest"
NOTE = "Trained on PsTuts-VQA questions (CC BY-NC): the weights may carry its non-commercial terms."
Log = Callable[[str], None]


def version_name(prefix: str, base_sha256: str, data: list[dict[str, Any]], settings: Any, created: datetime) -> str:
    """A folder name that sorts by time and says which inputs made it."""
    inputs = json.dumps({"base": base_sha256, "data": [d["sha256"] for d in data], **asdict(settings)}, sort_keys=True)
    return f"{prefix}-{created:%Y%m%dT%H%M%SZ}-{hashlib.sha256(inputs.encode()).hexdigest()[:8]}"


def read_card(folder: Path) -> dict[str, Any]:
    """The card of a model folder."""
    return json.loads((Path(folder) / CARD_FILE).read_text())


def latest_version(root: Path, how_to_make_one: str) -> Path:
    """The newest complete version under `root` (a folder counts once its card is written)."""
    cards = sorted(root.glob(f"*/{CARD_FILE}")) if root.is_dir() else []
    versions = sorted((read_card(card.parent)["created"], card.parent) for card in cards)
    if not versions:
        raise FileNotFoundError(f"{root}: no trained version yet; {how_to_make_one}")
    return versions[-1][1]


def resolve(value: str, root: Callable[[], Path], how_to_make_one: str) -> str:
    """A setting naming a model folder: `latest` means the newest version under `root()`, anything else is kept."""
    return str(latest_version(root(), how_to_make_one)) if value.strip().lower() == LATEST else value


@dataclass(frozen=True)
class Draft:
    """A version being trained: its name, when it was started, where it is staged, and the base it starts from."""

    name: str
    created: datetime
    staging: Path
    base: Path
    base_sha256: str


def new_version(out_root: Path, prefix: str, base: Path, data: list[dict[str, Any]], settings: Any) -> Draft:
    """The draft of a version about to be trained from the model folder `base`."""
    created = datetime.now(UTC)
    base_sha256 = sha256_file(base / "model.safetensors")
    name = version_name(prefix, base_sha256, data, settings, created)
    return Draft(name, created, Path(out_root) / f".{name}.partial", base, base_sha256)


def publish(staging: Path, card: dict[str, Any], log: Log) -> Path:
    """Write the card, drop trainer checkpoints, and make the version visible under its final name."""
    shutil.rmtree(staging / "checkpoints", ignore_errors=True)
    (staging / CARD_FILE).write_text(json.dumps(card, indent=2))
    folder = staging.parent / card["name"]
    staging.rename(folder)
    log(f"model written to {folder}")
    return folder
