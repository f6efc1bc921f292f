"""The JSON API's shapes (and so its OpenAPI schema): every text field is data, for the page to show as text."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pstuts_pipeline.web.media import Player


class AskRequest(BaseModel):
    """A learner's question."""

    question: str = Field(max_length=1000, description="The question, with at least one letter or digit.")
    top_k: int = Field(default=3, ge=1, le=20, description="Chunks retrieved, shown and given to the chat model.")


class Moment(BaseModel):
    """A moment the answer cites: a retrieved chunk's linked sentence."""

    video_id: int
    title: str
    time: float = Field(description="Seconds from the video's start.")
    mmss: str
    player: Player


class Result(BaseModel):
    """A retrieved chunk: its text split around the linked sentence, which starts at `time`."""

    rank: int
    video_id: int
    title: str
    score: float = Field(description="The fused search score: for ranking, not a probability.")
    confidence: float = Field(description="How likely this chunk holds the answer, 0-1 (calibrated on PsTuts-VQA).")
    weak: bool = Field(description="Its confidence is under the server's min_confidence: a weak match.")
    time: float
    mmss: str
    chunk_mmss: str = Field(description="The chunk's span, mm:ss-mm:ss.")
    before: str
    sentence: str = Field(description="The linked sentence (empty when it could not be found in the chunk).")
    after: str
    player: Player


class AskReply(BaseModel):
    """The answer, the moments it cites (all retrieved), and the top results."""

    question: str
    answer: str
    answered: bool = Field(description="False: no retrieved moment answers well; the results are the nearest, weak.")
    confidence: float = Field(description="The first result's confidence, 0-1.")
    min_confidence: float = Field(description="The confidence under which a result counts as a weak match.")
    model: str | None = Field(description="The chat model that wrote the answer; null: extractive.")
    citations: list[Moment]
    results: list[Result]
    notes: list[str]
    invented_citations: int = Field(description="Moments the chat model wrote that were not retrieved (removed).")
    error: str | None = Field(description="Why the chat model's answer was replaced by the extractive one.")
    seconds: float = Field(description="Time spent answering, after search.")


class Status(BaseModel):
    """The collection the page searches and how answers are written."""

    collection: str
    points: int
    answers: str = Field(description="The chat model's name, or 'extractive'.")
    problem: str | None = Field(description="Why questions cannot be answered yet (e.g. nothing ingested).")


class Problem(BaseModel):
    """An error the page shows as is."""

    detail: str
