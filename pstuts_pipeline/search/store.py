"""The one interface the project asks of a vector store, whatever engine holds the collection.

Two engines stand behind it: Qdrant Edge for a local folder (`edge_store.py`, the default) and qdrant-client for a
Qdrant server (`client_store.py`). Requests and results are qdrant-client's models either way, so the point layout,
the filters and the fusion in `vectorstore.py` and `retrieval.py` are written once. Ids come back as strings.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from qdrant_client import models

# What `with_payload` / `with_vectors` accept: everything, nothing, or these fields / vector names.
Selection = bool | Sequence[str]


class Store(abc.ABC):
    """One collection: created once for a model, written a video at a time, searched, scrolled and counted."""

    collection: str

    @abc.abstractmethod
    def exists(self) -> bool:
        """Whether the collection has been created."""

    @abc.abstractmethod
    def create(
        self,
        vectors: dict[str, models.VectorParams],
        sparse: dict[str, models.SparseVectorParams],
        model_id: str,
        indexed_field: str,
    ) -> None:
        """Create the collection with these named vectors for this model (a no-op when it exists), and index an
        integer payload field every write filters on; ensured again on every call, for a creator that died early."""

    @abc.abstractmethod
    def model(self) -> str | None:
        """The embedding model recorded when the collection was created (None: none recorded, or no collection)."""

    @abc.abstractmethod
    def count(self, where: models.Filter | None = None) -> int:
        """The exact number of points, or of points matching a filter."""

    @abc.abstractmethod
    def upsert(self, points: Sequence[models.PointStruct]) -> None:
        """Write points (replacing those with the same ids), durable when this returns."""

    @abc.abstractmethod
    def delete(self, points: Sequence[str] | models.Filter) -> None:
        """Delete these points: by id, or those a filter matches."""

    @abc.abstractmethod
    def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        """Run nearest-neighbour requests (one vector each, optionally filtered) as one batch; ids and scores only."""

    @abc.abstractmethod
    def retrieve(
        self, ids: Sequence[Any], with_payload: Selection = True, with_vectors: Selection = False
    ) -> list[models.Record]:
        """These points (those that exist), with the payload fields and vectors asked for."""

    @abc.abstractmethod
    def scroll(
        self,
        where: models.Filter | None = None,
        limit: int = 1024,
        offset: Any = None,  # noqa: ANN401 - a point id, as the previous page returned it
        with_payload: Selection = True,
        with_vectors: Selection = False,
    ) -> tuple[list[models.Record], Any]:
        """One page of points in id order and the offset of the next (None after the last)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Make every write durable and let go of the collection."""
