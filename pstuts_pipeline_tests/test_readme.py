"""The README stays true to the tree: its Layout section lists every module as its docstring describes it."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_layout_section_names_every_module_as_the_tree_has_it() -> None:
    checked = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "readme_layout.py"), "--check"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for module in sorted((REPO / "pstuts_pipeline").rglob("*.py")):
        if module.name != "__init__.py":
            assert f"`{module.relative_to(REPO)}`" in readme
