"""Search scored on QA pairs: the one path behind `pstuts evaluate`, the retrieval_evaluation asset and its
side-by-side comparison, so the CLI and the UI can never disagree on what a metric means."""

from collections.abc import Sequence

from langchain_core.embeddings import Embeddings
from qdrant_client import QdrantClient

from pstuts_pipeline.search import evaluation, reranking, retrieval


def score_search(
    client: QdrantClient,
    collection: str,
    query_embeddings: Embeddings,
    model_id: str,
    questions: Sequence[evaluation.Question],
    top_k: int,
    reranker: reranking.Reranker | None = None,
    asked: Sequence[evaluation.Question] = (),
) -> dict[str, float]:
    """Every question searched as `pstuts search` would, then judged: hit@k, link@k, video@k, mrr@10 (all and unambiguous)."""
    texts = [q.text for q in questions]
    ranked = retrieval.search_many(client, collection, query_embeddings, model_id, texts, top_k, reranker=reranker)
    return evaluation.evaluate(questions, ranked, asked=asked)
