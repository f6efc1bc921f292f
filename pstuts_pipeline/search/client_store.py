"""The store on a Qdrant server through qdrant-client (QDRANT_URL); tests also run it on qdrant-client's local mode.

The collection's metadata records the embedding model. `client` stays public for LangChain's `QdrantVectorStore`.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Sequence
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.common.version_check import is_compatible

from pstuts_pipeline.search.store import Selection, Store


def _selection(value: Selection) -> bool | list[str]:
    return value if isinstance(value, bool) else list(value)


def connect(url: str, api_key: str | None, timeout_s: int) -> QdrantClient:
    """A client for a server whose version is checked before the first request, not in a thread of its own.

    qdrant-client's own check runs in a daemon thread: a command that fails fast (a refused connection) exits while
    that thread is still in its request, and the interpreter crashed at exit (SIGSEGV) in about half such runs.
    """
    client = QdrantClient(url=url, api_key=api_key, timeout=timeout_s, check_compatibility=False)
    try:
        server = client.info().version
    except Exception:
        client.close()
        raise
    ours = importlib.metadata.version("qdrant-client")
    if not is_compatible(ours, server):
        warnings.warn(
            f"qdrant-client {ours} may not work with the Qdrant server's version {server}: the major versions should "
            "match and the minor ones differ by at most 1",
            UserWarning,
            stacklevel=2,
        )
    return client


class ClientStore(Store):
    """One collection through a qdrant-client client; closing the store closes the client."""

    def __init__(self, client: QdrantClient, collection: str):
        self.client = client
        self.collection = collection

    def exists(self) -> bool:
        return self.client.collection_exists(self.collection)

    def create(
        self,
        vectors: dict[str, models.VectorParams],
        sparse: dict[str, models.SparseVectorParams],
        model_id: str,
        indexed_field: str,
    ) -> None:
        if not self.exists():
            try:
                self.client.create_collection(
                    self.collection,
                    vectors_config=vectors,
                    sparse_vectors_config=sparse,
                    metadata={"embedding_model": model_id},
                )
            except Exception:
                # Another writer created it between our check and our create (parallel steps on one server).
                if not self.exists():
                    raise
        schema = self.client.get_collection(self.collection).payload_schema or {}
        # Local mode (the tests' stand-in for a server) scans anyway and warns about payload indexes.
        if indexed_field not in schema and not self.client.init_options.get("path"):
            self.client.create_payload_index(
                self.collection, indexed_field, models.PayloadSchemaType.INTEGER, wait=True
            )

    def model(self) -> str | None:
        if not self.exists():
            return None
        return (self.client.get_collection(self.collection).config.metadata or {}).get("embedding_model")

    def count(self, where: models.Filter | None = None) -> int:
        if not self.exists():
            return 0
        return self.client.count(self.collection, count_filter=where, exact=True).count

    def upsert(self, points: Sequence[models.PointStruct]) -> None:
        self.client.upsert(self.collection, points=list(points), wait=True)

    def delete(self, points: Sequence[str] | models.Filter) -> None:
        selector = (
            models.FilterSelector(filter=points)
            if isinstance(points, models.Filter)
            else models.PointIdsList(points=list(points))
        )
        self.client.delete(self.collection, points_selector=selector, wait=True)

    def query_batch(self, requests: Sequence[models.QueryRequest]) -> list[list[models.ScoredPoint]]:
        return [r.points for r in self.client.query_batch_points(self.collection, requests=list(requests))]

    def retrieve(
        self, ids: Sequence[Any], with_payload: Selection = True, with_vectors: Selection = False
    ) -> list[models.Record]:
        return self.client.retrieve(
            self.collection, ids=list(ids), with_payload=_selection(with_payload), with_vectors=_selection(with_vectors)
        )

    def scroll(
        self,
        where: models.Filter | None = None,
        limit: int = 1024,
        offset: Any = None,  # noqa: ANN401
        with_payload: Selection = True,
        with_vectors: Selection = False,
    ) -> tuple[list[models.Record], Any]:
        return self.client.scroll(
            self.collection,
            scroll_filter=where,
            limit=limit,
            offset=offset,
            with_payload=_selection(with_payload),
            with_vectors=_selection(with_vectors),
        )

    def close(self) -> None:
        self.client.close()
