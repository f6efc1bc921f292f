"""`pstuts serve` as a learner uses it: headless chromium asks a question, sees the answer and its cited moments,
plays the local video from the cited moment, and sees a hostile title as text; the JSON API, its schema, its
messages when nothing was ingested, its media route and its safety (no key, no script, no other scheme) too.

The media file is a 45 s, 96x54 WebM showing a seconds counter (20 KB), made with ffmpeg's test source:
`ffmpeg -f lavfi -i testsrc=s=96x54:r=1 -t 45 -c:v libvpx -crf 50 -b:v 10k -g 10 -an counter-45s.webm`.
"""

import copy
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pstuts_pipeline.answers.chat import ChatSettings
from pstuts_pipeline.defs.instance import DEFAULT_INSTANCE_YAML
from pstuts_pipeline.defs.resources import QdrantResource, resources_from_env
from pstuts_pipeline.web.app import allowed_hosts, create_app
from pstuts_pipeline.web.engine import Engine
from pstuts_pipeline.web.media import MediaIndex, Player, player, scan
from pstuts_pipeline_tests.support.browser import CHROMIUM_FLAGS, wait_until
from pstuts_pipeline_tests.support.helpers import SAMPLE, SAMPLE_DIR, HashEmbeddings, run_ingest, small_collection
from pstuts_pipeline_tests.support.servers import FakeChatServer, free_port, http_json, serve, skip_or_fail

BIN = Path(sys.executable).parent
MEDIA = Path(__file__).resolve().parent / "media" / "counter-45s.webm"
HOSTILE_TITLE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">Sharpen with <b>Unsharp</b>'


def write_served_data(folder: Path) -> None:
    """The sample videos with a script URL (9001) and a web page URL (9002), and the WebVTT video 9004 with a
    hostile title and a local WebM beside its captions."""
    folder.mkdir(parents=True)
    videos = copy.deepcopy(SAMPLE)
    videos[0]["url"] = "javascript:alert(1)"
    videos[1]["url"] = "https://example.com/watch/9002"
    (folder / "sample.json").write_text(json.dumps(videos))
    shutil.copy(SAMPLE_DIR / "9004-sharpen-with-unsharp-mask.vtt", folder / "9004-sharpen.vtt")
    sidecar = f'video_id = 9004\ntitle = {json.dumps(HOSTILE_TITLE)}\nurl = "https://example.com/videos/9004.mp4"\n'
    (folder / "9004-sharpen.toml").write_text(sidecar)
    shutil.copy(MEDIA, folder / "9004-sharpen.webm")


# Unit: where a moment plays from, and which files count as local media.


def test_player_plays_local_media_first_then_http_videos_links_pages_and_drops_other_schemes(tmp_path) -> None:
    local = {7: tmp_path / "7.webm"}
    assert player(7, "javascript:alert(1)", 81.25, local) == Player("video", "/media/7#t=81.2")
    assert player(8, "https://cdn.example/v/8.MP4#t=3", 81.25, local) == Player(
        "video", "https://cdn.example/v/8.MP4#t=81.2"
    )
    assert player(8, "http://example.com/watch?v=8", 5, local) == Player("link", "http://example.com/watch?v=8#t=5.0")
    for url in (
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        "data:text/html,x",
        "file:///etc/passwd",
        "",
        "//x.y/a.mp4",
    ):
        assert player(8, url, 5, local) == Player("none", None), url
    assert player(8, " javascript:alert(1)", 5, local).kind == "none"
    assert player(8, "https://example.com/a b.mp4", 5, local).kind == "none"


def test_local_media_is_only_a_file_beside_a_caption_file_in_the_data_folder(tmp_path) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside"
    write_served_data(data)
    outside.mkdir()
    (outside / "9005.webm").write_bytes(b"x")
    (data / "9005-elsewhere.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello.\n")
    (data / "9005-elsewhere.webm").symlink_to(outside / "9005.webm")  # a link out of the folder is not served
    (data / "no-captions.webm").write_bytes(b"x")
    (data / "sample.webm").write_bytes(b"x")  # beside a JSON file, not a caption file
    assert scan(data) == {9004: (data / "9004-sharpen.webm").resolve()}
    index = MediaIndex(data)
    assert list(index.files()) == [9004]
    (data / "9006 - Another.vtt").write_text("WEBVTT\n\n00:01.000 --> 00:02.000\nHi.\n")
    (data / "9006 - Another.webm").write_bytes(b"x")
    assert sorted(index.files()) == [9004, 9006]  # the folder changed: rescanned
    assert MediaIndex(tmp_path / "missing").files() == {}


# The API without a collection: clear messages, not tracebacks (a stand-in embedder; no model is loaded).


def stand_in_engine(folder: Path) -> Engine:
    qdrant = QdrantResource(path=str(folder / "qdrant"))
    return Engine(
        open_store=lambda: qdrant.get_store(read_only=True, lock_timeout_s=0.2),
        collection="pstuts_transcripts",
        embeddings=HashEmbeddings(),
        model_id="hash",
        chat=ChatSettings(),
        media=MediaIndex(folder / "data"),
    )


def test_missing_and_empty_collections_are_named_with_what_to_do(tmp_path) -> None:
    client = TestClient(create_app(stand_in_engine(tmp_path)))
    status = client.get("/api/status").json()
    assert status["points"] == 0 and "'pstuts_transcripts' does not exist yet: run `pstuts ingest`" in status["problem"]
    asked = client.post("/api/ask", json={"question": "How do I crop?"})
    assert asked.status_code == 503 and "does not exist yet: run `pstuts ingest` first" in asked.json()["detail"]
    small_collection(tmp_path / "qdrant", points=0)
    asked = client.post("/api/ask", json={"question": "How do I crop?"})
    assert asked.status_code == 503 and asked.json()["detail"].endswith(
        "is empty (its store may have been emptied or damaged): run `pstuts ingest --force` to fill it again"
    )
    assert "is empty" in client.get("/api/status").json()["problem"]


def test_a_store_held_by_an_ingest_is_a_503_naming_the_lock_not_a_hang(tmp_path) -> None:
    engine = stand_in_engine(tmp_path)
    small_collection(tmp_path / "qdrant")
    with QdrantResource(path=str(tmp_path / "qdrant")).get_store():  # as `pstuts ingest` holds it while writing
        asked = TestClient(create_app(engine)).post("/api/ask", json={"question": "How do I crop?"})
    assert asked.status_code == 503
    assert (
        f"{tmp_path / 'qdrant' / 'pstuts_transcripts'}.lock" in asked.json()["detail"]
        and "ask again when it is done" in asked.json()["detail"]
    )


@pytest.mark.parametrize("question", ["", " ?! ", "___"])
def test_questions_without_words_are_refused_with_the_clis_words_in_one_shape(tmp_path, question) -> None:
    refused = TestClient(create_app(stand_in_engine(tmp_path))).post("/api/ask", json={"question": question})
    assert refused.status_code == 422
    assert refused.json() == {
        "detail": f"a question needs at least one word (a letter or digit); got {question.strip()!r}"
    }


@pytest.mark.parametrize(
    "body",
    [
        b'{"question": "How do I crop?", "top_k": 1e1000}',
        b'{"question": "How do I crop?", "top_k": NaN}',
        b'{"question": "How do I crop?", "top_k": -Infinity}',
        b'{"question": "How do I \\ud800 crop?"}',
        b'{"question": 12}',
        b"not json",
    ],
)
def test_bad_input_is_a_json_4xx_never_a_500(tmp_path, body) -> None:
    client = TestClient(create_app(stand_in_engine(tmp_path)), raise_server_exceptions=False)
    refused = client.post("/api/ask", content=body, headers={"content-type": "application/json"})
    assert refused.status_code == 422 and refused.headers["content-type"] == "application/json"
    assert isinstance(refused.json()["detail"], str) and len(refused.json()["detail"]) < 300


def test_a_422_quotes_only_a_short_excerpt_of_a_long_question(tmp_path) -> None:
    refused = TestClient(create_app(stand_in_engine(tmp_path))).post("/api/ask", json={"question": "crop " * 20_000})
    assert refused.status_code == 422 and len(refused.text) < 300
    assert refused.json()["detail"].startswith("question: String should have at most 1000 characters (got 'crop crop")


def test_only_the_bound_address_names_are_answered_against_dns_rebinding(tmp_path) -> None:
    app = create_app(stand_in_engine(tmp_path), allowed_hosts("127.0.0.1"))
    for base in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"):
        assert TestClient(app, base_url=base).get("/api/status").status_code == 200, base
    for base in ("http://attacker.example:8000", "http://127.0.0.1.attacker.example"):
        refused = TestClient(app, base_url=base).get("/api/status")
        assert refused.status_code == 400 and "is not served here" in refused.json()["detail"], base
    assert allowed_hosts("0.0.0.0") is None and allowed_hosts("10.0.0.5") == ["10.0.0.5"]


def test_media_routes_take_only_a_video_id(tmp_path) -> None:
    client = TestClient(create_app(stand_in_engine(tmp_path)))
    assert client.get("/media/9004").status_code == 404
    for path in ("/media/..%2F..%2Fetc%2Fpasswd", "/media/9004.webm", "/static/..%2F..%2Fcli.py"):
        assert client.get(path).status_code in (404, 422), path
    page = client.get("/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert "'unsafe-inline'" not in page.headers["content-security-policy"]
    schema = client.get("/openapi.json").json()
    assert {"/api/ask", "/api/status", "/media/{video_id}"} <= set(schema["paths"])
    assert client.get("/docs").status_code == 404  # Swagger UI would load its scripts from a CDN


# The real thing: the sample ingested with the real model, `pstuts serve` in a subprocess, chromium on the page.


@pytest.fixture(scope="module")
def served_data(tmp_path_factory) -> Iterator[dict[str, str]]:
    """The data folder above ingested with the real model, once per module; the environment that serves it."""
    root = tmp_path_factory.mktemp("serve")
    write_served_data(root / "data")
    env = {
        "PSTUTS_STORAGE_DIR": str(root / "storage"),
        "DAGSTER_HOME": str(root / "storage" / "dagster_home"),
        "PSTUTS_DATA_DIR": str(root / "data"),
    }
    (root / "storage" / "dagster_home").mkdir(parents=True)
    (root / "storage" / "dagster_home" / "dagster.yaml").write_text(DEFAULT_INSTANCE_YAML)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        report = run_ingest()
    assert report.ok and report.plan.to_ingest == ["9001", "9002", "9003", "9004"]
    yield env


@pytest.fixture(scope="module")
def server(served_data, tmp_path_factory) -> Iterator[str]:
    """`pstuts serve` on a free port over the served data, extractive answers; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**served_data, "PSTUTS_CHAT_MODEL": ""}
    command = [str(BIN / "pstuts"), "serve", "--port", str(port)]
    with serve(command, tmp_path_factory.mktemp("server"), f"{url}/api/status", f"pstuts serve on {port}", env):
        yield url


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, driven by Playwright (never its own browser downloads)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        skip_or_fail("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed: it is in the `dev` extra (`make setup`)")
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


def ask_on_page(page, question: str) -> None:
    page.fill("#question", question)
    page.click("#ask")
    wait_until(
        page,
        "q => { const box = document.getElementById('answer-box'); return !box.hidden && box.dataset.question === q; }",
        question,
        timeout_s=60,
    )


def wait_playing_at(page, seconds: float) -> float:
    """The player's currentTime once it has its media and is within a second of `seconds` (fails after 20 s)."""
    wait_until(
        page,
        "t => { const v = document.getElementById('player');"
        " return v.readyState >= 1 && !v.seeking && Math.abs(v.currentTime - t) < 1; }",
        seconds,
    )
    return page.evaluate("document.getElementById('player').currentTime")


@pytest.mark.slow
def test_a_learner_asks_sees_cited_moments_and_the_video_plays_from_the_cited_moment(server, browser, tmp_path) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server)
    wait_until(page, "document.getElementById('status-details').textContent.includes('chunks in')")
    ask_on_page(page, "How do I sharpen a soft photo with Unsharp Mask?")
    page.screenshot(path=str(tmp_path / "1-answer.png"), full_page=True)
    assert page.text_content("#answer").strip()
    citation = page.locator("#citations .citation").first
    assert citation.locator(".title").text_content() == HOSTILE_TITLE  # the markup shown as text
    cited = float(citation.locator("button").get_attribute("data-time"))
    assert page.locator("#results .result").count() == 3
    assert page.locator("#results .result mark").first.text_content().strip()

    citation.locator("button").click()
    played = wait_playing_at(page, cited)
    assert page.get_attribute("#player", "src").startswith("/media/9004#t=")
    page.wait_for_timeout(600)  # a frame on screen for the picture
    page.screenshot(path=str(tmp_path / "2-playing.png"), full_page=True)

    # Another moment of the same video: the player seeks there.
    later = page.locator("#results .result button[data-time]").evaluate_all(
        "bs => bs.map(b => parseFloat(b.dataset.time))"
    )
    other = max(later, key=lambda t: abs(t - played))
    page.locator(f"#results .result button[data-time='{other}']").first.click()
    wait_playing_at(page, other)
    page.wait_for_timeout(600)
    page.screenshot(path=str(tmp_path / "3-seeked.png"), full_page=True)

    assert page.evaluate("window.pwned") is None
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.querySelectorAll('main img, main b').length") == 0
    assert errors == []
    print(f"screenshots in {tmp_path}")


@pytest.mark.slow
def test_a_web_page_is_a_link_and_a_script_url_is_no_link_at_all(server, browser, tmp_path) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(server)
    ask_on_page(page, "Spot Healing Brush blemishes")
    assert "Spot Healing" in page.text_content("#citations .citation .title")
    page.locator("#citations .citation button").first.click()
    link = page.locator("#open-link")
    link.wait_for(state="visible")
    assert link.get_attribute("href").startswith("https://example.com/watch/9002#t=")
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert page.locator("#player").is_hidden()
    page.screenshot(path=str(tmp_path / "4-link.png"), full_page=True)

    ask_on_page(page, "How do I crop and straighten a photo?")
    assert page.text_content("#citations .citation .title") == "Crop and straighten a photo"
    page.locator("#citations .citation button").first.click()
    page.locator("#no-source").wait_for(state="visible")
    assert "javascript:" not in page.content()


@pytest.mark.slow
def test_a_question_no_video_answers_says_so_and_shows_the_nearest_moments_as_weak(server, browser, tmp_path) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(server)
    wait_until(page, "document.getElementById('status-details').textContent.includes('chunks in')")
    assert page.text_content("#status").startswith("Ask a question")  # the collection's figures are details
    assert not page.locator("#status-details").is_visible()
    ask_on_page(page, "How do I add text to a photo?")
    assert page.text_content("#answer").startswith("No moment in these videos answers this well")
    assert page.text_content("#results-title") == "Nearest moments (weak matches)"
    assert page.locator("#citations .citation").count() == 0 and page.locator("#citations-title").is_hidden()
    assert page.locator("#results .result.weak").count() == 3
    assert "weak match (" in page.text_content("#results .result .verdict")
    details = page.locator("#results .result .details").first
    assert not details.locator("div").first.is_visible()  # ids and scores behind the toggle
    page.screenshot(path=str(tmp_path / "5-no-good-match.png"), full_page=True)
    details.locator("summary").click()
    assert details.locator("div").first.is_visible() and "search score" in details.text_content()

    ask_on_page(page, "How do I crop and straighten a photo?")
    assert "confidence that a moment answers this" in page.text_content("#answer-meta")
    assert page.text_content("#results .result .verdict").startswith(" · match (")
    print(f"screenshots in {tmp_path}")


@pytest.mark.slow
def test_a_source_the_browser_cannot_play_shows_a_message_and_a_plain_link(server, browser, tmp_path) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    page.goto(server)
    ask_on_page(page, "How do I open Free Transform?")  # 9003's url is an .mp4 on example.com, unreachable here
    page.locator("#results .result button").first.click()
    page.locator("#media-error").wait_for(state="visible", timeout=30_000)
    assert page.text_content("#media-error-text").startswith("This video cannot be played here.")
    link = page.locator("#media-error-link")
    assert link.get_attribute("href").startswith("https://example.com/videos/9003.mp4#t=")
    assert link.get_attribute("rel") == "noopener noreferrer" and page.locator("#player").is_hidden()
    page.screenshot(path=str(tmp_path / "6-cannot-play.png"), full_page=True)
    print(f"screenshots in {tmp_path}")


@pytest.mark.slow
def test_the_api_answers_with_moments_that_play_and_serves_the_media_with_ranges(server) -> None:
    reply = http_json(f"{server}/api/ask", {"question": "What does the Threshold setting do?", "top_k": 2})
    assert reply["model"] is None and reply["answer"] and len(reply["results"]) == 2
    moment = reply["citations"][0]
    assert moment["video_id"] == 9004 and moment["player"] == {
        "kind": "video",
        "src": f"/media/9004#t={moment['time']:.1f}",
    }
    top = reply["results"][0]
    assert top["before"] + top["sentence"] + top["after"] and top["sentence"] in reply["answer"]
    request = urllib.request.Request(f"{server}/media/9004", headers={"Range": "bytes=100-199"})
    with urllib.request.urlopen(request) as media:
        assert media.status == 206 and media.headers["Content-Type"] == "video/webm" and len(media.read()) == 100
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{server}/media/9001")
    assert missing.value.code == 404


@pytest.mark.slow
def test_a_chat_model_key_never_reaches_the_browser(served_data, monkeypatch) -> None:
    key = "sk-serve-test-0123456789abcdef"
    fake = FakeChatServer()
    try:
        for name, value in {**served_data, "PSTUTS_CHAT_MODEL": "fake", "PSTUTS_CHAT_BASE_URL": fake.url}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("PSTUTS_CHAT_API_KEY", key)
        engine = Engine.from_resources(resources_from_env())
        client = TestClient(create_app(engine))
        fake.reply(json.dumps({"answer": "Use <b>Unsharp Mask</b> and raise Amount.", "moment": "07:07"}))
        reply = client.post("/api/ask", json={"question": "How do I sharpen?"})
        fake.reply(status=500)  # the server's error quotes the key it was sent
        failed = client.post("/api/ask", json={"question": "How do I sharpen?"})
        seen = [reply.text, failed.text, client.get("/api/status").text, client.get("/").text]
        seen += [client.get(f"/static/{name}").text for name in ("app.js", "style.css")]
        seen.append(client.get("/openapi.json").text)
        engine.close()  # the page lets go when another process waits for the store; a test lets go when done
    finally:
        fake.close()
    assert fake.requests and reply.json()["model"] == "fake"
    assert reply.json()["answer"].startswith("Use <b>Unsharp Mask</b>")  # data for the page to show as text
    assert reply.json()["invented_citations"] == 1 and failed.json()["error"] and failed.json()["model"] is None
    assert all(key not in text for text in seen)


@pytest.mark.slow
def test_an_open_page_lets_go_of_the_store_for_a_search_even_after_its_environment_changed(served_data, monkeypatch):
    for name, value in {**served_data, "PSTUTS_CHAT_MODEL": ""}.items():
        monkeypatch.setenv(name, value)
    engine = Engine.from_resources(resources_from_env())
    try:
        assert engine.status().points  # the page now holds the store open
        monkeypatch.undo()  # where the storage folder came from is gone: the page must still see who waits
        search = subprocess.run(
            [str(BIN / "pstuts"), "search", "sharpen", "--top-k", "1"],
            env={**os.environ, **served_data},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        engine.close()
    assert search.returncode == 0 and "Unsharp Mask" in search.stdout, search.stdout + search.stderr


GRADIENT_CAPTIONS = """WEBVTT

00:00:01.000 --> 00:00:05.000
Today we tint a photo with a gradient map adjustment layer.

00:00:05.000 --> 00:00:10.000
Open the adjustments panel and click the gradient map icon.

00:00:10.000 --> 00:00:15.000
Pick a purple to orange gradient and lower the layer opacity.
"""


@pytest.mark.slow
def test_an_ingest_while_the_page_is_up_never_fails_a_question_and_the_next_one_sees_its_video(server, served_data):
    """Last in the module: it adds a video to the served data."""
    import threading

    question = {"question": "How do I tint a photo with a gradient map?", "top_k": 3}
    assert all(r["video_id"] != 9010 for r in http_json(f"{server}/api/ask", question)["results"])
    (Path(served_data["PSTUTS_DATA_DIR"]) / "9010 - Gradient maps.vtt").write_text(GRADIENT_CAPTIONS)
    answered: list[int] = []
    done = threading.Event()

    def keep_asking() -> None:
        while not done.is_set():
            try:
                http_json(f"{server}/api/ask", {"question": "How do I sharpen?", "top_k": 1})
                answered.append(200)
            except urllib.error.HTTPError as error:
                answered.append(error.code)

    asker = threading.Thread(target=keep_asking)
    asker.start()
    try:
        ingest = subprocess.run(
            [str(BIN / "pstuts"), "ingest"], env={**os.environ, **served_data}, capture_output=True, text=True
        )
    finally:
        done.set()
        asker.join()
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert answered and set(answered) == {200}, answered  # during the write step a question waits for the lock
    assert http_json(f"{server}/api/ask", question)["results"][0]["video_id"] == 9010
