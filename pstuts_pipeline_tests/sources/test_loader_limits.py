"""The catalog loader stays bounded on hostile files: many junk records, deep nesting, odd encodings, duplicates."""

import codecs
import json
from pathlib import Path

from pstuts_pipeline.sources import load_catalog
from pstuts_pipeline.sources.reconciliation import reconcile
from pstuts_pipeline_tests.support.helpers import SAMPLE


def folder_with(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """The three sample videos in good.json, plus the given files."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "good.json").write_text(json.dumps(SAMPLE))
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    return tmp_path


def test_half_a_million_junk_records_are_one_summary_line_and_the_good_videos_still_plan(tmp_path):
    junk = b"[" + b",".join([b"0"] * 500_000) + b"]"  # 1 MB
    data = folder_with(tmp_path, {"junk.json": junk})
    catalog = load_catalog(data)  # its time grows with the records: benchmarks/input_growth.py --only junk_records
    plan = reconcile(catalog, {}, lambda video: "f")
    junk_file = str(data / "junk.json")
    assert [str(e) for e in catalog.errors] == [
        f"{junk_file}: 500,000 records rejected, first 3: record 0 is a number, not an object; "
        "record 1 is a number, not an object; record 2 is a number, not an object"
    ]
    assert plan.to_ingest == ["9001", "9002", "9003"] and list(plan.failed) == [junk_file]
    assert plan.removed == []  # junk that names no video may hide one: nothing is removed


def test_many_bad_videos_hold_back_their_points_and_are_named_when_asked_for(tmp_path):
    broken = [{**SAMPLE[0], "video_id": 9100 + i, "title": None} for i in range(50)]
    data = folder_with(tmp_path, {"broken.json": json.dumps(broken).encode()})
    catalog = load_catalog(data)
    [summary] = catalog.errors
    assert str(summary).startswith(f"{data / 'broken.json'}: 50 records rejected, first 3: video 9100: title: is null")
    assert catalog.bad_video_ids == set(range(9100, 9150))
    stored = {9001: {"f"}, 9149: {"f"}}
    assert reconcile(catalog, stored, lambda video: "f").removed == []
    assert reconcile(catalog, stored, lambda video: "f", only=["9149"]).failed == {"9149": str(summary)}


def test_a_hundred_thousand_levels_of_nesting_are_one_line_naming_the_file(tmp_path):
    data = folder_with(tmp_path, {"deep.json": b"[" * 100_000 + b"]" * 100_000})
    catalog = load_catalog(data)
    assert [str(e) for e in catalog.errors] == [
        f"{data / 'deep.json'}: is nested too deeply to be read (a PsTuts file needs 4 levels of brackets)"
    ]
    assert sorted(catalog.videos) == ["9001", "9002", "9003"]


def test_a_record_nested_deeper_than_pstuts_needs_is_rejected_by_itself(tmp_path):
    deep = {**SAMPLE[0], "video_id": 9100, "extra": json.loads("[" * 900 + "]" * 900)}
    data = folder_with(tmp_path, {"deep.json": json.dumps([deep]).encode()})
    catalog = load_catalog(data)  # it parses, but hashing or storing it would exhaust the stack downstream
    assert sorted(catalog.videos) == ["9001", "9002", "9003"]
    assert [str(e) for e in catalog.errors] == [
        f"{data / 'deep.json'}: video 9100: nests lists or objects more than 32 levels deep"
    ]


def test_a_utf8_byte_order_mark_is_accepted_and_hashes_the_same(tmp_path):
    plain = load_catalog(folder_with(tmp_path / "plain", {}))
    data = tmp_path / "bom"
    data.mkdir()
    (data / "good.json").write_bytes(codecs.BOM_UTF8 + json.dumps(SAMPLE).encode())
    with_bom = load_catalog(data)
    assert not with_bom.errors
    assert {k: v.content_hash for k, v in with_bom.videos.items()} == {
        k: v.content_hash for k, v in plain.videos.items()
    }


def test_a_video_twice_in_one_file_is_one_error_that_says_so(tmp_path):
    data = tmp_path
    (data / "a.json").write_text(json.dumps([SAMPLE[0], SAMPLE[1], SAMPLE[0]]))
    catalog = load_catalog(data)
    assert [str(e) for e in catalog.errors] == [
        f"{data / 'a.json'}: video 9001: video_id: is defined 2 times in this file"
    ]
    assert list(catalog.videos) == ["9002"]


def test_a_truncated_file_says_where_its_string_starts_without_stuttering(tmp_path):
    text = json.dumps(SAMPLE, indent=1)
    (tmp_path / "a.json").write_text(text[: text.index("Free Transform") + 4])
    errors = [str(e) for e in load_catalog(tmp_path).errors]
    assert errors and "at at" not in " ".join(errors)
    assert "is not valid JSON: Unterminated string starting at line" in errors[0]


def test_control_characters_in_a_bad_value_are_escaped_in_the_message(tmp_path):
    video = {**SAMPLE[0], "title": 7, "desc": "\x1b[2J\x1b[31mred"}
    (tmp_path / "a.json").write_text(json.dumps([{**video, "title": "\x1b[31mok"}, {**SAMPLE[1], "desc": ["\x1b[2J"]}]))
    [error] = load_catalog(tmp_path).errors
    assert "\x1b" not in str(error) and "\\u001b[2J" in str(error)


def test_materializing_a_video_that_a_summary_covers_fails_with_the_summary(tmp_path):
    import dagster as dg

    from pstuts_pipeline.defs.assets.chunks import raw_transcripts
    from pstuts_pipeline.defs.instance import RunTags
    from pstuts_pipeline.defs.partitions import video_partitions
    from pstuts_pipeline.defs.resources import EmbeddingsResource, TranscriptSource

    broken = [{**SAMPLE[0], "video_id": 9100 + i, "title": None} for i in range(5)]
    data = folder_with(tmp_path / "data", {"broken.json": json.dumps(broken).encode()})
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(video_partitions.name, ["9104"])
    result = dg.materialize(
        [raw_transcripts],
        partition_key="9104",
        instance=instance,
        raise_on_error=False,
        resources={
            "transcript_source": TranscriptSource(data_dir=str(data)),
            "embeddings": EmbeddingsResource(),
            "run_tags": RunTags(),
        },
    )
    [failure] = [e for e in result.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert description.startswith(f"{data / 'broken.json'}: 5 records rejected, first 3: video 9100: title: is null")
