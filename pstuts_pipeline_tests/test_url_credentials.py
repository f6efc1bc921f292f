"""Issue 21, class 7: credentials in OPENAI_BASE_URL and QDRANT_URL are never printed, stored or part of an id."""

import dagster as dg

from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.embedding import EmbeddingSpec
from pstuts_pipeline.embedding.cache import cache_namespace
from pstuts_pipeline.redaction import redact, strip_credentials


def test_credentials_are_stripped_and_plain_urls_kept_exactly():
    assert strip_credentials("http://user:pa55word@host:8000/v1") == "http://host:8000/v1"
    assert strip_credentials("https://token@host/v1") == "https://host/v1"
    for plain in ("http://127.0.0.1:7997", "https://api.example.com/v1/", "http://host/a@b"):
        assert strip_credentials(plain) == plain


def test_redact_blanks_credentials_in_any_url_of_a_message():
    text = "cannot reach http://user:pa55word@host/v1 and https://k@q:6333"
    assert redact(text) == "cannot reach http://[redacted]@host/v1 and https://[redacted]@q:6333"


def test_the_model_id_holds_no_credentials_and_is_unchanged_without_them():
    plain = EmbeddingSpec(provider="openai", model="m", base_url="http://127.0.0.1:7997")
    secret = EmbeddingSpec(provider="openai", model="m", base_url="http://user:pa55word@127.0.0.1:7997")
    assert plain.model_id == "openai:m@http://127.0.0.1:7997"  # as before: stored collections do not re-ingest
    assert secret.model_id == plain.model_id
    assert "pa55word" not in cache_namespace(secret)


def test_urls_with_credentials_reach_dagster_as_the_variable_name(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pa55word@host/v1")
    monkeypatch.setenv("QDRANT_URL", "http://admin:pa55word@qdrant:6333")
    resources = resources_from_env()
    assert isinstance(resources["embeddings"].openai_base_url, dg.EnvVar)
    assert isinstance(resources["qdrant"].url, dg.EnvVar)
    monkeypatch.setenv("QDRANT_URL", "http://qdrant:6333")
    assert resources_from_env()["qdrant"].url == "http://qdrant:6333"
