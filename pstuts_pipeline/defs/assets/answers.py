"""Answer quality of the current collection and chat model, beside the extractive baseline, on a fixed sample."""

import dagster as dg
from pydantic import Field

from pstuts_pipeline.answers import SAMPLE_SEED, SAMPLE_SIZE, TOP_K
from pstuts_pipeline.defs.assets.chunks import TranscriptSource
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.assets.evaluation import EVALUATION_GROUP, load_qa, qa_paths
from pstuts_pipeline.defs.resources import ChatModelResource, EmbeddingsResource, QdrantResource
from pstuts_pipeline.redaction import strip_credentials


class AnswerEvaluationConfig(dg.Config):
    """Which questions to answer: a fixed sample of the QA files (by default the data folder's)."""

    qa_files: list[str] = Field(default_factory=list, description="PsTuts-VQA-format files (empty = the data folder).")
    sample_size: int = Field(default=SAMPLE_SIZE, description="Questions answered (0 = all).")
    seed: int = Field(default=SAMPLE_SEED, description="Seed of the fixed sample.")
    top_k: int = Field(default=TOP_K, ge=1, description="Chunks given to the chat model.")


def answer_metadata(
    extractive: dict[str, float], generated: dict[str, float] | None
) -> dict[str, dg.MetadataValue | float | int | str]:
    """The chat model's figures (or the extractive ones without a model) plus the extractive baseline, as numbers."""
    shown = generated or extractive
    metadata: dict[str, dg.MetadataValue | float | int | str] = {
        name: dg.MetadataValue.float(round(value, 4)) for name, value in shown.items() if name != "answers"
    }
    metadata.update(
        {
            f"extractive_{name}": dg.MetadataValue.float(round(value, 4))
            for name, value in extractive.items()
            if name != "answers"
        }
    )
    return metadata


@dg.asset(group_name=EVALUATION_GROUP, deps=[qdrant_collection], kinds={"qdrant", "openai"})
def answer_evaluation(
    context: dg.AssetExecutionContext,
    config: AnswerEvaluationConfig,
    transcript_source: TranscriptSource,
    embeddings: EmbeddingsResource,
    qdrant: QdrantResource,
    chat_model: ChatModelResource,
) -> dg.MaterializeResult:
    """Token F1, exact match, citation link@1, invented-citation rate and seconds per answer of `pstuts ask`."""
    from pstuts_pipeline.answers import metrics as answer_metrics  # 2 s of imports every definitions load would pay

    files = qa_paths(config.qa_files, transcript_source)
    questions = load_qa(files)
    sample = answer_metrics.sample_questions(questions, config.sample_size, config.seed)
    settings = chat_model.settings()
    with qdrant.get_store() as store:
        if not store.exists():
            raise dg.Failure(description=f"collection {qdrant.collection!r} does not exist: ingest first")
        extractive, generated, search_seconds = answer_metrics.answer_questions(
            store,
            embeddings.query_embeddings(),
            embeddings.model_id,
            sample,
            settings,
            config.top_k,
        )
    baseline = answer_metrics.summarize(sample, extractive, search_seconds)
    scored = answer_metrics.summarize(sample, generated, search_seconds) if generated is not None else None
    context.log.info(", ".join(f"{k}={v:.3f}" for k, v in (scored or baseline).items()))
    errors = [a.error for a in generated or [] if a.error]
    if errors:
        context.log.warning(f"{len(errors)} answers fell back to extractive; first: {errors[0]}")
    return dg.MaterializeResult(
        metadata={
            **answer_metadata(baseline, scored),
            "questions": len(sample),
            "questions_in_files": len(questions),
            "qa_files": dg.MetadataValue.json([str(f) for f in files]),
            "collection": qdrant.collection,
            "chat_model": settings.model or "none (extractive)",
            "chat_server": strip_credentials(settings.base_url or ("OpenAI" if settings.enabled else "none")),
        }
    )
