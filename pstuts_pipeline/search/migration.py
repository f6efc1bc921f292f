"""Moving a store written by qdrant-client's local mode (pstuts before Qdrant Edge) into Edge, point for point.

Every collection of the folder is copied with its ids, vectors and payloads as they are, so fingerprints still
match and nothing is ingested again; the old folder is kept beside the new one as `<folder>.local-mode`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from filelock import FileLock
from qdrant_client import models

from pstuts_pipeline.search.client_store import ClientStore
from pstuts_pipeline.search.edge_store import EdgeStore, is_local_mode_folder
from pstuts_pipeline.search.store import Store
from pstuts_pipeline.search.vectorstore import DENSE_VECTOR, ensure_collection

PAGE = 256  # points per read and write: a page of phrase multivectors is a few MB


def backup_folder(folder: Path) -> Path:
    """Where the local-mode folder is kept after its migration."""
    return folder.with_name(folder.name + ".local-mode")


def copy_collection(source: Store, target: Store) -> int:
    """Every point of one collection, ids, vectors and payloads as they are, into another store (either engine);
    the number copied."""
    first, _ = source.scroll(limit=1, with_payload=False, with_vectors=True)
    if first:
        ensure_collection(target, _dense_size(first[0]), source.model() or "")
    offset, copied = None, 0
    while first:
        page, offset = source.scroll(limit=PAGE, offset=offset, with_payload=True, with_vectors=True)
        target.upsert([models.PointStruct(id=r.id, vector=_vectors(r), payload=r.payload) for r in page])
        copied += len(page)
        if offset is None:
            break
    if target.count() != source.count():
        raise RuntimeError(f"collection {source.collection!r}: {target.count()} of {source.count()} points copied")
    return copied


def _vectors(record: models.Record) -> dict[str, models.Vector]:
    """A point's named vectors, as read with them: each point of ours has its dense, phrase and sparse vectors."""
    if not isinstance(record.vector, dict):
        raise ValueError(f"point {record.id} has no named vectors: not a pstuts collection")
    return dict(record.vector)


def _dense_size(record: models.Record) -> int:
    dense = _vectors(record).get(DENSE_VECTOR)
    if not isinstance(dense, list):
        raise ValueError(f"point {record.id} has no {DENSE_VECTOR!r} vector: not a pstuts collection")
    return len(dense)


def migrate_local_mode(folder: Path) -> dict[str, int]:
    """Copy each collection of a local-mode folder into Edge in a new folder, then swap the folders; points per
    collection. The old pstuts lock (`<folder>.lock`) is held throughout, so no older writer runs meanwhile."""
    from qdrant_client import QdrantClient

    if not is_local_mode_folder(folder):
        raise ValueError(f"{folder} is not a qdrant-client local-mode folder: nothing to migrate")
    backup = backup_folder(folder)
    if backup.exists():
        raise FileExistsError(f"{backup} exists from an earlier migration: move it away first")
    staging = folder.with_name(folder.name + ".migrating")
    shutil.rmtree(staging, ignore_errors=True)
    copied: dict[str, int] = {}
    with FileLock(str(folder) + ".lock", timeout=0):
        client = QdrantClient(path=str(folder))
        try:
            for described in client.get_collections().collections:
                target = EdgeStore(staging, described.name, lock_timeout_s=0)
                try:
                    copied[described.name] = copy_collection(ClientStore(client, described.name), target)
                finally:
                    target.close()
        finally:
            client.close()
        for lock in staging.glob("*.lock"):
            lock.unlink()
        folder.rename(backup)
        staging.rename(folder)
    return copied
