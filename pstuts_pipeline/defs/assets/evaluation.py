"""Retrieval quality of the current collection, recorded on every materialization so the UI can plot it."""

import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import pandas as pd
from pydantic import Field

from pstuts_pipeline.defs.assets.chunks import Metadata, TranscriptSource
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.resources import EmbeddingsResource, QdrantResource, RerankerResource
from pstuts_pipeline.search import evaluation, reranking
from pstuts_pipeline.search.scoring import score_search
from pstuts_pipeline.search.store import Store

EVALUATION_GROUP = "evaluation"


class RetrievalEvaluationConfig(dg.Config):
    """Which questions to ask; by default every QA pair in the data folder."""

    qa_files: list[str] = Field(
        default_factory=list, description="PsTuts-VQA-format files whose questions are asked (empty = the data folder)."
    )
    top_k: int = Field(default=max(evaluation.KS), description="Results per question (at least the largest k).")
    compare_collection: str = Field(
        default="", description="Also score this collection, built with compare_model, side by side (base vs tuned)."
    )
    compare_model: str = Field(
        default="", description="The model compare_collection was built with: a folder, 'latest', or empty = bundled."
    )


def qa_paths(qa_files: list[str], source: TranscriptSource) -> list[Path]:
    """The configured QA files, or every JSON file of the data folder."""
    if qa_files:
        return [Path(f) for f in qa_files]
    return sorted(source.path().glob("*.json"))


def load_qa(files: list[Path]) -> list[evaluation.Question]:
    """The files' questions, or a Failure naming the files (not retried: a bad file stays bad)."""
    try:
        questions = evaluation.load_questions(files)
    except (ValueError, OSError) as exc:
        raise dg.Failure(description=f"QA files {[str(f) for f in files]}: {exc}", allow_retries=False) from exc
    if not questions:
        raise dg.Failure(description=f"no QA pairs in {[str(f) for f in files]}", allow_retries=False)
    return questions


@dg.asset(group_name=EVALUATION_GROUP, deps=[qdrant_collection], kinds={"qdrant"})
def retrieval_evaluation(
    context: dg.AssetExecutionContext,
    config: RetrievalEvaluationConfig,
    transcript_source: TranscriptSource,
    embeddings: EmbeddingsResource,
    qdrant: QdrantResource,
    reranker: RerankerResource,
) -> dg.MaterializeResult:
    """hit@k, link@k, video@k and mrr@10 of `pstuts search` on PsTuts-VQA questions against the collection as it is now.

    Each metric is also reported on the questions asked of one video only (`unambiguous_*`): a question asked of
    several videos in the data folder has no single right video.
    """
    files = qa_paths(config.qa_files, transcript_source)
    questions = load_qa(files)
    asked = evaluation.folder_questions(transcript_source.path())
    started = time.perf_counter()
    with qdrant.get_store() as store:
        if not store.exists():
            raise dg.Failure(description=f"collection {qdrant.collection!r} does not exist: ingest first")
        metrics = score_search(
            store,
            embeddings.query_embeddings(),
            embeddings.model_id,
            questions,
            max(config.top_k, max(evaluation.KS)),
            reranker=reranker.get(),
            asked=asked,
        )
    seconds = time.perf_counter() - started
    compared: dict[str, Metadata] = {}
    if config.compare_collection:
        with qdrant.get_store(collection=config.compare_collection) as compared_store:
            compared = side_by_side(
                compared_store,
                config.compare_model,
                embeddings,
                questions,
                metrics,
                max(config.top_k, max(evaluation.KS)),
                reranker.get(),
                asked,
            )
    context.log.info(", ".join(f"{k}={v:.3f}" for k, v in metrics.items()))
    subset = evaluation.UNAMBIGUOUS
    table = pd.DataFrame(
        {
            "k": list(evaluation.KS),
            "hit": [metrics[f"hit@{k}"] for k in evaluation.KS],
            "link": [metrics[f"link@{k}"] for k in evaluation.KS],
            f"hit ({subset})": [metrics[f"{subset}_hit@{k}"] for k in evaluation.KS],
            f"link ({subset})": [metrics[f"{subset}_link@{k}"] for k in evaluation.KS],
        }
    )
    return dg.MaterializeResult(
        metadata={
            **{
                name: dg.MetadataValue.float(round(value, 4))
                for name, value in metrics.items()
                if "questions" not in name
            },
            "questions": len(questions),
            f"{subset}_questions": int(metrics[f"{subset}_questions"]),
            "reranker": reranker.model or "none",
            "videos_asked_about": len({q.video_id for q in questions}),
            "qa_files": dg.MetadataValue.json([str(f) for f in files]),
            "collection": qdrant.collection,
            "embedding_model": embeddings.model_id,
            "search_seconds": round(seconds, 2),
            "by_k": dg.MetadataValue.md(table.round(4).to_markdown(index=False)),
            **compared,
        }
    )


def side_by_side(
    store: Store,
    model: str,
    embeddings: EmbeddingsResource,
    questions: Sequence[evaluation.Question],
    metrics: dict[str, float],
    top_k: int,
    reranker: reranking.Reranker | None = None,
    asked: Sequence[evaluation.Question] = (),
) -> dict[str, Metadata]:
    """Score another collection, built with another model (e.g. base vs tuned), on the same questions.

    `model` is a folder, `latest`, or empty for the bundled model; `metrics` are this run's, and the
    `vs_compared_*` values are this run's minus the other's.
    """
    model_id = embeddings.spec_for(model).model_id
    other = score_search(store, embeddings.query_embeddings(model), model_id, questions, top_k, reranker, asked)
    names = [name for name in metrics if "@" in name]
    frame = pd.DataFrame(
        {"this": [metrics[n] for n in names], "compared": [other[n] for n in names]}, index=names
    ).assign(**{"this - compared": lambda f: f["this"] - f["compared"]})
    return {
        "compared_collection": store.collection,
        "compared_model": model_id,
        **{f"compared_{n}": dg.MetadataValue.float(round(other[n], 4)) for n in names},
        **{f"vs_compared_{n}": dg.MetadataValue.float(round(metrics[n] - other[n], 4)) for n in names},
        "side_by_side": dg.MetadataValue.md(frame.round(4).to_markdown()),
    }
