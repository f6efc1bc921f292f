"""Search scored on QA pairs: the one path behind `pstuts evaluate`, the retrieval_evaluation asset and its
side-by-side comparison, so the CLI and the UI can never disagree on what a metric means."""

from collections.abc import Callable, Sequence

from langchain_core.embeddings import Embeddings

from pstuts_pipeline.search import evaluation, reranking, retrieval
from pstuts_pipeline.search.store import Store

BATCH = 128  # questions embedded and searched together: large enough to batch well, small enough to show progress


def score_search(
    store: Store,
    query_embeddings: Embeddings,
    model_id: str,
    questions: Sequence[evaluation.Question],
    top_k: int,
    reranker: reranking.Reranker | None = None,
    asked: Sequence[evaluation.Question] = (),
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> dict[str, float]:
    """Every question searched as `pstuts search` would, then judged: hit@k, link@k, video@k, mrr@10 (all and unambiguous).

    Searched in batches of BATCH questions (each question's results do not depend on the others in its batch), so
    `on_progress(done, total)` can follow them.
    """
    texts = [q.text for q in questions]
    ranked: list[list[retrieval.SearchResult]] = []
    on_progress(0, len(texts))
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        ranked += retrieval.search_many(store, query_embeddings, model_id, batch, top_k, reranker=reranker)
        on_progress(len(ranked), len(texts))
    return evaluation.evaluate(questions, ranked, asked=asked)
