"""Issue 21, class 4: cache entries are written atomically and checked when read; a damaged one is embedded
again with one warning line naming PSTUTS_EMBEDDING_CACHE_DIR, never used and never fatal."""

import errno
import logging
import os

import pytest

from pstuts_pipeline.embedding import EmbeddingSpec
from pstuts_pipeline.embedding.cache import cached
from pstuts_pipeline_tests.support.helpers import HashEmbeddings

TEXTS = ["open the layers panel", "choose free transform", "drag a corner handle"]


def cache(tmp_path, model):
    spec = EmbeddingSpec(provider="openai", model=f"hash-{id(model)}", base_url="http://127.0.0.1:1")
    return cached(spec, lambda: model, tmp_path / "cache")


def entries(tmp_path):
    return sorted((tmp_path / "cache").iterdir())


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b""),  # what a full disk left
        lambda path: path.write_bytes(path.read_bytes()[:-8]),  # torn
        lambda path: path.write_bytes(path.read_bytes()[:-1] + bytes([path.read_bytes()[-1] ^ 1])),  # right size
    ],
    ids=["empty", "torn", "altered"],
)
def test_a_damaged_entry_is_embedded_again_with_one_warning(tmp_path, caplog, damage):
    model = HashEmbeddings()
    embedder, counter = cache(tmp_path, model)
    expected = embedder.embed_documents(TEXTS)
    for path in entries(tmp_path)[:2]:
        damage(path)

    embedder, counter = cache(tmp_path, model)
    embedder.embed_documents(TEXTS)  # the in-process copy still holds them: nothing to notice
    from pstuts_pipeline.embedding import cache as cache_module

    cache_module._cache_store.cache_clear()
    embedder, counter = cache(tmp_path, model)
    with caplog.at_level(logging.WARNING):
        assert embedder.embed_documents(TEXTS) == expected
    assert counter.texts_embedded == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "(PSTUTS_EMBEDDING_CACHE_DIR) is damaged" in warnings[0]
    cache_module._cache_store.cache_clear()
    embedder, counter = cache(tmp_path, model)
    embedder.embed_documents(TEXTS)
    assert counter.texts_embedded == 0  # repaired on disk


def test_a_failed_write_leaves_no_entry_and_the_next_run_recovers(tmp_path, monkeypatch):
    model = HashEmbeddings()
    embedder, _ = cache(tmp_path, model)
    real_replace = os.replace

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        embedder.embed_documents(TEXTS)
    assert entries(tmp_path) == []  # no empty entry, no temporary file
    monkeypatch.setattr(os, "replace", real_replace)
    from pstuts_pipeline.embedding import cache as cache_module

    cache_module._cache_store.cache_clear()
    embedder, counter = cache(tmp_path, model)
    assert len(embedder.embed_documents(TEXTS)) == 3 and counter.texts_embedded == 3
    assert len(entries(tmp_path)) == 3
