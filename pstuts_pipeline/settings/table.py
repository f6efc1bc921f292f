"""docs/configuration.md's tables, made from the settings models (test_settings.py fails when they are stale)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pstuts_pipeline.settings.base import Settings, project_root, shown_default, variables
from pstuts_pipeline.settings.models import CONCERNS

BEGIN = "<!-- settings tables: made by `python -m pstuts_pipeline.settings.table` from pstuts_pipeline/settings -->"
END = "<!-- end of the settings tables -->"
# Read by other programs than the package, and documented with them.
ELSEWHERE = (
    (
        "DAGSTER_PG_HOST`, `_PORT`, `_DB`, `_USERNAME`, `_PASSWORD",
        "",
        "PostgreSQL instance, read by `deploy/dagster.yaml`",
    ),
    (
        "PSTUTS_CELERY_BROKER",
        "",
        "Celery broker URL (`redis://host:6379/0` or `pyamqp://...`), read where runs and workers execute (the "
        "executor's config names it)",
    ),
    (
        "PSTUTS_VQA_DIR",
        "`../shared/pstuts` beside the checkout",
        "tests and benchmarks only: the folder holding PsTuts-VQA's `train.json` and `dev.json`; tests that need them "
        "skip when they are absent (fail under `CI=true`)",
    ),
)


def _shown(info: Any) -> str:
    """The default as a reader wants it: the declared text, else the value in code style (nothing for None)."""
    if (text := shown_default(info)) is not None:
        return text
    value = info.default
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "`1`" if value else "off"
    return f"`{value}`"


def _rows(model: type[Settings]) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        names = " or ".join(f"`{variable}`" for variable in variables(model, name))
        rows.append(f"| {names} | {_shown(info)} | {info.description} |")
    return rows


def tables() -> str:
    """One table per concern, headed by the model's docstring, then the variables read elsewhere."""
    parts = [BEGIN]
    for model in CONCERNS:
        title = model.__name__.removesuffix("Settings")
        parts += ["", f"### {title}", "", (model.__doc__ or "").strip(), "", "| variable | default | meaning |"]
        parts += ["| --- | --- | --- |", *_rows(model)]
    parts += ["", "### Read elsewhere", "", "| variable | default | meaning |", "| --- | --- | --- |"]
    parts += [f"| `{name}` | {shown} | {meaning} |" for name, shown, meaning in ELSEWHERE]
    return "\n".join([*parts, END])


def document() -> Path:
    return project_root() / "docs" / "configuration.md"


def with_tables(text: str) -> str:
    """The document with its generated part replaced by `tables()`."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + tables() + tail


if __name__ == "__main__":
    path = document()
    path.write_text(with_tables(path.read_text(encoding="utf-8")), encoding="utf-8")
    sys.stdout.write(f"wrote {path}\n")
