"""The `openai` embeddings provider against a real OpenAI-compatible server (infinity-emb serving all-MiniLM-L6-v2):
ingest and search, a refused key, rate limits and 5xx retried by the client and by Dagster."""

from collections.abc import Iterator

import dagster as dg
import pytest

from pstuts_pipeline.cli.ingest import ingest
from pstuts_pipeline.definitions import build_definitions
from pstuts_pipeline.defs.resources import EmbeddingsResource, ProviderRefusedFailure, resources_from_env
from pstuts_pipeline.search import retrieval
from pstuts_pipeline_tests.support.servers import REPO, SERVED_MODEL, FlakyProxy, embedding_server

pytestmark = [pytest.mark.slow, pytest.mark.server]
COLLECTION = "pstuts_transcripts"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory) -> Iterator[str]:
    """infinity-emb without a key, behind the flaky proxy."""
    with embedding_server(tmp_path_factory.mktemp("embedding_server")) as url:
        yield url


@pytest.fixture
def proxy(open_server):
    flaky = FlakyProxy(open_server)
    yield flaky
    flaky.close()


def use_openai(monkeypatch, base_url: str, key: str) -> None:
    """The environment docs/configuration.md gives for an OpenAI-compatible server; it truncates input at 256 tokens."""
    for name, value in {
        "PSTUTS_EMBEDDING_PROVIDER": "openai",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": key,
        "PSTUTS_EMBEDDING_MODEL": SERVED_MODEL,
        "PSTUTS_MAX_CHUNK_TOKENS": "256",
        "PSTUTS_DATA_DIR": str(REPO / "data"),
    }.items():
        monkeypatch.setenv(name, value)


def search(defs: dg.Definitions, question: str) -> list[retrieval.SearchResult]:
    embeddings, qdrant = defs.resources["embeddings"], defs.resources["qdrant"]
    with qdrant.get_store() as store:
        return retrieval.search(store, embeddings.query_embeddings(), embeddings.model_id, question, 3)


def test_ingest_and_search_through_a_keyed_openai_compatible_server(storage, instance, monkeypatch, keyed_server):
    base_url, key = keyed_server
    use_openai(monkeypatch, base_url, key)
    defs = build_definitions(resources_from_env())
    report = ingest(defs, instance)
    assert report.ok, report.failed_runs
    assert report.plan.to_ingest == ["9001", "9002", "9003", "9004"]  # 9004: the WebVTT sample
    assert report.points_in_collection == report.chunks > 0
    assert defs.resources["embeddings"].model_id == f"openai:{SERVED_MODEL}@{base_url}"

    # The same questions the local model answers in test_cli land on the same videos through the server.
    for question, video in [
        ("How do I open Free Transform?", 9003),
        ("How do I straighten a crooked horizon?", 9001),
        ("Which brush removes small blemishes?", 9002),
    ]:
        top = search(defs, question)[0]
        assert top.video_id == video, (question, top)
        assert top.start <= top.link_time <= top.stop


def test_a_refused_key_is_one_clear_line_without_the_key(keyed_server, monkeypatch):
    base_url, key = keyed_server
    wrong = key[::-1]
    monkeypatch.setenv("OPENAI_API_KEY", wrong)
    model = EmbeddingsResource(provider="openai", model=SERVED_MODEL, openai_base_url=base_url).query_embeddings()
    with pytest.raises(ProviderRefusedFailure) as refused:
        model.embed_query("How do I crop a photo?")
    message = str(refused.value)
    assert message == f"openai embeddings provider at {base_url}: the API key in OPENAI_API_KEY was refused (HTTP 401)"
    assert wrong not in message and key not in message
    assert refused.value.__suppress_context__


def test_a_server_that_echoes_the_key_does_not_leak_it(proxy, monkeypatch):
    secret = "sk-pstuts-echo-" + "7" * 24
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    proxy.fail_next(401)
    model = EmbeddingsResource(provider="openai", model=SERVED_MODEL, openai_base_url=proxy.url).query_embeddings()
    with pytest.raises(ProviderRefusedFailure) as refused:
        model.embed_documents(["hello"])
    assert proxy.answered == [401]
    assert secret not in str(refused.value) and "refused (HTTP 401)" in str(refused.value)


def test_rate_limits_and_server_errors_are_retried_by_the_client(proxy, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "any")
    direct = EmbeddingsResource(provider="openai", model=SERVED_MODEL, openai_base_url=proxy.upstream)
    through_proxy = EmbeddingsResource(provider="openai", model=SERVED_MODEL, openai_base_url=proxy.url)
    proxy.fail_next(429, 503, 429, 502)
    vectors = through_proxy.query_embeddings().embed_documents(["How do I crop a photo?", "Use the crop tool."])
    assert proxy.answered == [429, 503, 429, 502, 200]
    expected = direct.query_embeddings().embed_documents(["How do I crop a photo?", "Use the crop tool."])
    assert [[round(x, 5) for x in v] for v in vectors] == [[round(x, 5) for x in v] for v in expected]


def failed_attempts(instance: dg.DagsterInstance, run_id: str, step: str) -> int:
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
    return sum(1 for e in events if e.step_key == step)


def test_dagster_retries_a_step_when_the_client_gives_up(storage, instance, proxy, monkeypatch):
    """More failures than the client retries (1 + 6 attempts) fail the step; its RetryPolicy runs it again."""
    use_openai(monkeypatch, proxy.url, "any")
    defs = build_definitions(resources_from_env())
    instance.add_dynamic_partitions("videos", ["9001"])
    job = defs.resolve_job_def("ingest_videos")

    proxy.fail_next(*[503, 429] * 3, 503)  # the chunker's first batch, every attempt of it
    upstream = job.execute_in_process(
        instance=instance,
        partition_key="9001",
        raise_on_error=False,
        asset_selection=[
            dg.AssetKey(n) for n in ("raw_transcripts", "phrase_documents", "full_transcripts", "kamradt_chunks")
        ],
    )
    assert upstream.success
    assert failed_attempts(instance, upstream.run_id, "kamradt_chunks") == 1
    assert proxy.answered[:8] == [503, 429] * 3 + [503, 200]

    # The batch of chunk texts, embedded ahead of the write by timestamped_chunks (the phrases are cached).
    proxy.fail_next(*[502] * 7)
    write = job.execute_in_process(
        instance=instance,
        partition_key="9001",
        raise_on_error=False,
        asset_selection=[dg.AssetKey("timestamped_chunks"), dg.AssetKey("qdrant_collection")],
    )
    assert write.success
    assert failed_attempts(instance, write.run_id, "timestamped_chunks") == 1
    assert failed_attempts(instance, write.run_id, "qdrant_collection") == 0
    assert write.asset_materializations_for_node("qdrant_collection")[0].metadata["points_written"].value > 0
