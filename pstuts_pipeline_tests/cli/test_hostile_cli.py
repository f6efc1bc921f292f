"""Issue 21, classes 5 to 8 at the command line: a missing, emptied or damaged store is said, not shown as "no
matches"; `ask` escapes what it prints and reads a read-only folder; a question in another encoding and a Qdrant
URL with a password are handled by name."""

import os
import re
import shutil
from pathlib import Path

import pytest
from qdrant_client import models

from pstuts_pipeline.answers.answering import Answer, Citation
from pstuts_pipeline.cli import project
from pstuts_pipeline.defs.resources import QdrantResource, QdrantUnavailableError
from pstuts_pipeline.search.edge_store import EdgeStore
from pstuts_pipeline_tests.support.helpers import run_main, small_collection
from pstuts_pipeline_tests.support.servers import free_port

COLLECTION = "pstuts_transcripts"


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    """A local Qdrant folder with the collection and one point, the CLI pointed at it."""
    folder = tmp_path / "qdrant"
    small_collection(folder)
    monkeypatch.setenv("PSTUTS_QDRANT_PATH", str(folder))
    monkeypatch.setattr(project, "definitions", project.definitions.__wrapped__)
    return folder


def _empty(folder: Path) -> None:
    store = EdgeStore(folder, COLLECTION, lock_timeout_s=5)
    store.delete(models.Filter())
    store.close()


@pytest.mark.parametrize("command", ["search", "ask"])
@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda folder: shutil.rmtree(folder), "does not exist yet: run `pstuts ingest` first"),
        (_empty, "is empty (its store may have been emptied or damaged): run `pstuts ingest --force`"),
        (lambda folder: shutil.rmtree(folder / COLLECTION), "does not exist yet: run `pstuts ingest` first"),
    ],
    ids=["missing", "emptied", "shard-folder-gone"],
)
def test_a_missing_empty_or_damaged_collection_is_said_with_a_non_zero_exit(
    store, monkeypatch, capsys, command, damage, said
):
    damage(store)
    code, out, err = run_main(monkeypatch, capsys, command, "How do I crop?")
    assert code == 1 and out == ""
    assert f"collection '{COLLECTION}' {said}" in err, err


def test_ask_reads_a_read_only_folder_like_search(store, monkeypatch, capsys):
    _empty(store)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == store else real_access(path, mode))
    before = sorted(p.name for p in store.parent.rglob("*"))
    code, _, err = run_main(monkeypatch, capsys, "ask", "How do I crop?")
    assert code == 1 and "is empty" in err  # reached the collection through the private copy
    assert sorted(p.name for p in store.parent.rglob("*")) == before


@pytest.mark.parametrize("command", ["search", "ask"])
def test_a_question_that_is_not_utf8_is_refused_by_name(monkeypatch, capsys, command):
    code, out, err = run_main(monkeypatch, capsys, command, "caf\udce9 crop")
    assert code == 2 and out == ""
    assert err.startswith("the question is not UTF-8 text (byte 3 cannot be read)")


def test_ask_escapes_the_answer_titles_and_links(store, monkeypatch, capsys):
    answer = Answer(
        question="q",
        answer="Use\x1b[2J crop.\nSecond line\u202e",
        citations=[Citation(1, "Title\n1. forged\x1b]8;;http://evil\x07link", 3.0, "javascript:alert(1)")],
        chunks=[],
        model=None,
        seconds=0.1,
    )

    class Chain:
        def invoke(self, question):
            return answer

    monkeypatch.setattr("pstuts_pipeline.answers.answering.answer_chain", lambda retriever, settings: Chain())
    monkeypatch.setattr("pstuts_pipeline.search.langchain_retriever.PstutsRetriever", lambda **kwargs: None)
    monkeypatch.setattr("pstuts_pipeline.defs.resources.EmbeddingsResource.query_embeddings", lambda self: None)
    code, out, _ = run_main(monkeypatch, capsys, "ask", "crop\x1b[5m?")
    assert code is None or code == 0
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    lines = out.splitlines()[1:]
    assert re.fullmatch(r"\(extractive, \d+\.\d s\)", lines[-1])  # the command's own seconds
    assert lines[:-1] == [
        "? crop\\x1b[5m?",
        "Use\\x1b[2J crop.",
        "Second line\\u202e",
        "  [00:03] Title\\n1. forged\\x1b]8;;http://evil\\x07link  (link not shown: javascript: scheme)",
        "  confidence that a moment answers this: 100%",
    ]


def test_a_qdrant_url_with_a_password_is_never_echoed():
    url = f"http://admin:pa55word@127.0.0.1:{free_port()}"
    with pytest.raises(QdrantUnavailableError) as refused:
        with QdrantResource(url=url, timeout_s=5).get_store() as store:
            store.exists()
    assert "pa55word" not in str(refused.value)
    assert str(refused.value).startswith(f"Qdrant server at {url.replace('admin:pa55word@', '')} (QDRANT_URL): ")
