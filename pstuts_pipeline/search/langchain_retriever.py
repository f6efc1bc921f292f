"""A LangChain retriever over the collection, so the timed chunks plug straight into a RAG chain."""

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from pstuts_pipeline.search import reranking, retrieval
from pstuts_pipeline.search.store import Store


def result_document(result: retrieval.SearchResult) -> Document:
    """A search result as a Document: the chunk as content, the moment to jump to in metadata."""
    metadata: dict[str, Any] = {k: v for k, v in result.as_json().items() if k != "text"}
    return Document(page_content=result.text, metadata=metadata)


class PstutsRetriever(BaseRetriever):
    """Hybrid search over a pstuts collection; each Document carries `link_time` and `link` to its best sentence.

    Open the store with `QdrantResource.get_store()` (Qdrant Edge holds a local folder in one process at a time) and
    keep the retriever within that block; over a server, LangChain's own `QdrantVectorStore(store.client, ...)`
    works too (dense search of the chunk vector, without this project's fusion and links).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Store
    embeddings: Embeddings
    model_id: str = Field(
        description="The id of `embeddings`, checked against the model the collection was built with."
    )
    k: int = Field(default=5, ge=1, description="Documents per question.")
    reranker: reranking.Reranker | None = Field(
        default=None, description="Rescores the best candidates (`RerankerResource.get()`); None: first stage only."
    )

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        results = retrieval.search(self.store, self.embeddings, self.model_id, query, self.k, self.reranker)
        return [result_document(r) for r in results]
