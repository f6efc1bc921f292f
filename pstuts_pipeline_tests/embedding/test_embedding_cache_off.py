"""With the embedding cache off (PSTUTS_EMBEDDING_CACHE_DIR=""), every text still reaches the model once in a run:
the chunker's windows, embedded in one batch for all videos, are not embedded again video by video, and the
phrases and chunks the collection step embeds next reuse the chunker's vectors."""

import uuid

import dagster as dg
import pytest
from langchain_core.documents import Document

from pstuts_pipeline import embedding
from pstuts_pipeline.chunking import chunker as chunking
from pstuts_pipeline.defs.assets.chunks import kamradt_chunks
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource
from pstuts_pipeline.embedding.local import LocalProvider
from pstuts_pipeline_tests.support.helpers import HashEmbeddings

PHRASES = {
    "9001": ["Open the image.", "Choose the crop tool.", "Drag the handles.", "Press enter to crop.", "Save it."],
    "9002": ["Open the image.", "Pick the healing brush.", "Paint over the blemish.", "Save it."],
}


class CountedProvider(LocalProvider):
    """The local provider's names, window and tokenizer, with a fast fake model that records every call."""

    name = "counted"

    def __init__(self, model: HashEmbeddings):
        self.model = model
        # Its own id per test: the in-memory cache is keyed by model id and outlives a test. Not id(model): the id of
        # a collected object is reused, so a later test could be served the vectors an earlier one cached.
        self.unique = uuid.uuid4().hex

    def model_id(self, spec: embedding.EmbeddingSpec) -> str:
        return f"counted:{self.unique}"

    def load(self, spec: embedding.EmbeddingSpec, api_key: str | None = None) -> HashEmbeddings:
        return self.model


@pytest.fixture
def model(monkeypatch) -> HashEmbeddings:
    fake = HashEmbeddings()
    monkeypatch.setitem(embedding.PROVIDERS, CountedProvider.name, CountedProvider(fake))
    return fake


@pytest.mark.parametrize("buffer_size", [0, 1])
def test_without_a_cache_each_chunker_window_reaches_the_model_once(model, buffer_size):
    full_transcripts = {
        key: Document(page_content=chunking.PHRASE_SEPARATOR.join(lines), metadata={"video_id": int(key)})
        for key, lines in PHRASES.items()
    }
    windows = {w for lines in PHRASES.values() for w in chunking.chunker_windows(lines, buffer_size)}
    embeddings = EmbeddingsResource(provider=CountedProvider.name, cache_dir="")
    assert embeddings.cache_path() is None

    context = dg.build_asset_context(partition_key="9001")
    result = kamradt_chunks(
        context,
        full_transcripts=full_transcripts,
        embeddings=embeddings,
        chunker=ChunkerResource(buffer_size=buffer_size),
    )

    assert set(result) == set(PHRASES) and all(result.values())
    assert sum(model.calls) == len(windows)  # the same window of two videos counts once, too
    metadata = context.get_output_metadata("result")
    assert metadata["windows_embedded"] == len(windows)

    # What qdrant_collection embeds next in the same run: each chunk whole, and each bare phrase.
    chunks = [d.page_content for docs in result.values() for d in docs]
    phrases = [p for lines in PHRASES.values() for p in lines]
    collection_model, counter = embeddings.get_embeddings()
    collection_model.embed_documents(chunks + phrases)
    assert sum(model.calls) == len(windows | set(chunks) | set(phrases))
    assert counter.texts_embedded == len((set(chunks) | set(phrases)) - windows)
