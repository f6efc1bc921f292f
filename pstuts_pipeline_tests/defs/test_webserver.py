"""The UI as a user drives it: dagster-webserver on loopback, its GraphQL API lists the six assets and the video
partitions, adds a partition, launches its materialization and sees it succeed with metadata and passing checks."""

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pstuts_pipeline.defs.assets import INGESTION_ASSET_NAMES
from pstuts_pipeline_tests.support.servers import REPO, free_port, http_json, serve, wait_until

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
LOCATION = "pstuts_pipeline"
REPOSITORY = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
# Without the daemon, runs must start when launched rather than wait in the run queue.
INSTANCE_YAML = """\
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""
WORKSPACE_YAML = f"""\
load_from:
  - python_module:
      module_name: pstuts_pipeline.definitions
      working_directory: {REPO}
      location_name: {LOCATION}
"""


class Webserver:
    """A dagster-webserver process and its GraphQL endpoint."""

    def __init__(self, process: subprocess.Popen, url: str, log: Path):
        self.process, self.url, self.log = process, url, log

    def gql(self, query: str, **variables: object) -> dict:
        answer = http_json(f"{self.url}/graphql", {"query": query, "variables": variables}, timeout=120)
        assert not answer.get("errors"), answer["errors"]
        return answer["data"]

    def location_loaded(self) -> bool:
        entries = self.gql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus"
            " locationOrLoadError { __typename ... on PythonError { message } } } } } }"
        )
        entry = entries["workspaceOrError"]["locationEntries"][0]
        error = entry["locationOrLoadError"] or {}
        assert error.get("__typename") != "PythonError", error.get("message")
        return entry["loadStatus"] == "LOADED" and error.get("__typename") == "RepositoryLocation"


@pytest.fixture
def webserver(storage: Path, tmp_path: Path) -> Iterator[Webserver]:
    home = storage / "dagster_home"
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    (tmp_path / "workspace.yaml").write_text(WORKSPACE_YAML)
    port = free_port()
    env = {"DAGSTER_HOME": str(home), "PSTUTS_STORAGE_DIR": str(storage), "PSTUTS_DATA_DIR": str(REPO / "data")}
    command = [
        str(BIN / "dagster-webserver"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-w",
        str(tmp_path / "workspace.yaml"),
    ]
    url = f"http://127.0.0.1:{port}"
    # serve() stops the webserver's whole process group: its code server and any run worker too.
    with serve(command, tmp_path, f"{url}/server_info", f"dagster-webserver on port {port}", env) as process:
        server = Webserver(process, url, tmp_path / "server.log")
        wait_until(server.location_loaded, 180, "the pstuts_pipeline code location")
        yield server


ASSETS_QUERY = """{ assetNodes { assetKey { path } groupName isPartitioned partitionDefinition { name type }
  partitionKeys assetChecksOrError { ... on AssetChecks { checks { name } } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
RESULTS_QUERY = """query($keys: [AssetKeyInput!]) { assetNodes(assetKeys: $keys) { assetKey { path }
  assetMaterializations(partitions: ["9001"]) { runId partition metadataEntries { label
    ... on IntMetadataEntry { intValue } } }
  assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } }"""


def test_the_ui_lists_assets_and_partitions_and_materializes_a_video(webserver):
    nodes = {tuple(n["assetKey"]["path"]): n for n in webserver.gql(ASSETS_QUERY)["assetNodes"]}
    ingestion = [nodes[(name,)] for name in INGESTION_ASSET_NAMES]
    assert all(n["groupName"] == "ingestion" and n["isPartitioned"] for n in ingestion)
    assert {(n["partitionDefinition"]["name"], n["partitionDefinition"]["type"]) for n in ingestion} == {
        ("videos", "DYNAMIC")
    }
    assert all(n["partitionKeys"] == [] for n in ingestion)
    assert {c["name"] for n in ingestion for c in n["assetChecksOrError"]["checks"]} == {
        "phrases_linked_exactly_once",
        "chunk_times_ordered_and_bounded",
        "chunks_fit_token_window",
        "points_match_chunks",
    }

    # What "Add partition" in the UI does; the folder sensor does the same for every video it finds.
    added = webserver.gql(
        """mutation($repo: RepositorySelector!) { addDynamicPartition(repositorySelector: $repo,
           partitionsDefName: "videos", partitionKey: "9001") { __typename } }""",
        repo=REPOSITORY,
    )
    assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess"
    nodes = {tuple(n["assetKey"]["path"]): n for n in webserver.gql(ASSETS_QUERY)["assetNodes"]}
    assert all(nodes[(name,)]["partitionKeys"] == ["9001"] for name in INGESTION_ASSET_NAMES)

    # "Materialize" on partition 9001 of the ingest_videos job. Steps run in the run worker's process: the
    # default, one process per step, re-imports torch and the model for each and took ~100 s here.
    launched = webserver.gql(
        LAUNCH,
        params={
            "selector": {**REPOSITORY, "jobName": "ingest_videos"},
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "9001"}]},
            "runConfigData": '{"execution": {"config": {}}}',
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status_query = '{ runOrError(runId: "' + run_id + '") { ... on Run { status } } }'
    statuses = []

    def finished() -> bool:
        statuses.append(webserver.gql(status_query)["runOrError"]["status"])
        return statuses[-1] in ("SUCCESS", "FAILURE", "CANCELED")

    started = time.monotonic()
    wait_until(finished, 600, f"run {run_id}")
    assert statuses[-1] == "SUCCESS", f"run {run_id}: {statuses[-1]}; see {webserver.log}"
    print(f"run {run_id} succeeded {time.monotonic() - started:.0f} s after launch")

    keys = [{"path": [name]} for name in INGESTION_ASSET_NAMES]
    results = {n["assetKey"]["path"][0]: n for n in webserver.gql(RESULTS_QUERY, keys=keys)["assetNodes"]}
    for name in INGESTION_ASSET_NAMES:
        node = results[name]
        assert [(m["runId"], m["partition"]) for m in node["assetMaterializations"]] == [(run_id, "9001")]
        assert node["assetPartitionStatuses"] == {"materializedPartitions": ["9001"], "failedPartitions": []}
        for check in node["assetChecksOrError"]["checks"]:
            assert check["executionForLatestMaterialization"]["status"] == "SUCCEEDED", (name, check)
    written = {
        e["label"]: e.get("intValue")
        for e in results["qdrant_collection"]["assetMaterializations"][0]["metadataEntries"]
    }
    chunks = {
        e["label"]: e.get("intValue")
        for e in results["timestamped_chunks"]["assetMaterializations"][0]["metadataEntries"]
    }
    assert written["points_written"] == written["collection_points"] == chunks["chunks"] > 0
    assert chunks["max_chunk_tokens"] <= chunks["token_window"] == 256


PARTITION_METADATA = """query($keys: [AssetKeyInput!], $partitions: [String!]) { assetNodes(assetKeys: $keys) {
  assetKey { path }
  assetMaterializations(partitions: $partitions) { runId partition metadataEntries { label
    ... on IntMetadataEntry { intValue } ... on TextMetadataEntry { text } ... on MarkdownMetadataEntry { mdStr } } }
  assetChecksOrError { ... on AssetChecks { checks { name partitionStatuses {
    ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions skippedPartitions } } } } } } }"""


def test_each_partition_of_a_range_run_shows_only_its_own_video(webserver):
    """One run of the three sample videos; through GraphQL, each partition's metadata is about its video alone."""
    videos = {"9001": "Crop and straighten", "9002": "Spot Healing Brush", "9003": "Free Transform"}
    for key in videos:
        added = webserver.gql(
            """mutation($repo: RepositorySelector!, $key: String!) { addDynamicPartition(repositorySelector: $repo,
               partitionsDefName: "videos", partitionKey: $key) { __typename } }""",
            repo=REPOSITORY,
            key=key,
        )
        assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess"
    range_tags = [
        {"key": "dagster/asset_partition_range_start", "value": "9001"},
        {"key": "dagster/asset_partition_range_end", "value": "9003"},
    ]
    launched = webserver.gql(
        LAUNCH,
        params={
            "selector": {**REPOSITORY, "jobName": "ingest_videos"},
            "executionMetadata": {"tags": range_tags},
            "runConfigData": '{"execution": {"config": {}}}',
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]
    status_query = '{ runOrError(runId: "' + run_id + '") { ... on Run { status } } }'

    def status() -> str:
        return webserver.gql(status_query)["runOrError"]["status"]

    wait_until(lambda: status() in ("SUCCESS", "FAILURE", "CANCELED"), 600, f"run {run_id}")
    assert status() == "SUCCESS", f"run {run_id}; see {webserver.log}"

    keys = [{"path": [name]} for name in INGESTION_ASSET_NAMES]
    found = webserver.gql(PARTITION_METADATA, keys=keys, partitions=list(videos))["assetNodes"]
    chunks_by_video: dict[str, int] = {}
    for node in sorted(found, key=lambda n: INGESTION_ASSET_NAMES.index(n["assetKey"]["path"][0])):
        name = node["assetKey"]["path"][0]
        by_partition = {m["partition"]: m for m in node["assetMaterializations"]}
        assert sorted(by_partition) == sorted(videos), name
        for key, materialization in by_partition.items():
            assert materialization["runId"] == run_id
            entries = {e["label"]: e for e in materialization["metadataEntries"]}
            assert "videos" not in entries and "by_video" not in entries, (name, key, entries)
            if "video_id" in entries:
                assert entries["video_id"]["intValue"] == int(key), (name, key)
            text = " ".join(str(e.get("text") or e.get("mdStr") or "") for e in entries.values())
            assert not any(title in text for other, title in videos.items() if other != key), (name, key, text)
            if name == "raw_transcripts":
                assert videos[key] in entries["title"]["text"]
            if name == "timestamped_chunks":
                chunks_by_video[key] = entries["chunks"]["intValue"]
                assert entries["preview"]["mdStr"].count("\n") == chunks_by_video[key] + 1  # header, rule, rows
            if name == "qdrant_collection":
                assert entries["points_written"]["intValue"] == chunks_by_video[key] > 0
        for check in node["assetChecksOrError"]["checks"]:
            statuses = check["partitionStatuses"]
            assert sorted(statuses["succeededPartitions"]) == sorted(videos), (name, check)
            assert statuses["failedPartitions"] == statuses["skippedPartitions"] == [], (name, check)
