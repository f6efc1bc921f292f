"""`pstuts migrate-store`: a store written by an older pstuts, copied into Qdrant Edge."""

from pstuts_pipeline.cli import project
from pstuts_pipeline.cli.render import console


def migrate_store() -> None:
    """Copy a store written by an older pstuts (qdrant-client's local mode) into Qdrant Edge, keeping the old one."""
    from pstuts_pipeline.search.migration import backup_folder, migrate_local_mode

    folder = project.resources("qdrant")["qdrant"].local_path
    copied = migrate_local_mode(folder)
    for collection, points in copied.items():
        console.print(f"{collection}: {points} points copied into Qdrant Edge", soft_wrap=True)
    console.print(f"{folder} is now a Qdrant Edge store; the old one is in {backup_folder(folder)}", soft_wrap=True)
