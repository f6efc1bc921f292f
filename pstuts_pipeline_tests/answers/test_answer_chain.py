"""`pstuts ask` end to end: real dev videos ingested by the pipeline, real search, and the real local chat model
(SmolLM2-135M-Instruct served by scripts/chat_server.sh), offline and through the CLI and the asset."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.answers import answering
from pstuts_pipeline.answers import metrics as answer_metrics
from pstuts_pipeline.answers.chat import ChatSettings
from pstuts_pipeline.defs.assets.answers import answer_evaluation
from pstuts_pipeline.defs.resources import ChatModelResource
from pstuts_pipeline.search.langchain_retriever import PstutsRetriever
from pstuts_pipeline_tests.support.servers import CHAT_MODEL, chat_server

pytestmark = pytest.mark.slow
QUESTIONS = 4
# These tests judge the answers themselves, so every question is answered; "no good match" is tested with the CLI
# (cli/test_cli.py), the page (web/test_serve.py) and measured in benchmarks/abstention.py.
ALWAYS_ANSWER = {"PSTUTS_MIN_CONFIDENCE": "0"}


@pytest.fixture(autouse=True)
def always_answer(monkeypatch) -> None:
    for name, value in ALWAYS_ANSWER.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module")
def chat_url(tmp_path_factory) -> Iterator[str]:
    """The local chat model on a free port, for this module's tests."""
    with chat_server(tmp_path_factory.mktemp("chat_server")) as url:
        yield url


def local_settings(url: str) -> ChatSettings:
    return ChatSettings(model=CHAT_MODEL, base_url=url, timeout_s=120, max_tokens=120)


def questions_of(searchable, n: int) -> list:
    """Questions spread over the videos, one per distinct text."""
    seen: dict[str, object] = {}
    for q in searchable["questions"][:: max(1, len(searchable["questions"]) // (4 * n))]:
        seen.setdefault(q.text, q)
    return list(seen.values())[:n]


def ask_cli(searchable, question: str, env: dict[str, str]) -> tuple[dict, str]:
    run = subprocess.run(
        [str(Path(sys.executable).parent / "pstuts"), "ask", question, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in {**os.environ, **searchable["env"], **ALWAYS_ANSWER, **env}.items() if v is not None},
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


@pytest.mark.server
def test_the_local_model_answers_citing_only_retrieved_moments(chat_url, searchable):
    embeddings, qdrant = searchable["resources"]["embeddings"], searchable["resources"]["qdrant"]
    with qdrant.get_store() as store:
        retriever = PstutsRetriever(
            store=store,
            embeddings=embeddings.query_embeddings(),
            model_id=embeddings.model_id,
            k=3,
        )
        chain = answering.answer_chain(retriever, local_settings(chat_url))
        answers = chain.batch([q.text for q in questions_of(searchable, QUESTIONS)])
    for answer in answers:
        assert answer.error is None and answer.model == CHAT_MODEL, answer.error
        assert answer.answer.strip() and len(answer.chunks) == 3
        retrieved = {(d.metadata["video_id"], d.metadata["link_time"]) for d in answer.chunks}
        assert answer.citations and {(c.video_id, c.time) for c in answer.citations} <= retrieved
        # Whatever moment is left in the words is one of the retrieved ones.
        _, cited, invented, _ = answering.check_citations(answer.answer, [], answer.chunks)
        assert invented == 0 and answer.proposed_citations >= answer.invented_citations


def test_pstuts_ask_without_a_model_answers_with_the_best_sentence_and_says_how_to_generate(searchable):
    question = questions_of(searchable, 1)[0].text
    answer, stderr = ask_cli(searchable, question, {"PSTUTS_CHAT_MODEL": None})
    assert answer["model"] is None and "PSTUTS_CHAT_MODEL" in stderr
    top = answer["chunks"][0]
    assert answer["answer"] == f"{top['link_sentence']} [{answering.mmss(top['link_time'])}]"
    assert answer["citations"] == [
        {"video_id": top["video_id"], "title": top["title"], "time": top["link_time"], "link": top["link"]}
    ]
    assert top["link"].endswith(f"#t={top['link_time']:.1f}") and len(answer["chunks"]) == 3


@pytest.mark.server
def test_pstuts_ask_with_the_local_model_prints_one_json_object(chat_url, searchable):
    question = questions_of(searchable, 1)[0].text
    answer, _ = ask_cli(searchable, question, {"PSTUTS_CHAT_MODEL": CHAT_MODEL, "PSTUTS_CHAT_BASE_URL": chat_url})
    assert answer["model"] == CHAT_MODEL and answer["error"] is None and answer["answer"].strip()
    links = {c["link"] for c in answer["chunks"]}
    assert answer["citations"] and all(c["link"] in links for c in answer["citations"])


@pytest.mark.server
def test_answer_evaluation_asset_records_model_and_extractive_figures(chat_url, searchable):
    resources = searchable["resources"]
    sample_size = 5
    result = dg.materialize(
        [answer_evaluation],
        resources={
            **{k: resources[k] for k in ("transcript_source", "embeddings", "qdrant")},
            "chat_model": ChatModelResource(model=CHAT_MODEL, base_url=chat_url, timeout_s=120),
        },
        instance=searchable["instance"],
        run_config={
            "ops": {
                "answer_evaluation": {"config": {"qa_files": [str(searchable["qa_file"])], "sample_size": sample_size}}
            }
        },
    )
    assert result.success
    metadata = result.asset_materializations_for_node("answer_evaluation")[0].metadata
    for name in ("token_f1", "exact_match", "citation_link@1", "invented_citation_rate", "seconds_per_answer"):
        for key in (name, f"extractive_{name}"):
            assert isinstance(metadata[key], dg.FloatMetadataValue) and metadata[key].value >= 0.0
    assert metadata["questions"].value == sample_size and metadata["chat_model"].value == CHAT_MODEL
    assert metadata["fallbacks"].value == 0 and metadata["seconds_per_answer"].value > 0

    # The extractive baseline is deterministic: the CLI's figures on the same sample are the asset's.
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "pstuts"),
            "evaluate",
            "--answers",
            "--qa",
            str(searchable["qa_file"]),
            "--sample",
            str(sample_size),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in {**os.environ, **searchable["env"], "PSTUTS_CHAT_MODEL": None}.items() if v is not None},
    )
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert list(figures) == ["extractive"]
    for name in ("token_f1", "citation_link@1"):
        assert figures["extractive"][name] == pytest.approx(metadata[f"extractive_{name}"].value, abs=1e-4)
    assert 0 < figures["extractive"]["answers"] == sample_size
    assert answer_metrics.SAMPLE_SIZE == 200
