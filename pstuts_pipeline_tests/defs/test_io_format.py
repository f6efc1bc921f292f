"""Intermediate assets are stored as JSON that rebuilds only known shapes: a crafted file runs no code on load."""

import json
import pickle
from pathlib import Path

import dagster as dg
import pytest
from langchain_core.documents import Document

from pstuts_pipeline.chunking.chunker import TimedChunk
from pstuts_pipeline.chunking.time_repair import Phrase
from pstuts_pipeline.defs.assets.chunks import full_transcripts, phrase_documents, raw_transcripts
from pstuts_pipeline.defs.instance import RunTags
from pstuts_pipeline.defs.io_managers import PartitionedJsonIOManager, decode, encode, shape_of
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import EmbeddingsResource, TranscriptSource
from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline_tests.support.helpers import SAMPLE_DIR


def test_every_stored_shape_comes_back_equal():
    video = load_catalog(SAMPLE_DIR).videos["9001"]
    document = Document(page_content="Crop it.", metadata={"video_id": 9001, "spans": [[0, 8]], "t": 1.25, "raw": None})
    for value in (video, document, [document, document], [], {"a": [1, 2.5, None, "é"]}):
        assert decode(encode(value), "test") == value


def test_a_file_of_another_shape_or_format_is_refused_naming_it():
    with pytest.raises(ValueError, match="^x.json: not a pstuts-io/1 file"):
        decode(json.dumps({"format": "pstuts-io/1", "shape": "os.system", "value": "echo owned"}), "x.json")
    with pytest.raises(ValueError, match="^x.json: not a stored asset value"):
        decode("\x80NOT JSON", "x.json")


def test_a_source_video_stored_before_the_typed_model_asks_for_a_rematerialization():
    old = {"video_id": 9001, "record": {"video_id": 9001}, "file": "data/x.json", "content_hash": "0" * 64}
    with pytest.raises(ValueError, match="^x.json: written by an older version .*re-materialize its asset$"):
        decode(json.dumps({"format": "pstuts-io/1", "shape": "SourceVideo", "value": old}), "x.json")


def test_timed_chunks_come_back_typed_and_old_document_files_ask_for_a_rematerialization():
    chunk = TimedChunk(0, (Phrase(1, "Open the file.", 0.0, 2.0), Phrase(2, "", 2.0, 2.5)))
    assert decode(encode([chunk]), "t", shape_of(list[TimedChunk])) == [chunk]
    old = encode([Document(page_content="Open the file.", metadata={"chunk_index": 0})])
    with pytest.raises(
        ValueError, match=r"^x.json: written by an older version \(a list\[Document\](/shared)?, not a list"
    ):
        decode(old, "x.json", shape_of(list[TimedChunk]))
    assert decode(encode([]), "x.json", "list[TimedChunk]") == []


class RunsCode:
    """What a crafted pickle does: call something of its choice on load (here, write a marker file)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code ran"))


def materialize(selection: list, instance: dg.DagsterInstance, io_path: Path) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [raw_transcripts, phrase_documents, full_transcripts],
        selection=selection,
        partition_key="9001",
        instance=instance,
        resources={
            "io_manager": PartitionedJsonIOManager(base_path=str(io_path)),
            "transcript_source": TranscriptSource(data_dir=str(SAMPLE_DIR)),
            "embeddings": EmbeddingsResource(),
            "run_tags": RunTags(),
        },
        raise_on_error=False,
    )


def test_a_crafted_pickle_is_never_loaded_and_the_error_says_why(tmp_path):
    marker = tmp_path / "owned"
    io_path = tmp_path / "io"
    (io_path / "raw_transcripts").mkdir(parents=True)
    (io_path / "raw_transcripts" / "9001.pkl").write_bytes(pickle.dumps(RunsCode(marker)))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(video_partitions.name, ["9001"])

    result = materialize([phrase_documents], instance, io_path)

    assert not result.success and not marker.exists()
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.cause.message if failure.step_failure_data.error.cause else ""
    message += failure.step_failure_data.error.message
    assert f"{io_path / 'raw_transcripts' / '9001.json'}: missing; 9001.pkl beside it is an old pickle" in message

    rebuilt = materialize([raw_transcripts, phrase_documents, full_transcripts], instance, io_path)
    assert rebuilt.success and not marker.exists()
    stored = sorted(p.relative_to(io_path).as_posix() for p in io_path.rglob("*.json"))
    assert stored == ["full_transcripts/9001.json", "phrase_documents/9001.json", "raw_transcripts/9001.json"]
    assert decode((io_path / "full_transcripts" / "9001.json").read_text(), "f").metadata["video_id"] == 9001


def test_video_fields_are_stored_once_per_file_not_once_per_phrase():
    title = "T" * 1_000_000
    documents = [
        Document(page_content=f"Phrase {i}.", metadata={"video_id": 9001, "title": title, "sent_id": i})
        for i in range(100)
    ]
    text = encode(documents)
    assert len(text) < 1_100_000  # was 100 MB: the title once per phrase
    loaded = decode(text, "test")
    assert loaded == documents
    assert all(d.metadata["title"] is loaded[0].metadata["title"] for d in loaded)  # one copy in memory too


def test_documents_written_before_the_shared_shape_are_still_read():
    document = Document(page_content="Crop it.", metadata={"video_id": 9001, "title": "Crop"})
    old = {
        "format": "pstuts-io/1",
        "shape": "list[Document]",
        "value": [{"page_content": "Crop it.", "metadata": document.metadata, "id": None}],
    }
    assert decode(json.dumps(old), "old.json") == [document]
