"""Every PsTuts-VQA train+dev video through the real pipeline: alignment and all four asset checks hold on each.

The ingest (real SemanticChunker and model, real local Qdrant) runs once per module as one Dagster run over
the 65 partitions; the tests then read its check evaluations and its stored outputs.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from helpers import stored_points
from langchain_core.documents import Document

from pstuts_pipeline.chunking import validation
from pstuts_pipeline.chunking.transcripts import normalize_text
from pstuts_pipeline.cli.ingest import IngestReport, ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets.chunks import phrases_of, timed_chunk_of
from pstuts_pipeline.defs.checks import (
    chunk_times_ordered_and_bounded,
    chunks_fit_token_window,
    phrases_linked_exactly_once,
    points_match_chunks,
)
from pstuts_pipeline.defs.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.defs.io_managers import decode
from pstuts_pipeline.defs.resources import ChunkerResource, EmbeddingsResource, QdrantResource, resources_from_env

CHECKS = [phrases_linked_exactly_once, chunk_times_ordered_and_bounded, chunks_fit_token_window, points_match_chunks]


@dataclass
class Ingested:
    report: IngestReport
    evaluations: dict[str, dg.AssetCheckEvaluation]
    storage: Path

    def outputs(self, asset: str) -> dict[str, object]:
        folder = self.storage / "io" / asset
        return {path.stem: decode(path.read_text(encoding="utf-8"), str(path)) for path in folder.glob("*.json")}


@pytest.fixture(scope="module")
def all_pstuts(tmp_path_factory, pstuts_files) -> Ingested:
    root = tmp_path_factory.mktemp("all_pstuts")
    data, storage = root / "data", root / "storage"
    data.mkdir()
    for file in pstuts_files:  # linked, not copied: the data stays where it is licensed to be
        (data / file.name).symlink_to(file)
    (storage / "dagster_home").mkdir(parents=True)
    (storage / "dagster_home" / "dagster.yaml").write_text(DEFAULT_INSTANCE_YAML)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PSTUTS_STORAGE_DIR", str(storage))
        env.setenv("DAGSTER_HOME", str(storage / "dagster_home"))
        env.setenv("PSTUTS_DATA_DIR", str(data))
        with dg.DagsterInstance.get() as instance:
            report = ingest(build_definitions(resources_from_env()), instance)
            evaluations = {
                record.dagster_event.event_specific_data.check_name: record.dagster_event.event_specific_data
                for run_id in report.run_ids
                for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
            }
    return Ingested(report, evaluations, storage)


@pytest.mark.slow
def test_all_65_videos_ingest_in_one_run(all_pstuts, pstuts_catalog):
    report = all_pstuts.report
    assert report.ok and len(report.run_ids) == 1
    assert sorted(report.plan.to_ingest, key=int) == sorted(pstuts_catalog.videos, key=int)
    assert report.points_in_collection == report.chunks == len(stored_points(all_pstuts.storage))


@pytest.mark.slow
@pytest.mark.parametrize("check", [c.check_key.name for c in CHECKS])
def test_each_asset_check_passes_on_every_video(all_pstuts, check):
    evaluation = all_pstuts.evaluations[check]
    assert evaluation.metadata["videos_checked"].value == 65
    assert evaluation.metadata["videos_failing"].value == 0, evaluation.metadata["problems"].value
    assert evaluation.passed


@pytest.mark.slow
def test_every_phrase_is_linked_once_timed_and_within_the_window(all_pstuts, pstuts_catalog):
    """The checks' verdict, recomputed from the stored outputs and compared with the raw records."""
    phrase_docs: dict[str, list[Document]] = all_pstuts.outputs("phrase_documents")
    chunks_by_video: dict[str, list[Document]] = all_pstuts.outputs("timestamped_chunks")
    assert sorted(chunks_by_video) == sorted(pstuts_catalog.videos)
    embeddings = EmbeddingsResource()
    window, special = embeddings.window()
    for key, video in pstuts_catalog.videos.items():
        raw = video.phrases
        phrases = phrases_of(phrase_docs[key])
        chunks = [timed_chunk_of(d) for d in chunks_by_video[key]]
        assert [p.sent_id for p in phrases] == [r.sent_id for r in raw]
        assert [p.text for p in phrases] == [normalize_text(r.text) for r in raw]
        assert [s for c in chunks for s in c.sent_ids] == [r.sent_id for r in raw], f"video {key}"
        assert validation.linking_problems(phrases, chunks) == []
        assert validation.timing_problems(chunks) == []
        assert validation.window_problems(chunks, embeddings.count_tokens, window, special) == []
        for doc, chunk in zip(chunks_by_video[key], chunks, strict=True):
            assert doc.page_content == " ".join(p.text for p in chunk.phrases)
            assert (doc.metadata["start"], doc.metadata["stop"]) == (chunk.phrases[0].begin, chunk.phrases[-1].end)


def _chunk_doc(index: int, phrases: list[tuple[int, str, float, float]]) -> Document:
    text = " ".join(t for _, t, _, _ in phrases)
    spans, cursor = [], 0
    for _, t, _, _ in phrases:
        spans.append([cursor, cursor + len(t)])
        cursor += len(t) + 1
    return Document(
        page_content=text,
        metadata={
            "video_id": 1,
            "chunk_index": index,
            "start": phrases[0][2],
            "stop": phrases[-1][3],
            "sent_ids": [s for s, _, _, _ in phrases],
            "speech_start_stop_times": [[b, e] for _, _, b, e in phrases],
            "phrase_char_spans": spans,
        },
    )


def _phrase_docs(phrases: list[tuple[int, str, float, float]]) -> list[Document]:
    return [Document(page_content=t, metadata={"sent_id": s, "time_start": b, "time_end": e}) for s, t, b, e in phrases]


PHRASES = [(0, "Open the file.", 0.0, 2.0), (1, "Okay.", 2.0, 3.0), (2, "Now crop it.", 3.0, 5.0)]


def _linking(chunks: list[Document]):
    return phrases_linked_exactly_once(timestamped_chunks={"1": chunks}, phrase_documents={"1": _phrase_docs(PHRASES)})


def test_the_linking_check_fails_on_a_lost_doubled_or_rewritten_phrase():
    assert _linking([_chunk_doc(0, PHRASES[:2]), _chunk_doc(1, PHRASES[2:])]).passed
    lost = [_chunk_doc(0, PHRASES[:1]), _chunk_doc(1, PHRASES[2:])]
    doubled = [
        _chunk_doc(0, PHRASES[:2]),
        _chunk_doc(1, PHRASES[1:]),
    ]  # "Okay." at the end of one and start of the next
    rewritten = [_chunk_doc(0, PHRASES[:2]), _chunk_doc(1, PHRASES[2:])]
    rewritten[1].page_content = "Now crop it!"
    padded = [_chunk_doc(0, PHRASES[:2]), _chunk_doc(1, PHRASES[2:])]
    padded[1].page_content += " And more."
    for chunks in (lost, doubled, rewritten, padded):
        result = _linking(chunks)
        assert not result.passed and result.metadata["videos_failing"].value == 1


def test_the_timing_check_fails_on_a_chunk_going_backwards_or_a_wrong_span():
    backwards = {"1": [_chunk_doc(0, PHRASES[2:]), _chunk_doc(1, PHRASES[:2])]}
    result = chunk_times_ordered_and_bounded(timestamped_chunks=backwards)
    assert not result.passed and "before the previous chunk" in str(result.metadata["problems"].value)
    unset = [_chunk_doc(0, PHRASES[:2]), _chunk_doc(1, PHRASES[2:])]
    unset[1].metadata["stop"] = None
    result = chunk_times_ordered_and_bounded(timestamped_chunks={"1": unset})
    assert not result.passed and result.metadata["problems"].value == {
        "1": ["chunk 1: start/stop 3.0/None, not its phrases' span 3.0/5.0"]
    }


def test_the_window_check_fails_on_a_chunk_over_the_window():
    huge = [(i, "Click the layer and drag it.", float(i), i + 1.0) for i in range(60)]
    result = chunks_fit_token_window(
        timestamped_chunks={"1": [_chunk_doc(0, huge)]},
        embeddings=EmbeddingsResource(),
        chunker=ChunkerResource(),
    )
    assert not result.passed and "over the 256-token window" in str(result.metadata["problems"].value)


@pytest.mark.slow
def test_the_points_check_fails_when_a_video_lost_points_or_fields(all_pstuts, tmp_path):
    chunks = all_pstuts.outputs("timestamped_chunks")
    key = min(chunks, key=lambda k: len(chunks[k]))
    qdrant = QdrantResource(path=str(tmp_path / "qdrant"))
    shutil.copytree(all_pstuts.storage / "qdrant", tmp_path / "qdrant")
    assert points_match_chunks(timestamped_chunks={key: chunks[key]}, qdrant=qdrant).passed
    with qdrant.get_client() as client:
        first = stored_points(all_pstuts.storage)
        mine = [p for p in first if str(p["payload"]["metadata"]["video_id"]) == key]
        client.delete(qdrant.collection, points_selector=[mine[0]["id"]])
        payload = mine[1]["payload"]
        del payload["metadata"]["url"]
        client.overwrite_payload(qdrant.collection, payload=payload, points=[mine[1]["id"]])
    result = points_match_chunks(timestamped_chunks={key: chunks[key]}, qdrant=qdrant)
    problems = result.metadata["problems"].value[key]
    assert not result.passed
    assert problems[0] == f"{len(chunks[key]) - 1} points for {len(chunks[key])} chunks"
    assert problems[1] == f"point {mine[1]['id']}: missing ['url']"


def test_the_chunk_quality_benchmark_counts_each_flaw():
    from benchmarks.chunk_quality import ChunkRow, measure

    video = {"video_id": 7, "transcripts": [{"sent_id": i} for i in range(5)]}
    rows = [
        ChunkRow(7, "Okay. Open the file.", 0.0, 4.0, [0, 1]),
        ChunkRow(7, "Open the file. Crop it.", 2.0, 6.0, [1, 2]),  # phrase 1 twice, starts before the stop above
        ChunkRow(7, "word " * 300, 1.0, None, [3]),  # over the window, going backwards, without stop
    ]
    quality = measure(rows, [video], lambda text: len(text.split()), window=256, special=2)
    assert (quality.phrases_lost, quality.phrases_in_several_chunks) == (1, 1)
    assert (quality.chunks_without_times, quality.chunks_over_window) == (1, 1)
    assert (quality.chunk_starts_going_back, quality.videos_with_starts_going_back) == (1, 1)
    assert quality.chunks_overlapping_previous == 2
    assert quality.tokens == {"min": 6, "median": 7.0, "p90": 243.0, "max": 302}
