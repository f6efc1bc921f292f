"""The default store: a local folder held by Qdrant Edge, Qdrant's own engine in-process (`qdrant-edge-py`).

One collection is one Edge shard, `<folder>/<collection>/`, with a record beside it in `<folder>/<collection>.json`:
the embedding model (Edge keeps no collection metadata) and a token renewed before a store's first write, so the
ingest ledger can tell from that one file that the collection may have changed (Edge's WAL files keep their size). Edge admits one open shard per folder in any
process, and a refused second `EdgeShard.load()` can break the holder's next flush (with a payload index and a
delete-by-filter not yet flushed, "Tracker journal ... is shorter than expected"), so every open takes the
project's file lock, `<folder>/<collection>.lock`, before the engine is touched, and holds it until closed.
Searches are exact (`SearchParams(exact=True)`): the same rankings as before, and fast enough at 10,000 videos.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

import qdrant_edge as edge
from filelock import FileLock, Timeout
from qdrant_client import models

from pstuts_pipeline.search.store import Selection, Store

EXACT = edge.SearchParams(exact=True)
WANTED = ".wanted."  # <collection>.wanted.<pid>.<thread>: a user waiting for the lock


class LocalModeFolderError(RuntimeError):
    """The folder holds a store written by qdrant-client's local mode, which Qdrant Edge cannot read."""


def store_lock(folder: Path, collection: str, timeout_s: float) -> FileLock:
    """The lock every user of a collection's shard takes before opening it (ingest, search, the ask page).

    Not thread-local: the ask page opens the store in one thread and may close it in another.
    """
    return FileLock(str(folder / f"{collection}.lock"), timeout=timeout_s, thread_local=False)


def others_waiting(folder: Path, collection: str) -> bool:
    """Whether another user waits for the collection's lock (the ask page, which keeps the store open, lets go).

    A marker left by a waiter that died (kill -9) is removed: its process id no longer runs.
    """
    waiting = False
    for marker in folder.glob(f"{collection}{WANTED}*"):
        pid = int(marker.name.removeprefix(f"{collection}{WANTED}").split(".")[0])
        try:
            os.kill(pid, 0)
            waiting = True
        except ProcessLookupError:
            marker.unlink(missing_ok=True)
        except PermissionError:
            waiting = True  # another user's process: it runs
    return waiting


def is_local_mode_folder(folder: Path) -> bool:
    """Whether qdrant-client's local mode wrote this folder (its meta.json and collection/ layout)."""
    return (folder / "meta.json").is_file() and (folder / "collection").is_dir()


def refuse_local_mode(folder: Path) -> None:
    """Stop, in one line saying what to run, on a folder written by local mode: never ignore its points silently."""
    if is_local_mode_folder(folder):
        raise LocalModeFolderError(
            f"{folder} holds a qdrant-client local-mode store from an older pstuts: run `pstuts migrate-store` to "
            "copy it into Qdrant Edge (the old folder is kept beside it as a backup)"
        )


def _point_id(value: Any) -> int | uuid.UUID:  # noqa: ANN401 - a point id as qdrant-client takes it
    if isinstance(value, int | uuid.UUID):
        return value
    return uuid.UUID(str(value))


def _match(match: Any) -> Any:  # noqa: ANN401 - a qdrant-client match, an Edge match
    if isinstance(match, models.MatchValue):
        return edge.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return edge.MatchAny(match.any)
    raise ValueError(f"the Edge store does not translate {type(match).__name__} conditions")


def _condition(condition: Any) -> Any:  # noqa: ANN401 - a qdrant-client condition, an Edge condition
    if isinstance(condition, models.FieldCondition):
        return edge.FieldCondition(key=condition.key, match=_match(condition.match))
    if isinstance(condition, models.HasIdCondition):
        return edge.HasIdCondition({_point_id(i) for i in condition.has_id})
    if isinstance(condition, models.Filter):
        return edge_filter(condition)
    raise ValueError(f"the Edge store does not translate {type(condition).__name__} conditions")


def _conditions(conditions: Any) -> list[Any] | None:  # noqa: ANN401
    if conditions is None:
        return None
    return [_condition(c) for c in (conditions if isinstance(conditions, list) else [conditions])]


@overload
def edge_filter(where: models.Filter) -> edge.Filter: ...
@overload
def edge_filter(where: None) -> None: ...
@overload
def edge_filter(where: models.Filter | None) -> edge.Filter | None: ...
def edge_filter(where: models.Filter | None) -> edge.Filter | None:
    """A qdrant-client filter (field matches, ids, nested filters) as Edge's."""
    if where is None:
        return None
    return edge.Filter(
        must=_conditions(where.must), should=_conditions(where.should), must_not=_conditions(where.must_not)
    )


def _vector(value: Any) -> Any:  # noqa: ANN401 - a dense, multi or sparse vector as qdrant-client holds it
    if isinstance(value, models.SparseVector):
        return edge.SparseVector(indices=list(value.indices), values=list(value.values))
    return value


def _point_vector(vector: models.VectorStruct) -> edge.Vector:
    """A point's vectors as Edge takes them: named dense, multi or sparse vectors, or one unnamed vector."""
    if isinstance(vector, dict):
        return {name: _vector(v) for name, v in vector.items()}
    if isinstance(vector, list):
        return vector
    raise ValueError(f"the Edge store takes vectors, not {type(vector).__name__} (qdrant-client's inference)")


def _vectors_back(vectors: Any) -> Any:  # noqa: ANN401 - Edge's vectors as qdrant-client's
    if not isinstance(vectors, dict):
        return vectors
    return {
        name: models.SparseVector(indices=list(v.indices), values=list(v.values))
        if isinstance(v, edge.SparseVector)
        else v
        for name, v in vectors.items()
    }


def _id_back(value: Any) -> Any:  # noqa: ANN401 - Edge gives uuid.UUID; qdrant-client gives str
    return str(value) if isinstance(value, uuid.UUID) else value


def _record(record: Any) -> models.Record:  # noqa: ANN401
    return models.Record.model_construct(
        id=_id_back(record.id), payload=record.payload, vector=_vectors_back(record.vector), shard_key=None
    )


def _with(value: Selection) -> bool | list[str]:
    return value if isinstance(value, bool) else list(value)


def _vector_params(params: models.VectorParams) -> edge.EdgeVectorParams:
    if params.distance != models.Distance.COSINE:
        raise ValueError(f"the Edge store is set up for cosine vectors, not {params.distance}")
    multi = params.multivector_config
    return edge.EdgeVectorParams(
        size=params.size,
        distance=edge.Distance.Cosine,
        multivector_config=edge.MultiVectorConfig(edge.MultiVectorComparator.MaxSim) if multi else None,
    )


def _sparse_params(params: models.SparseVectorParams) -> edge.EdgeSparseVectorParams:
    return edge.EdgeSparseVectorParams(modifier=edge.Modifier.Idf if params.modifier == models.Modifier.IDF else None)


def _query(request: models.QueryRequest) -> edge.QueryRequest:
    query = request.query
    vector = _vector(query) if isinstance(query, models.SparseVector | list) else None
    if vector is None or request.prefetch or request.offset:
        raise ValueError("the Edge store answers nearest-neighbour requests with one vector each")
    return edge.QueryRequest(
        limit=request.limit or 10,
        query=edge.Query.Nearest(vector, using=request.using),
        filter=edge_filter(request.filter),
        score_threshold=request.score_threshold,
        params=EXACT,
        with_payload=False,
        with_vector=False,
    )


class EdgeStore(Store):
    """A collection in a local folder, held open by this process (and locked) until `close()`."""

    def __init__(self, folder: Path, collection: str, lock_timeout_s: float):
        """Take the folder's lock, then load the collection's shard if it exists (filelock.Timeout if held)."""
        self.folder, self.collection = folder, collection
        self.path = folder / collection
        self._written = False
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = store_lock(folder, collection, lock_timeout_s)
        self._acquire(lock_timeout_s)
        try:
            refuse_local_mode(folder)
            self._shard: edge.EdgeShard | None = edge.EdgeShard.load(str(self.path)) if self._has_shard() else None
        except BaseException:
            self._lock.release()
            raise

    def _acquire(self, timeout_s: float) -> None:
        """Take the lock; while waiting for it, say so in a marker file, so a holder that can let go does."""
        try:
            self._lock.acquire(timeout=0)
            return
        except Timeout:
            if timeout_s <= 0:
                raise
        marker = self.folder / f"{self.collection}{WANTED}{os.getpid()}.{threading.get_ident()}"
        marker.touch()
        try:
            self._lock.acquire(timeout=timeout_s)
        finally:
            marker.unlink(missing_ok=True)

    def _has_shard(self) -> bool:
        return (self.path / "segments").is_dir()

    @property
    def _record_file(self) -> Path:
        return self.folder / f"{self.collection}.json"

    def _open(self) -> edge.EdgeShard:
        if self._shard is None:
            raise RuntimeError(f"collection {self.collection!r} in {self.folder} does not exist yet")
        return self._shard

    def exists(self) -> bool:
        return self._shard is not None

    def create(
        self,
        vectors: dict[str, models.VectorParams],
        sparse: dict[str, models.SparseVectorParams],
        model_id: str,
        indexed_field: str,
    ) -> None:
        if self._shard is None:
            config = edge.EdgeConfig(
                vectors={name: _vector_params(p) for name, p in vectors.items()},
                sparse_vectors={name: _sparse_params(p) for name, p in sparse.items()},
            )
            # The model first: a shard never exists without the record of what built it.
            self._write_record(model_id)
            self._shard = edge.EdgeShard.create(str(self.path), config)
        if indexed_field not in self._shard.info().payload_schema:
            self._shard.update(edge.UpdateOperation.create_field_index(indexed_field, edge.PayloadSchemaType.Integer))

    def _record(self) -> dict[str, Any]:
        return json.loads(self._record_file.read_text()) if self._record_file.is_file() else {}

    def _write_record(self, model_id: str | None) -> None:
        record = {"embedding_model": model_id, "written": uuid.uuid4().hex}
        temporary = self._record_file.with_name(f"{self._record_file.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record) + "\n")
        temporary.replace(self._record_file)
        self._written = True

    def _writing(self) -> edge.EdgeShard:
        """The shard, with the record's token renewed first if this store has not written yet (even if it dies)."""
        shard = self._open()
        if not self._written:
            self._write_record(self._record().get("embedding_model"))
        return shard

    def model(self) -> str | None:
        return self._record().get("embedding_model") if self._shard is not None else None

    def count(self, where: models.Filter | None = None) -> int:
        if self._shard is None:
            return 0
        return self._shard.count(edge.CountRequest(exact=True, filter=edge_filter(where)))

    def upsert(self, points: Sequence[models.PointStruct]) -> None:
        converted = [
            edge.Point(
                id=_point_id(p.id),
                vector=_point_vector(p.vector),
                payload=p.payload,
            )
            for p in points
        ]
        self._writing().update(edge.UpdateOperation.upsert_points(converted))

    def delete(self, points: Sequence[str] | models.Filter) -> None:
        if isinstance(points, models.Filter):
            operation = edge.UpdateOperation.delete_points_by_filter(edge_filter(points))
        else:
            operation = edge.UpdateOperation.delete_points([_point_id(i) for i in points])
        self._writing().update(operation)

    def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        if not requests:
            return []
        answers = self._open().query_batch(edge.QueryBatchRequest([_query(r) for r in requests]))
        return [
            [models.ScoredPoint.model_construct(id=_id_back(p.id), version=p.version, score=p.score) for p in points]
            for points in answers
        ]

    def retrieve(
        self, ids: Sequence[Any], with_payload: Selection = True, with_vectors: Selection = False
    ) -> list[models.Record]:
        if not ids:
            return []
        found = self._open().retrieve(
            [_point_id(i) for i in ids], with_payload=_with(with_payload), with_vector=_with(with_vectors)
        )
        return [_record(r) for r in found]

    def scroll(
        self,
        where: models.Filter | None = None,
        limit: int = 1024,
        offset: Any = None,  # noqa: ANN401
        with_payload: Selection = True,
        with_vectors: Selection = False,
    ) -> tuple[list[models.Record], Any]:
        if self._shard is None:
            return [], None
        page, following = self._shard.scroll(
            edge.ScrollRequest(
                offset=None if offset is None else _point_id(offset),
                limit=limit,
                filter=edge_filter(where),
                with_payload=_with(with_payload),
                with_vector=_with(with_vectors),
            )
        )
        return [_record(r) for r in page], _id_back(following)

    def flush(self) -> None:
        """Write what the WAL holds into the segments now (closing does it too)."""
        if self._shard is not None:
            self._shard.flush()

    def close(self) -> None:
        shard, self._shard = self._shard, None
        try:
            if shard is not None:
                try:
                    shard.flush()
                finally:
                    shard.close()  # even after a failed flush: the WAL has every write, the next load replays it
        finally:
            if self._lock.is_locked:
                self._lock.release()
