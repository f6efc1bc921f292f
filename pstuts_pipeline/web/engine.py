"""What the page asks of the project: search and answer a question with the domain modules, shaped for the API.

The embedder (and the chat model's client) are made once per server process. A local store is read from a private
copy kept open between questions and renewed when the store changes (`web/store.py`), so `pstuts ingest` can write
the store while the page answers; a server's client is opened per question.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from pstuts_pipeline.answers.answering import Answer, answer_documents, mmss
from pstuts_pipeline.answers.chat import ChatSettings, chat_model
from pstuts_pipeline.search import confidence, reranking, retrieval
from pstuts_pipeline.search.langchain_retriever import result_document
from pstuts_pipeline.web.media import MediaIndex, player
from pstuts_pipeline.web.schemas import AskReply, Moment, Result, Status
from pstuts_pipeline.web.store import StoreCopy

if TYPE_CHECKING:
    from qdrant_client import QdrantClient

ClientOpener = Callable[[], contextlib.AbstractContextManager["QdrantClient"]]
# How long a question waits for a local store that another process (an ingest) is writing, when there is no copy.
LOCK_TIMEOUT_S = 10.0


class CollectionUnavailable(RuntimeError):
    """The collection cannot answer yet (missing, empty, or held by another process); the message says what to do."""


@dataclass
class Engine:
    """The project's search and answers for one server process."""

    open_client: ClientOpener
    collection: str
    embeddings: Embeddings
    model_id: str
    chat: ChatSettings
    media: MediaIndex
    reranker: reranking.Reranker | None = None
    llm: BaseChatModel | None = None
    # What the engine holds beyond a question (the local store's open copy), let go when the server stops.
    on_close: Callable[[], None] | None = None
    # Under this a first result is "no good match" (PSTUTS_MIN_CONFIDENCE, read when the engine is made).
    min_confidence: float = field(default_factory=confidence.threshold)
    # Local-mode Qdrant admits one client per folder, also within a process: one question at a time opens it.
    _store: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.llm is None and self.chat.enabled:
            self.llm = chat_model(self.chat)

    @classmethod
    def from_resources(cls, resources: Mapping[str, Any]) -> Engine:
        """An engine on the resources `pstuts search` and `pstuts ask` use (settings.py's environment)."""
        embeddings, qdrant = resources["embeddings"], resources["qdrant"]

        def open_server_client() -> contextlib.AbstractContextManager[QdrantClient]:
            return qdrant.get_client(read_only=True, lock_timeout_s=LOCK_TIMEOUT_S)

        copy = None if qdrant.server_url else StoreCopy(qdrant.local_path, LOCK_TIMEOUT_S)
        return cls(
            open_client=copy.client if copy else open_server_client,
            collection=qdrant.collection,
            embeddings=embeddings.query_embeddings(),
            model_id=embeddings.model_id,
            chat=resources["chat_model"].settings(),
            media=MediaIndex(resources["transcript_source"].path()),
            reranker=resources["reranker"].get(),
            on_close=copy.close if copy else None,
        )

    def close(self) -> None:
        """Let go of what the engine holds between questions."""
        if self.on_close:
            self.on_close()

    def warm_up(self) -> None:
        """Load the embedder now, so the first learner does not wait for it."""
        self.embeddings.embed_query("warm up")

    @contextlib.contextmanager
    def _client(self) -> Iterator[QdrantClient]:
        from filelock import Timeout

        with self._store:
            try:
                with self.open_client() as client:
                    yield client
            except Timeout as error:
                # filelock's message names the lock file, so the operator can see which store is held.
                raise CollectionUnavailable(
                    f"{error} another process (an ingest?) is writing the Qdrant store: ask again when it is done"
                ) from None

    def _require_points(self, client: QdrantClient) -> int:
        if not client.collection_exists(self.collection):
            raise CollectionUnavailable(f"collection {self.collection!r} does not exist yet: run `pstuts ingest` first")
        points = client.count(self.collection).count
        if not points:
            raise CollectionUnavailable(f"collection {self.collection!r} is empty: run `pstuts ingest` on your data")
        return points

    def status(self) -> Status:
        """What the page says before a question: the collection's size and how answers are written."""
        try:
            with self._client() as client:
                points, problem = self._require_points(client), None
        except CollectionUnavailable as error:
            points, problem = 0, str(error)
        return Status(
            collection=self.collection, points=points, answers=self.chat.model or "extractive", problem=problem
        )

    def ask(self, question: str, top_k: int) -> AskReply:
        """Search, let go of the store, then answer (chat model or extractive) citing only retrieved moments."""
        with self._client() as client:
            self._require_points(client)
            found = retrieval.search(
                client, self.collection, self.embeddings, self.model_id, question, top_k, reranker=self.reranker
            )
        documents = [result_document(r) for r in found]
        answer = answer_documents(question, documents, self.llm, self.chat, self.min_confidence)
        return self._reply(answer, found)

    def _reply(self, answer: Answer, found: list[retrieval.SearchResult]) -> AskReply:
        local = self.media.files()
        urls = {r.video_id: r.url for r in found}
        citations = [
            Moment(
                video_id=c.video_id,
                title=c.title,
                time=c.time,
                mmss=mmss(c.time),
                player=player(c.video_id, urls.get(c.video_id, ""), c.time, local),
            )
            for c in answer.citations
        ]
        results = [result(rank, r, local, self.min_confidence) for rank, r in enumerate(found, 1)]
        return AskReply(
            question=answer.question,
            answer=answer.answer,
            answered=answer.answered,
            confidence=answer.confidence,
            min_confidence=self.min_confidence,
            model=answer.model,
            citations=citations,
            results=results,
            notes=answer.notes,
            invented_citations=answer.invented_citations,
            error=answer.error,
            seconds=answer.seconds,
        )


def result(rank: int, found: retrieval.SearchResult, local: dict[int, Path], min_confidence: float = 0.0) -> Result:
    """A search result as the page shows it: the chunk cut around its linked sentence, and how to play the moment."""
    at = found.text.find(found.link_sentence) if found.link_sentence else -1
    before, sentence, after = (
        (found.text[:at], found.link_sentence, found.text[at + len(found.link_sentence) :])
        if at >= 0
        else (found.text, "", "")
    )
    return Result(
        rank=rank,
        video_id=found.video_id,
        title=found.title,
        score=found.score,
        confidence=found.confidence,
        weak=found.confidence < min_confidence,
        time=found.link_time,
        mmss=mmss(found.link_time),
        chunk_mmss=f"{mmss(found.start)}-{mmss(found.stop)}",
        before=before,
        sentence=sentence,
        after=after,
        player=player(found.video_id, found.url, found.link_time, local),
    )
