"""A range run reads its own videos' files, as the last reconcile found them, not the whole data folder."""

import json
from pathlib import Path

import dagster as dg
import pytest

from pstuts_pipeline.defs.assets.chunks import raw_transcripts
from pstuts_pipeline.defs.instance import RunTags
from pstuts_pipeline.defs.partitions import video_partitions
from pstuts_pipeline.defs.resources import TranscriptSource
from pstuts_pipeline.sources.reconciliation import own_videos_catalog, reconcile_folder
from pstuts_pipeline_tests.support.helpers import SAMPLE, settled, write_data


@pytest.fixture
def reconciled(tmp_path) -> tuple[Path, Path]:
    """A folder of a.json (9001, 9002) and b.json (9003), reconciled once, so its holdings are recorded."""
    data, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    write_data(data)
    for path in data.iterdir():
        settled(path)
    catalog, _ = reconcile_folder(data, home, {}, lambda video: video.content_hash)
    assert sorted(catalog.videos) == ["9001", "9002", "9003"]
    return data, home


def test_a_run_reads_only_the_files_that_held_its_videos(reconciled):
    data, home = reconciled
    (data / "b.json").write_text("[{ cut short")  # another run's file, broken since: this run never opens it
    catalog = own_videos_catalog(data, home, {9001, 9002})
    assert catalog.files == [str(data / "a.json")]
    assert sorted(catalog.videos) == ["9001", "9002"] and not catalog.errors


def test_a_video_moved_since_the_reconcile_is_found_in_the_whole_folder(reconciled):
    data, home = reconciled
    (data / "c.json").write_text(json.dumps(SAMPLE[:1]))
    (data / "a.json").write_text(json.dumps(SAMPLE[1:2]))  # 9001 moved from a.json to c.json
    catalog = own_videos_catalog(data, home, {9001})
    assert catalog.videos["9001"].file == str(data / "c.json")
    assert len(catalog.files) == 3


def test_without_holdings_the_whole_folder_is_read(reconciled, tmp_path):
    data, _ = reconciled
    catalog = own_videos_catalog(data, tmp_path / "another_home", {9003})
    assert len(catalog.files) == 2 and "9003" in catalog.videos


def test_the_asset_reads_its_partitions_from_their_files(reconciled):
    """Through the asset, in a real instance whose home holds the holdings."""
    data, home = reconciled
    (data / "b.json").write_text("not json")
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions(video_partitions.name, ["9001"])
        context = dg.build_asset_context(partition_key="9001", instance=instance)
        videos = raw_transcripts(context, TranscriptSource(data_dir=str(data)), RunTags())
    assert list(videos) == ["9001"] and videos["9001"].file == str(data / "a.json")
