"""The embedding-provider seam: domain code without Dagster, providers found by name, and a provider's refusal
turned into a Dagster Failure (no retries) only at the resource boundary."""

import ast
from pathlib import Path

import dagster as dg
import pytest
from langchain_core.embeddings import Embeddings

from pstuts_pipeline import embedding
from pstuts_pipeline.defs.resources import EmbeddingsResource, ProviderRefusedFailure
from pstuts_pipeline.embedding.openai_compatible import OpenAICompatibleProvider

PACKAGE = Path(embedding.__file__).parent


def test_the_embedding_package_does_not_import_dagster():
    imported = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    assert "dagster" not in imported


def test_an_unknown_provider_names_the_setting_and_the_known_ones():
    with pytest.raises(ValueError, match=r"PSTUTS_EMBEDDING_PROVIDER is 'cohere'; expected 'local' or 'openai'"):
        embedding.load_embeddings(embedding.EmbeddingSpec(provider="cohere"))


class Refusing(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise embedding.ProviderRefusedError("openai embeddings provider at http://x: HTTP 400: bad request")

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class RefusingProvider(OpenAICompatibleProvider):
    name = "refusing"

    def load(self, spec: embedding.EmbeddingSpec, api_key: str | None = None) -> Embeddings:
        return Refusing()


def test_a_refusal_becomes_a_failure_without_retries_at_the_resource(monkeypatch):
    monkeypatch.setitem(embedding.PROVIDERS, RefusingProvider.name, RefusingProvider())
    resource = EmbeddingsResource(provider=RefusingProvider.name, cache_dir="")
    with pytest.raises(embedding.ProviderRefusedError):  # domain code raises the plain error
        embedding.load_embeddings(resource.spec).embed_query("crop")
    for call in (
        lambda: resource.query_embeddings().embed_query("crop"),
        lambda: resource.get_embeddings()[0].embed_documents(["crop"]),
    ):
        with pytest.raises(ProviderRefusedFailure) as refused:
            call()
        assert isinstance(refused.value, dg.Failure) and not refused.value.allow_retries
        assert str(refused.value) == "openai embeddings provider at http://x: HTTP 400: bad request"
        assert refused.value.__suppress_context__
