"""Whether the collection can answer a question, checked once for `pstuts search`, `ask`, `evaluate`, `videos` and
the ask page alike: a missing, empty or unreadable collection is none of it "no matches"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

if TYPE_CHECKING:
    from pstuts_pipeline.search.store import Store


class CollectionUnavailable(RuntimeError):
    """The collection cannot answer yet (missing, empty, or held by another process); the message says what to do."""


class CollectionDamaged(CollectionUnavailable):
    """The store holding the collection cannot be read: not a question of running an ingest."""


def require_points(store: Store) -> int:
    """The collection's point count, or CollectionUnavailable saying why it cannot answer and what to run."""
    collection = store.collection
    try:
        exists = store.exists()
        points = store.count() if exists else 0
    except (ResponseHandlingException, UnexpectedResponse):
        raise  # a server that cannot be reached or refuses: the Qdrant resource names the server
    except Exception as error:  # noqa: BLE001 - any storage error: say it is the collection, not the question
        raise CollectionDamaged(
            f"collection {collection!r} cannot be read ({type(error).__name__}: {error}): the store looks damaged; "
            "re-create it with `pstuts ingest --force` (or restore a backup of the Qdrant folder)"
        ) from error
    if not exists:
        raise CollectionUnavailable(f"collection {collection!r} does not exist yet: run `pstuts ingest` first")
    if points == 0:
        raise CollectionUnavailable(
            f"collection {collection!r} is empty (its store may have been emptied or damaged): "
            "run `pstuts ingest --force` to fill it again"
        )
    return points
