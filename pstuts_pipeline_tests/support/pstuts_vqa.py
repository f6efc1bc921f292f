"""Where the PsTuts-VQA splits are, in one place for the benchmarks and the tests: `PSTUTS_VQA_DIR`."""

import os
from pathlib import Path

from pstuts_pipeline_tests.support import REPO


def pstuts_vqa_dir() -> Path:
    """`PSTUTS_VQA_DIR`, by default `../shared/pstuts` beside the checkout (the data is licensed and never copied in)."""
    return Path(os.environ.get("PSTUTS_VQA_DIR") or REPO.parent / "shared" / "pstuts")


PSTUTS_DIR = pstuts_vqa_dir()


def link_into(folder: Path, files: list[Path]) -> None:
    """Link the splits into a data folder (never copied: the data stays where it is licensed to be).

    A link out of the data folder is read only with PSTUTS_ALLOW_LINKS_OUTSIDE=1, set here for this process and the
    commands it starts.
    """
    os.environ["PSTUTS_ALLOW_LINKS_OUTSIDE"] = "1"
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        if not (folder / f.name).exists():
            (folder / f.name).symlink_to(f.resolve())
