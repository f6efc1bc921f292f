"""Answers with citations: parsing and checking moments, scoring, and the chain against a fake OpenAI-compatible server
that invents moments, fails, times out or refuses (the real local model is in test_answer_chain.py)."""

import re

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from pstuts_pipeline.answers import answering
from pstuts_pipeline.answers import metrics as answer_metrics
from pstuts_pipeline.answers.answering import Citation
from pstuts_pipeline.answers.chat import ChatSettings, redact
from pstuts_pipeline.search.evaluation import Question
from pstuts_pipeline_tests.support.servers import FakeChatServer

KEY = "sk-test-" + "a1b2c3d4e5f6g7h8"


def chunk(video_id: int, link_time: float, sentence: str, rest: str = "") -> Document:
    url = f"https://example.com/videos/{video_id}.mp4"
    return Document(
        page_content=f"{sentence} {rest}".strip(),
        metadata={
            "video_id": video_id,
            "title": f"Video {video_id}",
            "url": url,
            "link_time": link_time,
            "link": f"{url}#t={link_time:.1f}",
            "link_sentence": sentence,
        },
    )


DOCS = [
    chunk(4103, 81.25, "Press Command+T to open Free Transform.", "Then drag a corner handle."),
    chunk(4103, 15.5, "Go up to the Edit menu and choose Free Transform."),
    chunk(4150, 3725.0, "Free Transform also works on type layers."),
]


class FixedRetriever(BaseRetriever):
    """Always the same chunks: the chain's answering is under test here, not search."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self.documents


@pytest.fixture
def fake_server():
    server = FakeChatServer()
    yield server
    server.close()


def ask(server: FakeChatServer, json_schema: bool = False, timeout_s: float = 10, documents=DOCS) -> answering.Answer:
    settings = ChatSettings(
        model="fake-model",
        base_url=server.url,
        api_key=KEY,
        timeout_s=timeout_s,
        json_schema=json_schema,
        max_retries=0,
    )
    return answering.answer_chain(FixedRetriever(documents=documents), settings).invoke("How do I open Free Transform?")


def test_moments_and_links_are_found_however_they_are_written():
    found = answering.find_citations(
        "Press it [01:21], or see 0:15 and 1:02:05; https://example.com/videos/4103.mp4#t=81.2 too. Not 3.5 or 10:7."
    )
    assert [(url, seconds) for _, url, seconds in found] == [
        ("https://example.com/videos/4103.mp4", 81.2),
        (None, 81),
        (None, 15),
        (None, 3725),
    ]
    assert answering.find_citations("no moment here, version 2.1, ratio 16:9") == []


def test_only_retrieved_moments_are_kept_and_invented_ones_removed_and_counted():
    text = (
        "Press Command+T [01:21] (also [00:15]); not at [12:34] nor https://example.com/videos/4103.mp4#t=99.0 "
        "nor https://example.com/videos/9999.mp4#t=81.2, but at 1:02:05."
    )
    clean, cited, invented, proposed = answering.check_citations(text, ["01:21", "07:00"], DOCS)
    assert [c.time for c in cited] == [81.25, 15.5, 3725.0]
    assert (invented, proposed) == (4, 8)
    assert "12:34" not in clean and "#t=99.0" not in clean and "9999" not in clean and "07:00" not in clean
    assert "[01:21]" in clean and "[00:15]" in clean and "1:02:05" in clean
    # A link to a retrieved moment counts, as written with the link's own rounding.
    _, cited, invented, _ = answering.check_citations(f"See {DOCS[0].metadata['link']}", [], DOCS)
    assert cited == [Citation(4103, "Video 4103", 81.25, DOCS[0].metadata["link"])] and invented == 0


def test_no_model_configured_gives_the_best_results_sentence_with_its_moment():
    answer = answering.answer_chain(FixedRetriever(documents=DOCS), ChatSettings()).invoke("How?")
    assert answer.answer == "Press Command+T to open Free Transform. [01:21]"
    assert answer.model is None and answer.error is None and answer.chunks == DOCS
    assert answer.as_json()["citations"] == [
        {"video_id": 4103, "title": "Video 4103", "time": 81.25, "link": "https://example.com/videos/4103.mp4#t=81.2"}
    ]
    empty = answering.answer_chain(FixedRetriever(documents=[]), ChatSettings()).invoke("How?")
    assert empty.answer == answering.NO_MATCH and empty.citations == []


def test_an_invented_moment_from_the_model_is_removed_and_counted(fake_server):
    fake_server.reply("Press Command+T [12:34], as shown at [00:15].")
    answer = ask(fake_server)
    assert answer.answer == "Press Command+T, as shown at [00:15]."
    assert answer.invented_citations == 1 and answer.proposed_citations == 2
    assert [c.time for c in answer.citations] == [15.5] and answer.model == "fake-model"
    # The prompt gave every retrieved moment as [mm:ss] with its excerpt.
    prompt = fake_server.requests[0]["messages"][1]["content"]
    assert "[01:21] (Video 4103) Press Command+T" in prompt and "[62:05]" in prompt


def test_an_answer_citing_nothing_gets_the_top_results_moment(fake_server):
    fake_server.reply("Press Command+T at [99:00].")
    answer = ask(fake_server)
    assert answer.answer == "Press Command+T at."
    assert answer.citations == [answering.citation_of(DOCS[0])] and answer.invented_citations == 1 and answer.notes


def test_an_answer_of_nothing_but_invented_moments_falls_back_to_the_extractive_one(fake_server):
    fake_server.reply("[12:34]")
    answer = ask(fake_server)
    assert answer.answer == answering.extractive_answer("q", DOCS).answer and answer.model is None
    assert answer.invented_citations == 1 and "nothing but invented moments" in answer.error


def test_json_schema_restricts_the_moment_to_retrieved_ones_and_the_reply_is_checked(fake_server):
    fake_server.reply('{"answer": "Press Command+T.", "moment": "00:15"}')
    answer = ask(fake_server, json_schema=True)
    assert answer.answer == "Press Command+T." and [c.time for c in answer.citations] == [15.5]
    schema = fake_server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["moment"]["enum"] == ["01:21", "00:15", "62:05"]
    # A server that ignores the schema and invents a moment is still caught; a reply cut off keeps its answer.
    fake_server.reply('{"answer": "Press Command+T.", "moment": "45:00"}')
    assert ask(fake_server, json_schema=True).invented_citations == 1
    fake_server.reply('{"answer": "Press Command+T and then')
    assert ask(fake_server, json_schema=True).answer == "Press Command+T and then"


def test_a_server_without_json_schema_is_asked_again_for_text(fake_server):
    fake_server.reply(reject_response_format=True)
    fake_server.reply("Choose Edit, Free Transform [00:15].")
    answer = ask(fake_server, json_schema=True)
    assert answer.error is None and [c.time for c in answer.citations] == [15.5]
    assert "response_format" in fake_server.requests[0] and "response_format" not in fake_server.requests[1]


@pytest.mark.parametrize(
    "plan, expected",
    [
        ({"status": 500}, "HTTP 500"),
        ({"status": 401}, "refused the API key (HTTP 401)"),
        ({"content": "late", "delay": 3.0}, "no answer within 1 s"),
        ({"refusal": "I can't help with that."}, "refused to answer: I can't help with that."),
        ({"content": "   "}, "refused to answer: empty reply"),
    ],
)
def test_a_failed_chat_gives_one_line_naming_the_server_and_the_extractive_answer(fake_server, plan, expected):
    fake_server.reply(**plan)
    answer = ask(fake_server, timeout_s=1)
    assert answer.answer == answering.extractive_answer("q", DOCS).answer and answer.model is None
    assert expected in answer.error and fake_server.url in answer.error and "fake-model" in answer.error
    assert (
        "\n" not in answer.error and KEY not in answer.error and not re.search(r"Bearer (?!\[redacted\])", answer.error)
    )


def test_keys_are_redacted_from_server_messages():
    assert redact(f"bad key {KEY}") == "bad key [redacted]"
    assert redact("Authorization: Bearer abc.def-123 rejected") == "Authorization: Bearer [redacted] rejected"
    assert redact("token pstuts-secret-1 refused", key="pstuts-secret-1") == "token [redacted] refused"


def test_token_f1_and_exact_match_follow_squad_on_pstuts_answers():
    # Moments are not words of the answer: precision 2/3 ("press", "command", "t"), recall 1.
    assert answer_metrics.token_f1("Press Command+T [01:21]", "Command+T") == pytest.approx(0.8)
    assert answer_metrics.exact_match("the Command + T.", "Command+T") == 1.0
    assert answer_metrics.token_f1("Drag it", "Layers Panel#Opacity Slider") == 0.0
    slider = answer_metrics.token_f1("the opacity slider in the layers panel", "Layers Panel#Opacity Slider")
    assert slider == pytest.approx(8 / 9)


def test_answer_metrics_score_citations_within_15_seconds_of_the_answer():
    question = Question(video_id=4103, sent_id=8, text="How?", begin=70.0, midpoint=75.0, answer="Command+T")
    near = answering.extractive_answer("How?", DOCS)  # cites 81.25 s: within 15 s
    far = answering.extractive_answer("How?", DOCS[1:])  # cites 15.5 s
    invented = answering.Answer("How?", "Command+T", [], DOCS, "m", invented_citations=1, proposed_citations=2)
    metrics = answer_metrics.summarize([question] * 3, [near, far, invented], search_seconds=3.0)
    assert metrics["citation_link@1"] == pytest.approx(1 / 3)
    assert metrics["exact_match"] == pytest.approx(1 / 3)
    assert metrics["invented_citation_rate"] == pytest.approx(1 / 2)
    assert metrics["seconds_per_answer"] == pytest.approx(1.0)


def test_the_sample_is_fixed_and_in_file_order():
    questions = [Question(1, i, f"q{i}", 0.0, 0.0) for i in range(1000)]
    first, again = answer_metrics.sample_questions(questions, 200), answer_metrics.sample_questions(questions, 200)
    assert first == again and len(first) == 200 and first == sorted(first, key=lambda q: q.sent_id)
    assert answer_metrics.sample_questions(questions, 0) == questions
