"""The ingestion pipeline end to end: definitions, each asset on a real video, materialization into Qdrant."""

import json
from pathlib import Path

import dagster as dg
import pytest
from langchain_core.documents import Document
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline.defs.assets.chunks import (
    full_transcripts,
    kamradt_chunks,
    phrase_documents,
    raw_transcripts,
    timestamped_chunks,
)
from pstuts_pipeline.defs.instance import RunTags
from pstuts_pipeline.defs.resources import (
    ChunkerResource,
    EmbeddingsResource,
    QdrantResource,
    TranscriptSource,
    resources_from_env,
)
from pstuts_pipeline.search import vectorstore
from pstuts_pipeline.search.client_store import ClientStore
from pstuts_pipeline.search.edge_store import EdgeStore
from pstuts_pipeline.search.migration import copy_collection
from pstuts_pipeline.sources.pstuts_json import video_of

FEW_VIDEOS = 3


@pytest.fixture(scope="module")
def few_real_videos(tmp_path_factory, pstuts_files) -> tuple[Path, list[dict]]:
    """A data folder holding the three shortest dev videos, as a user would drop them in."""
    videos = json.loads(pstuts_files[1].read_text())
    chosen = sorted(videos, key=lambda v: len(v["transcripts"]))[:FEW_VIDEOS]
    folder = tmp_path_factory.mktemp("data")
    (folder / "dev_subset.json").write_text(json.dumps(chosen))
    return folder, chosen


def test_definitions_load_with_the_six_assets():
    defs = build_definitions()
    keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
    assert set(INGESTION_ASSET_NAMES) <= keys
    assert INGESTION_ASSET_NAMES == [
        "raw_transcripts",
        "phrase_documents",
        "full_transcripts",
        "kamradt_chunks",
        "timestamped_chunks",
        "qdrant_collection",
    ]
    job = defs.resolve_job_def("ingest_videos")
    assert job.partitions_def.name == "videos"
    assert defs.resolve_sensor_def("transcript_folder_sensor")
    assert defs.resolve_schedule_def("nightly_reingest")


@pytest.mark.slow
def test_each_asset_on_a_real_video(few_real_videos):
    folder, chosen = few_real_videos
    video = chosen[0]
    key = str(video["video_id"])
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("videos", [key])
    context = lambda: dg.build_asset_context(partition_key=key, instance=instance)

    raw = raw_transcripts(context(), transcript_source=TranscriptSource(data_dir=str(folder)), run_tags=RunTags())
    assert raw[key] == video_of(video, str(folder / "dev_subset.json"))
    assert len(raw[key].content_hash) == 64

    phrases = phrase_documents(context(), raw_transcripts=raw)[key]
    assert [d.metadata["sent_id"] for d in phrases] == [p["sent_id"] for p in video["transcripts"]]
    assert all(d.metadata["time_start"] <= d.metadata["time_end"] for d in phrases)
    assert phrases[0].metadata["title"] == video["title"] and phrases[0].metadata["url"] == video["url"]

    full = full_transcripts(context(), phrase_documents={key: phrases})[key]
    assert full.page_content == "\n".join(p["sent"].strip() for p in video["transcripts"])

    embeddings = EmbeddingsResource(cache_dir="")
    chunker = ChunkerResource()
    kamradt = kamradt_chunks(context(), full_transcripts={key: full}, embeddings=embeddings, chunker=chunker)[key]
    assert kamradt and all(isinstance(c, Document) for c in kamradt)

    timed = timestamped_chunks(
        context(),
        phrase_documents={key: phrases},
        kamradt_chunks={key: kamradt},
        embeddings=embeddings,
        chunker=chunker,
    )[key]
    linked = [s for c in timed for s in c.sent_ids]
    assert linked == [p["sent_id"] for p in video["transcripts"]]
    for chunk in timed:
        assert chunk.text == " ".join(d.page_content for d in phrases if d.metadata["sent_id"] in chunk.sent_ids)
        assert embeddings.count_tokens(chunk.text) + 2 <= 256


def _payloads(path: Path, collection: str) -> list[dict]:
    store = EdgeStore(path, collection, lock_timeout_s=60)
    try:
        points, _ = store.scroll(limit=10_000, with_payload=True)
        return [{"id": p.id, **p.payload} for p in points]
    finally:
        store.close()


@pytest.mark.slow
def test_materializing_real_videos_fills_qdrant_idempotently(few_real_videos, storage, instance, monkeypatch):
    folder, chosen = few_real_videos
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(folder))
    defs = build_definitions(resources_from_env())

    first = ingest(defs, instance)
    assert first.ok and sorted(first.plan.to_ingest) == sorted(str(v["video_id"]) for v in chosen)
    assert first.points_in_collection == first.chunks > 0

    qdrant_path = storage / "qdrant"
    payloads = _payloads(qdrant_path, "pstuts_transcripts")
    assert len(payloads) == first.chunks
    by_video = {v["video_id"]: v for v in chosen}
    for payload in payloads:
        meta = payload["metadata"]
        assert set(vectorstore.PAYLOAD_FIELDS) <= set(meta)
        video = by_video[meta["video_id"]]
        assert (meta["title"], meta["desc"], meta["url"]) == (video["title"], video["desc"], video["url"])
        assert payload["id"] == vectorstore.point_id(meta["video_id"], meta["chunk_index"])
        assert meta["start"] <= meta["stop"]
        assert len(meta["sent_ids"]) == len(meta["speech_start_stop_times"])
        texts = {p["sent_id"]: p["sent"].strip() for p in video["transcripts"]}
        assert payload["page_content"] == " ".join(texts[s] for s in meta["sent_ids"])
    for video in chosen:
        linked = sorted(
            s for p in payloads if p["metadata"]["video_id"] == video["video_id"] for s in p["metadata"]["sent_ids"]
        )
        assert linked == [p["sent_id"] for p in video["transcripts"]]

    # Every run recorded passing checks in the instance.
    checks = instance.get_latest_asset_check_evaluation_record
    for check in ("phrases_linked_exactly_once", "chunk_times_ordered_and_bounded", "chunks_fit_token_window"):
        record = checks(dg.AssetCheckKey(dg.AssetKey("timestamped_chunks"), check))
        assert record is not None and record.event.dagster_event.event_specific_data.passed

    again = ingest(defs, instance, force=True)
    assert again.ok and again.run_ids
    after = _payloads(qdrant_path, "pstuts_transcripts")
    assert sorted(p["id"] for p in after) == sorted(p["id"] for p in payloads)
    assert sorted(json.dumps(p, sort_keys=True) for p in after) == sorted(
        json.dumps(p, sort_keys=True) for p in payloads
    )


@pytest.mark.slow
def test_langchain_qdrant_vectorstore_reads_the_collection_on_the_server_path(
    few_real_videos, storage, instance, monkeypatch, tmp_path
):
    """The collection as a server holds it (copied through the store interface into qdrant-client, whose local
    mode stands in for a server here) is what LangChain's own QdrantVectorStore reads."""
    folder, chosen = few_real_videos
    monkeypatch.setenv("PSTUTS_DATA_DIR", str(folder))
    defs = build_definitions(resources_from_env())
    assert ingest(defs, instance).ok
    qdrant: QdrantResource = defs.resources["qdrant"]
    embeddings: EmbeddingsResource = defs.resources["embeddings"]
    question = chosen[0]["qa"][0]["q"]
    server = ClientStore(QdrantClient(path=str(tmp_path / "server")), qdrant.collection)
    with qdrant.get_store() as store:
        assert copy_collection(store, server) == store.count() > 0
    try:
        langchain_store = QdrantVectorStore(
            client=server.client, collection_name=qdrant.collection, embedding=embeddings.query_embeddings()
        )
        found = langchain_store.similarity_search(question, k=3)
    finally:
        server.close()
    assert len(found) == 3
    assert all(set(vectorstore.PAYLOAD_FIELDS) <= set(d.metadata) for d in found)
    assert {d.metadata["video_id"] for d in found} <= {v["video_id"] for v in chosen}
