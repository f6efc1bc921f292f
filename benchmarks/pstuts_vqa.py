"""Where the PsTuts-VQA splits are, in one place for the benchmarks and the tests: `PSTUTS_VQA_DIR`."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pstuts_vqa_dir() -> Path:
    """`PSTUTS_VQA_DIR`, by default `../shared/pstuts` beside the checkout (the data is licensed and never copied in)."""
    return Path(os.environ.get("PSTUTS_VQA_DIR") or REPO.parent / "shared" / "pstuts")


PSTUTS_DIR = pstuts_vqa_dir()
