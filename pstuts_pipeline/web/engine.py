"""What the page asks of the project: search and answer a question with the domain modules, shaped for the API.

The embedder (and the chat model's client) are made once per server process. A local store is kept open between
questions and let go whenever another process waits for it (`web/held_store.py`): Qdrant Edge holds a folder in one
process at a time, so `pstuts ingest` writes between questions (a question waits up to LOCK_TIMEOUT_S for a write
step to end). A server's client is opened per question.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from pstuts_pipeline.answers.answering import Answer, answer_documents, mmss
from pstuts_pipeline.answers.chat import ChatSettings, chat_model
from pstuts_pipeline.search import confidence, reranking, retrieval
from pstuts_pipeline.search.collection import CollectionUnavailable, require_points
from pstuts_pipeline.search.langchain_retriever import result_document
from pstuts_pipeline.web.held_store import HeldStore
from pstuts_pipeline.web.media import MediaIndex, player
from pstuts_pipeline.web.schemas import AskReply, Moment, Result, Status

if TYPE_CHECKING:
    from pstuts_pipeline.search.store import Store

StoreOpener = Callable[[], contextlib.AbstractContextManager["Store"]]
# How long a question waits for a local store that another process (an ingest) is writing.
LOCK_TIMEOUT_S = 10.0


@dataclass
class Engine:
    """The project's search and answers for one server process."""

    open_store: StoreOpener
    collection: str
    embeddings: Embeddings
    model_id: str
    chat: ChatSettings
    media: MediaIndex
    reranker: reranking.Reranker | None = None
    llm: BaseChatModel | None = None
    # What the engine holds beyond a question (the local store, kept open), let go when the server stops.
    on_close: Callable[[], None] | None = None
    # Under this a first result is "no good match" (PSTUTS_MIN_CONFIDENCE, read when the engine is made).
    min_confidence: float = field(default_factory=confidence.threshold)

    def __post_init__(self) -> None:
        if self.llm is None and self.chat.enabled:
            self.llm = chat_model(self.chat)

    @classmethod
    def from_resources(cls, resources: Mapping[str, Any]) -> Engine:
        """An engine on the resources `pstuts search` and `pstuts ask` use (settings.py's environment)."""
        embeddings, qdrant = resources["embeddings"], resources["qdrant"]

        from pstuts_pipeline.search.edge_store import others_waiting

        def open_store() -> contextlib.AbstractContextManager[Store]:
            return qdrant.get_store(read_only=True, lock_timeout_s=LOCK_TIMEOUT_S)

        held = None
        if not qdrant.server_url:
            folder = qdrant.local_path  # read once: the environment it comes from may change while the page runs
            held = HeldStore(open_store, lambda: others_waiting(folder, qdrant.collection))
        return cls(
            open_store=held.use if held else open_store,
            collection=qdrant.collection,
            embeddings=embeddings.query_embeddings(),
            model_id=embeddings.model_id,
            chat=resources["chat_model"].settings(),
            media=MediaIndex(resources["transcript_source"].path()),
            reranker=resources["reranker"].get(),
            on_close=held.close if held else None,
        )

    def close(self) -> None:
        """Let go of what the engine holds between questions."""
        if self.on_close:
            self.on_close()

    def warm_up(self) -> None:
        """Load the embedder now, so the first learner does not wait for it."""
        self.embeddings.embed_query("warm up")

    @contextlib.contextmanager
    def _opened(self) -> Iterator[Store]:
        from filelock import Timeout

        try:
            with self.open_store() as store:
                yield store
        except Timeout as error:
            # filelock's message names the lock file, so the operator can see which store is held.
            raise CollectionUnavailable(
                f"{error} another process (an ingest?) is writing the Qdrant store: ask again when it is done"
            ) from None

    def status(self) -> Status:
        """What the page says before a question: the collection's size and how answers are written."""
        try:
            with self._opened() as store:
                points, problem = require_points(store), None
        except CollectionUnavailable as error:
            points, problem = 0, str(error)
        return Status(
            collection=self.collection, points=points, answers=self.chat.model or "extractive", problem=problem
        )

    def ask(self, question: str, top_k: int) -> AskReply:
        """Search, let go of the store, then answer (chat model or extractive) citing only retrieved moments."""
        with self._opened() as store:
            require_points(store)
            found = retrieval.search(store, self.embeddings, self.model_id, question, top_k, reranker=self.reranker)
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
