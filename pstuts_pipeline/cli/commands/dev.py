"""`pstuts dev`: Dagster's UI, daemon and sensor through `dg dev`, on the project's instance."""

import os
import sys
from pathlib import Path

import typer

from pstuts_pipeline.cli.render import console


def dev(context: typer.Context) -> None:
    """`dg dev` on the project's instance (DAGSTER_HOME, with its run queue and Qdrant writer pool)."""
    from pstuts_pipeline.defs.instance import prepare_home
    from pstuts_pipeline.settings import project_root

    home = prepare_home()
    os.environ["DAGSTER_HOME"] = str(home)
    # dg runs the project in the environment it finds active; this one is where pstuts (and so dg) is installed.
    os.environ["VIRTUAL_ENV"] = sys.prefix
    console.print(f"dg dev with DAGSTER_HOME={home}")
    dg_command = Path(sys.executable).with_name("dg")
    os.chdir(project_root())  # pyproject.toml's [tool.dg]
    os.execv(dg_command, [str(dg_command), "dev", *context.args])
