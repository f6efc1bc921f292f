"""The asset graph: ingestion stages, the Qdrant collection, and what is built on top of it."""

from pstuts_pipeline.defs.assets.answers import answer_evaluation
from pstuts_pipeline.defs.assets.chunks import (
    full_transcripts,
    kamradt_chunks,
    phrase_documents,
    raw_transcripts,
    timestamped_chunks,
)
from pstuts_pipeline.defs.assets.collection import qdrant_collection
from pstuts_pipeline.defs.assets.evaluation import retrieval_evaluation
from pstuts_pipeline.defs.assets.reranker import reranker
from pstuts_pipeline.defs.assets.tuning import tuned_embedder

ingestion_assets = [
    raw_transcripts,
    phrase_documents,
    full_transcripts,
    kamradt_chunks,
    timestamped_chunks,
    qdrant_collection,
]
INGESTION_ASSET_NAMES = [a.key.to_user_string() for a in ingestion_assets]
tuning_assets = [tuned_embedder, reranker]
evaluation_assets = [retrieval_evaluation, answer_evaluation]
