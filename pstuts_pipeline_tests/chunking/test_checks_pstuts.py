"""Every PsTuts-VQA train+dev video through the real pipeline: alignment and all four asset checks hold on each.

The ingest (real SemanticChunker and model, real local Qdrant) runs once per module as one Dagster run over
the 65 partitions; the tests then read its check evaluations and its stored outputs.
"""

from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from langchain_core.documents import Document
from qdrant_client import models

from pstuts_pipeline.chunking import validation
from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase
from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.cli.report import IngestReport
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets.chunks import phrases_of
from pstuts_pipeline.defs.checks import (
    chunk_times_ordered_and_bounded,
    chunks_fit_token_window,
    linking_problems,
    phrases_linked_exactly_once,
    points_match_chunks,
    points_problems,
    timing_problems,
)
from pstuts_pipeline.defs.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.defs.io_managers import decode
from pstuts_pipeline.defs.resources import EmbeddingsResource, QdrantResource, resources_from_env
from pstuts_pipeline.sources import normalize_text
from pstuts_pipeline_tests.support.helpers import copy_storage, stored_points

CHECKS = [phrases_linked_exactly_once, chunk_times_ordered_and_bounded, chunks_fit_token_window, points_match_chunks]


@dataclass
class Ingested:
    report: IngestReport
    evaluations: dict[str, list[dg.AssetCheckEvaluation]]
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
        env.setenv("PSTUTS_ALLOW_LINKS_OUTSIDE", "1")
        with dg.DagsterInstance.get() as instance:
            report = ingest(build_definitions(resources_from_env()), instance)
            evaluations: dict[str, list[dg.AssetCheckEvaluation]] = {}
            for run_id in report.run_ids:
                for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
                    evaluation = record.dagster_event.event_specific_data
                    evaluations.setdefault(evaluation.check_name, []).append(evaluation)
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
    evaluations = all_pstuts.evaluations[check]
    assert sorted(e.partition for e in evaluations) == sorted(all_pstuts.report.plan.to_ingest)
    failing = {e.partition: e.metadata["details"].value for e in evaluations if not e.passed}
    assert failing == {}
    assert all(e.metadata["video_id"].value == int(e.partition) for e in evaluations)


@pytest.mark.slow
def test_every_phrase_is_linked_once_timed_and_within_the_window(all_pstuts, pstuts_catalog):
    """The checks' verdict, recomputed from the stored outputs and compared with the raw records."""
    phrase_docs: dict[str, list[Document]] = all_pstuts.outputs("phrase_documents")
    chunks_by_video: dict[str, list[TimedChunk]] = all_pstuts.outputs("timestamped_chunks")
    assert sorted(chunks_by_video) == sorted(pstuts_catalog.videos)
    embeddings = EmbeddingsResource()
    window, special = embeddings.window()
    for key, video in pstuts_catalog.videos.items():
        raw = video.phrases
        phrases = phrases_of(phrase_docs[key])
        chunks = chunks_by_video[key]
        assert [p.sent_id for p in phrases] == [r.sent_id for r in raw]
        assert [p.text for p in phrases] == [normalize_text(r.text) for r in raw]
        assert [s for c in chunks for s in c.sent_ids] == [r.sent_id for r in raw], f"video {key}"
        assert validation.linking_problems(phrases, chunks) == []
        assert validation.timing_problems(chunks) == []
        assert validation.window_problems(chunks, embeddings.count_tokens, window, special) == []


def _chunk(index: int, phrases: list[tuple[int, str, float, float]]) -> TimedChunk:
    return TimedChunk(index, tuple(Phrase(*p) for p in phrases))


def _phrase_docs(phrases: list[tuple[int, str, float, float]]) -> list[Document]:
    return [Document(page_content=t, metadata={"sent_id": s, "time_start": b, "time_end": e}) for s, t, b, e in phrases]


PHRASES = [(0, "Open the file.", 0.0, 2.0), (1, "Okay.", 2.0, 3.0), (2, "Now crop it.", 3.0, 5.0)]


def _linking(chunks: list[TimedChunk]) -> list[str]:
    return linking_problems({"1": chunks}, {"1": _phrase_docs(PHRASES)})["1"]


def test_the_linking_check_fails_on_a_lost_or_doubled_phrase():
    assert _linking([_chunk(0, PHRASES[:2]), _chunk(1, PHRASES[2:])]) == []
    lost = [_chunk(0, PHRASES[:1]), _chunk(1, PHRASES[2:])]
    doubled = [_chunk(0, PHRASES[:2]), _chunk(1, PHRASES[1:])]  # "Okay." at the end of one and start of the next
    for chunks in (lost, doubled):
        assert _linking(chunks)


def test_the_timing_check_fails_on_a_chunk_going_backwards():
    backwards = {"1": [_chunk(0, PHRASES[2:]), _chunk(1, PHRASES[:2])]}
    assert "before the previous chunk" in str(timing_problems(backwards)["1"])


def test_the_window_check_fails_on_a_chunk_over_the_window():
    huge = [(i, "Click the layer and drag it.", float(i), i + 1.0) for i in range(60)]
    embeddings = EmbeddingsResource()
    window, special = embeddings.window()
    problems = validation.window_problems([_chunk(0, huge)], embeddings.count_tokens, window, special)
    assert "over the 256-token window" in str(problems)


def test_each_partition_of_a_range_run_gets_its_own_check_verdict(tmp_path):
    """A check over a range run of two videos reports each one, with only its own problems."""
    videos = dg.DynamicPartitionsDefinition(name="videos")

    @dg.asset(partitions_def=videos, backfill_policy=dg.BackfillPolicy.single_run())
    def chunks(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult()

    @dg.asset_check(asset=chunks, partitions_def=videos)
    def only_video_2_fails(context: dg.AssetCheckExecutionContext):
        from pstuts_pipeline.defs.checks import per_partition

        yield from per_partition(context, {"1": [], "2": ["chunk 0: broken"]})

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("videos", ["1", "2"])
        tags = {"dagster/asset_partition_range_start": "1", "dagster/asset_partition_range_end": "2"}
        dg.materialize([chunks], instance=instance, tags=tags)  # older materializations the verdicts must not name
        result = dg.materialize([chunks, only_video_2_fails], instance=instance, tags=tags, raise_on_error=False)
        found = {e.partition: (e.passed, e.metadata["details"].value) for e in result.get_asset_check_evaluations()}
        materialized: dict[str, int] = {}
        for record in instance.fetch_materializations(dg.AssetKey("chunks"), limit=10).records:  # newest first
            materialized.setdefault(record.partition_key, record.storage_id)
        targets = {e.partition: e.target_materialization_data.storage_id for e in result.get_asset_check_evaluations()}
    assert found == {"1": (True, []), "2": (False, ["chunk 0: broken"])}
    assert targets == materialized


@pytest.mark.slow
def test_the_points_check_fails_when_a_video_lost_points_or_fields(all_pstuts, tmp_path):
    chunks = all_pstuts.outputs("timestamped_chunks")
    key = min(chunks, key=lambda k: len(chunks[k]))
    qdrant = QdrantResource(path=str(tmp_path / "qdrant"))
    copy_storage(all_pstuts.storage / "qdrant", tmp_path / "qdrant")
    assert points_problems({key: chunks[key]}, qdrant) == {key: []}
    first = stored_points(all_pstuts.storage)
    with qdrant.get_store() as store:
        mine = [p for p in first if str(p["payload"]["metadata"]["video_id"]) == key]
        store.delete([mine[0]["id"]])
        payload = mine[1]["payload"]
        del payload["metadata"]["url"]
        [record] = store.retrieve([mine[1]["id"]], with_vectors=True)
        store.upsert([models.PointStruct(id=record.id, vector=record.vector, payload=payload)])
    problems = points_problems({key: chunks[key]}, qdrant)[key]
    assert problems[0] == f"{len(chunks[key]) - 1} points for {len(chunks[key])} chunks"
    assert problems[1] == f"point {mine[1]['id']}: missing ['url']"


def test_the_chunk_quality_benchmark_counts_each_flaw():
    from pstuts_pipeline_tests.support.chunk_quality import ChunkRow, measure

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
