"""`pstuts ingest` and `pstuts register`: the data folder's videos as partitions, materialized when new or changed."""

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console, print_error, seconds_so_far
from pstuts_pipeline.cli.text_safety import printable


def ingest(
    video: Annotated[list[str] | None, typer.Option("--video", help="Only these video ids (repeatable).")] = None,
    force: Annotated[bool, typer.Option(help="Re-ingest even videos that look unchanged.")] = False,
    allow_mass_removal: Annotated[
        bool,
        typer.Option(help="Remove the videos whose files are gone even if they are most or all of the collection."),
    ] = False,
) -> None:
    """Register every video in the data folder as a partition and materialize the new or changed ones."""
    from pstuts_pipeline.cli.report import IngestSettings, unchanged_report

    # With nothing to do, the ledger says so without importing Dagster, the pipeline or Qdrant.
    config = IngestSettings.from_env()
    report = None if force else unchanged_report(config, only=video, allow_removal=allow_mass_removal)
    if report is None:
        from pstuts_pipeline.cli.ingest import ingest as run_ingest
        from pstuts_pipeline.cli.progress import Tracker
        from pstuts_pipeline.defs.instance import instance_for_cli

        instance = instance_for_cli()
        defs = project.definitions()
        with Tracker(console, "pstuts ingest", "steps") as progress:
            report = run_ingest(
                defs, instance, only=video, force=force, on_progress=progress.update, allow_removal=allow_mass_removal
            )
    plan = report.plan
    for line in report.reclaimed:
        console.print(f"[yellow]reclaimed[/yellow] {escape(printable(line))}")
    table = Table(title="pstuts ingest", show_header=False)
    table.add_row("videos ingested", str(len(plan.to_ingest) - len(report.unfinished)))
    table.add_row("videos unchanged (skipped)", str(len(plan.unchanged)))
    table.add_row("videos removed", str(len(plan.removed)))
    if plan.held_back:
        table.add_row("videos kept (file unreadable)", str(len(plan.held_back)))
    table.add_row("videos failed", str(len(plan.failed) + len(report.unfinished)))
    table.add_row("chunks written", str(report.chunks))
    table.add_row("points in collection", str(report.points_in_collection))
    table.add_row("seconds", f"{seconds_so_far():.1f}")
    if report.step_seconds:
        from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES

        for step, seconds in report.step_seconds.items():
            if step in INGESTION_ASSET_NAMES:
                table.add_row(f"  {step}", f"{seconds:.1f}s")
    table.add_row("dagster home", report.dagster_home)
    console.print(table)
    for key, error in plan.failed.items():
        # A file's own errors already start with its name.
        print_error("failed", error if error.startswith(f"{key}: ") else f"{key}: {error}")
    for run in report.failed_runs:
        print_error("run failed", run)
    if plan.removal_refused:
        print_error("removal refused:", plan.removal_refused)
    if not report.ok:
        raise typer.Exit(1)


def register() -> None:
    """Register every video in the data folder as a partition, so `dagster asset materialize --partition ID` works."""
    from pstuts_pipeline.cli.ingest import register_partitions
    from pstuts_pipeline.defs.instance import instance_for_cli
    from pstuts_pipeline.sources import load_catalog

    instance = instance_for_cli()
    catalog = load_catalog(project.resources("transcript_source")["transcript_source"].path())
    keys = register_partitions(instance, catalog)
    console.print(f"{len(keys)} video partitions registered in {instance.root_directory}")
    for error in catalog.errors:
        print_error("not registered:", str(error))
    if catalog.errors:
        raise typer.Exit(1)
