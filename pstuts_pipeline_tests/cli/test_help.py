"""`pstuts --help` and each command's: a flag takes no value, so its row shows no type; an option's shows its own."""

import pytest
from typer.testing import CliRunner

from pstuts_pipeline.cli.app import Command, app


@pytest.mark.parametrize("command", [[], ["ingest"], ["search"], ["videos"], ["evaluate"]])
def test_flags_show_no_type_and_options_show_theirs(command: list[str]) -> None:
    shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "150"})
    assert shown.exit_code == 0, shown.output
    assert "--help" in shown.output and "<bool>" not in shown.output
    if command == ["search"]:
        assert "<int range>" in shown.output and "<path>" in shown.output


def test_typers_own_command_class_labels_a_flag_bool_and_the_apps_does_not() -> None:
    """Why the test above can fail: typer's own command class, which the app replaces through `cls=`, says <bool>."""
    import typer

    flagged = typer.Typer()

    @flagged.command()
    def show(as_json: bool = typer.Option(False, "--json")) -> None:
        """A command with one flag."""

    @flagged.command("again", cls=Command)
    def show_again(as_json: bool = typer.Option(False, "--json")) -> None:
        """The same command through the app's class."""

    assert "<bool>" in CliRunner().invoke(flagged, ["show", "--help"], env={"COLUMNS": "150"}).output
    assert "<bool>" not in CliRunner().invoke(flagged, ["again", "--help"], env={"COLUMNS": "150"}).output
