"""`pstuts videos`: what the collection holds, video by video, and when this instance ingested each."""

import json
from typing import Annotated

import typer
from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console, iso
from pstuts_pipeline.cli.text_safety import printable


def videos(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object: the videos, and the collection.")] = False,
) -> None:
    """List the videos the collection holds: title, chunks, points, when ingested, from which file."""
    import dagster as dg

    from pstuts_pipeline.defs.instance import instance_for_cli
    from pstuts_pipeline.defs.materializations import latest_by_partition
    from pstuts_pipeline.search import vectorstore

    qdrant = project.resources("qdrant")["qdrant"]
    with project.collection(qdrant) as store:
        stored = vectorstore.stored_videos(store)
    with instance_for_cli() as instance:
        latest = latest_by_partition(instance, dg.AssetKey("qdrant_collection"), [str(v) for v in stored])
    rows = []
    for video_id, video in stored.items():
        record = latest.get(str(video_id))
        materialization = record.asset_materialization if record else None
        written = materialization.metadata.get("points_written") if materialization else None
        rows.append(
            {
                "video_id": video_id,
                "title": video["title"],
                "chunks": written.value if written is not None else None,
                "points": video["points"],
                "ingested": iso(record.timestamp) if record else None,
                "source_file": video["source_file"],
            }
        )
    if as_json:
        print(json.dumps({"collection": qdrant.collection, "videos": rows}), flush=True)
        return
    table = Table(title=f"{len(rows)} videos in {escape(printable(repr(qdrant.collection)))}")
    columns: list[tuple[str, JustifyMethod]] = [
        ("video", "right"),
        ("title", "left"),
        ("chunks", "right"),
        ("points", "right"),
    ]
    for name, justify in columns:
        table.add_column(name, justify=justify)
    table.add_column("ingested (UTC)")
    table.add_column("file")
    for row in rows:
        table.add_row(
            str(row["video_id"]),
            escape(printable(row["title"])),
            "?" if row["chunks"] is None else str(row["chunks"]),
            str(row["points"]),
            row["ingested"] or "?",
            escape(printable(row["source_file"])),
        )
    Console(width=max(Console().width, 130)).print(table)
    if any(row["ingested"] is None for row in rows):
        console.print("?: not ingested through this Dagster instance (DAGSTER_HOME)", soft_wrap=True)
