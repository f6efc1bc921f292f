"""Answers in words with the video moments as citations, built on the retriever: a prompt of the top chunks with
their [mm:ss] moments, a chat model through ChatOpenAI, and citations checked against what was retrieved.

Without a chat model the answer is extractive: the linked sentence of the best result, with its moment.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel, RunnablePassthrough

from pstuts_pipeline.answers import extractive
from pstuts_pipeline.answers.chat import ChatError, ChatSettings, chat_model, describe_error, redact
from pstuts_pipeline.search import confidence
from pstuts_pipeline.search.retrieval import moment_link

# Characters of the chunk after its linked sentence that the prompt shows: a 135M model reads short excerpts best.
EXCERPT_CHARS = 240
SYSTEM_PROMPT = (
    "You answer questions about Photoshop video tutorials using only the excerpts given. Each excerpt starts "
    "with its moment in the video as [mm:ss]. Say how to do it in one or two sentences and cite the moment of "
    "the excerpt that says so, as [mm:ss]. Never cite a moment that is not in the excerpts."
)
JSON_PROMPT = (
    ' Reply in JSON: {"answer": how to do it, in one or two sentences, "moment": the [mm:ss] of the excerpt '
    "that says so}."
)
# Longest answer the JSON schema admits: the grammar then closes the string, and the moment still follows.
ANSWER_CHARS = 300
NO_MATCH = "No part of the collection matches this question."
# Moments as a model may write them: [01:21], 1:21, 1:02:03; and links to a moment: ...mp4#t=81.2
_LINK = re.compile(r"https?://[^\s\])>\"']+#t=(\d+(?:\.\d+)?)")
# A field of a JSON reply cut off at max_tokens: the string so far, even without its closing quote.
_JSON_FIELD = re.compile(r'"(answer|moment)"\s*:\s*"((?:[^"\\]|\\.)*)')
_MOMENT = re.compile(r"\[?(?<![\d:.])(?:(\d{1,2}):)?(\d{1,3}):([0-5]\d)(?![\d:])\]?")


@dataclass(frozen=True)
class Citation:
    """A moment of a retrieved chunk that the answer points to."""

    video_id: int
    title: str
    time: float
    link: str


@dataclass(frozen=True)
class Answer:
    """The answer, the moments it cites (all of them retrieved), the chunks it was given, and what was removed."""

    question: str
    answer: str
    citations: list[Citation]
    chunks: list[Document]
    model: str | None
    invented_citations: int = 0
    proposed_citations: int = 0
    error: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    # False: no retrieved moment answers well (`search.confidence`); `chunks` are then the nearest, weak matches.
    answered: bool = True
    confidence: float = 1.0  # the first chunk's

    def as_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "answered": self.answered,
            "confidence": self.confidence,
            "citations": [asdict(c) for c in self.citations],
            "chunks": [{"text": d.page_content, **d.metadata} for d in self.chunks],
            "model": self.model,
            "invented_citations": self.invented_citations,
            "error": self.error,
        }


def mmss(seconds: float) -> str:
    """A moment as the prompt and the answers write it."""
    return f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"


def citation_of(document: Document) -> Citation:
    """The moment a retrieved chunk links to."""
    meta = document.metadata
    return Citation(int(meta["video_id"]), meta["title"], float(meta["link_time"]), meta["link"])


def excerpt(document: Document) -> str:
    """The chunk's linked sentence and what follows it, cut at a word: where the answer most likely is."""
    text, sentence = document.page_content, document.metadata.get("link_sentence") or ""
    at = text.find(sentence) if sentence else -1
    tail = text[at:] if at >= 0 else text
    limit = max(len(sentence), EXCERPT_CHARS)
    return tail if len(tail) <= limit else tail[:limit].rsplit(" ", 1)[0] + " ..."


def prompt_messages(question: str, documents: list[Document], json_schema: bool) -> list[tuple[str, str]]:
    """System and user messages: the excerpts, each opened by its [mm:ss] moment and video title."""
    lines = [f"[{mmss(c.time)}] ({c.title}) {excerpt(d)}" for d, c in zip(documents, map(citation_of, documents))]
    user = "Excerpts:\n" + "\n".join(lines) + f"\n\nQuestion: {question}"
    return [("system", SYSTEM_PROMPT + (JSON_PROMPT if json_schema else "")), ("human", user)]


def response_schema(documents: list[Document]) -> dict[str, Any]:
    """A JSON schema whose moment can only be one of the retrieved ones (servers that honour it cannot invent)."""
    moments = list(dict.fromkeys(mmss(citation_of(d).time) for d in documents))
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "maxLength": ANSWER_CHARS},
            "moment": {"type": "string", "enum": moments},
        },
        "required": ["answer", "moment"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "cited_answer", "strict": True, "schema": schema}}


def find_citations(text: str) -> list[tuple[str, str | None, float]]:
    """Every link and moment written in a text: (the matched text, the link's video URL or None, seconds)."""
    found: list[tuple[str, str | None, float]] = []
    for match in _LINK.finditer(text):
        found.append((match.group(0), match.group(0).split("#")[0], float(match.group(1))))
    for match in _MOMENT.finditer(_LINK.sub(" ", text)):
        hours, minutes, seconds = match.groups()
        found.append((match.group(0), None, int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds)))
    return found


def _retrieved(url: str | None, seconds: float, allowed: list[Citation]) -> Citation | None:
    for c in allowed:
        if url is None and int(seconds) == int(c.time):
            return c
        if url is not None and f"{url}#t={seconds:.1f}" == c.link:
            return c
    return None


def check_citations(
    text: str, proposed_moments: list[str], documents: list[Document]
) -> tuple[str, list[Citation], int, int]:
    """(text without invented moments or links, the retrieved moments cited, invented count, proposed count).

    A cited moment must be one a retrieved chunk links to; anything else is removed from the text and counted.
    """
    allowed = [citation_of(d) for d in documents]
    cited: list[Citation] = []
    invented = proposed = 0
    candidates = find_citations(text) + [c for m in proposed_moments for c in find_citations(m)]
    for written, url, seconds in candidates:
        proposed += 1
        match = _retrieved(url, seconds, allowed)
        if match is None:
            invented += 1
            text = text.replace(written, "")
        elif match not in cited:
            cited.append(match)
    return " ".join(text.split()).replace(" .", ".").replace(" ,", ","), cited, invented, proposed


def extractive_answer(question: str, documents: list[Document], error: str | None = None) -> Answer:
    """The linked sentence of the best result with its moment: the offline answer and the fallback."""
    if not documents:
        return Answer(question, NO_MATCH, [], [], None, error=error)
    phrases = [d.metadata.get("phrases") or [] for d in documents]
    text, time, rank = extractive.choose(question, phrases, [d.metadata.get("link_sentence") or "" for d in documents])
    if not text:  # chunks without their phrases (a result of an older search): the linked sentence
        top = citation_of(documents[0])
        sentence = documents[0].metadata.get("link_sentence") or excerpt(documents[0])
        return Answer(question, f"{sentence} [{mmss(top.time)}]", [top], documents, None, error=error)
    meta = documents[rank].metadata
    cited = Citation(int(meta["video_id"]), meta["title"], float(time), moment_link(meta.get("url") or "", time))
    return Answer(question, f"{text} [{mmss(time)}]", [cited], documents, None, error=error)


def _json_string(body: str) -> str:
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError:
        return body


def _parse(content: str, json_schema: bool) -> tuple[str, list[str]]:
    """(answer text, moments given apart from it) of a reply; JSON cut off at max_tokens keeps what it has.

    A reply that is not the asked-for JSON is taken as text.
    """
    if not json_schema:
        return content, []
    try:
        reply = json.loads(content)
    except json.JSONDecodeError:
        reply = {k: _json_string(v) for k, v in _JSON_FIELD.findall(content)}
    if not isinstance(reply, dict) or not isinstance(reply.get("answer"), str):
        return content, []
    moment = reply.get("moment")
    return reply["answer"], [moment] if isinstance(moment, str) and moment else []


def generated_answer(question: str, documents: list[Document], llm: BaseChatModel, settings: ChatSettings) -> Answer:
    """Ask the chat model, then keep only citations of retrieved moments; any failure gives the extractive answer."""
    import openai

    if not documents:
        return extractive_answer(question, documents)
    json_schema = settings.json_schema
    try:
        try:
            # Sent as is (extra_body): langchain-openai's own response_format path fails on a reply cut at max_tokens.
            bound = llm.bind(extra_body={"response_format": response_schema(documents)}) if json_schema else llm
            message = bound.invoke(prompt_messages(question, documents, json_schema))
        except openai.BadRequestError:
            if not json_schema:
                raise
            json_schema = False  # the server does not take a JSON schema: ask for plain text once
            message = llm.invoke(prompt_messages(question, documents, json_schema))
        refusal = message.additional_kwargs.get("refusal")
        # A reply that quotes the request (some servers echo headers) must not carry the key to a learner's page.
        content = redact(message.content, settings.api_key) if isinstance(message.content, str) else ""
        if refusal or not content.strip():
            raise ChatError(f"{settings.where}: refused to answer: {refusal or 'empty reply'}")
    except (openai.OpenAIError, ChatError) as error:
        return extractive_answer(question, documents, error=str(describe_error(error, settings)))
    text, moments = _parse(content, json_schema)
    clean, cited, invented, proposed = check_citations(text, moments, documents)
    if not clean:
        failure = f"{settings.where}: the answer held nothing but invented moments"
        return replace(
            extractive_answer(question, documents, failure), invented_citations=invented, proposed_citations=proposed
        )
    notes = [] if cited else ["the answer cited no retrieved moment: the top result's is attached"]
    return Answer(
        question,
        clean,
        cited or [citation_of(documents[0])],
        documents,
        settings.model,
        invented_citations=invented,
        proposed_citations=proposed,
        notes=notes,
    )


def first_confidence(documents: list[Document]) -> float:
    """The first chunk's confidence; chunks from a search that gives none count as confident (as before)."""
    return float(documents[0].metadata.get("confidence", 1.0)) if documents else 0.0


def no_good_match(question: str, documents: list[Document]) -> Answer:
    """No moment answers well: say so, and keep the chunks as the nearest, weak matches (no chat model is asked)."""
    return Answer(
        question, confidence.NO_GOOD_MATCH, [], documents, None, answered=False, confidence=first_confidence(documents)
    )


def answer_documents(
    question: str,
    documents: list[Document],
    model: BaseChatModel | None,
    settings: ChatSettings,
    min_confidence: float | None = None,
) -> Answer:
    """The answer to a question from chunks already retrieved (timed): callers that must let go of the store first.

    Under `min_confidence` (default: PSTUTS_MIN_CONFIDENCE) for the first chunk, the answer is "no good match".
    """
    started = time.perf_counter()
    threshold = confidence.threshold() if min_confidence is None else min_confidence
    if documents and first_confidence(documents) < threshold:
        return replace(no_good_match(question, documents), seconds=time.perf_counter() - started)
    if model is None:
        result = extractive_answer(question, documents)
    else:
        result = generated_answer(question, documents, model, settings)
    return replace(
        result, seconds=time.perf_counter() - started, confidence=first_confidence(documents), answered=bool(documents)
    )


def answer_chain(retriever: BaseRetriever, settings: ChatSettings, llm: BaseChatModel | None = None) -> Runnable:
    """question -> Answer: retrieve, then answer with the chat model if one is configured, else extractively."""
    model = llm if llm is not None else (chat_model(settings) if settings.enabled else None)

    def answer(inputs: dict[str, Any]) -> Answer:
        return answer_documents(inputs["question"], inputs["documents"], model, settings)

    return RunnableParallel(question=RunnablePassthrough(), documents=retriever) | RunnableLambda(answer, name="answer")
