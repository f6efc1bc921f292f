"""Issue 24: the temporal kernel and the chunk-context builder on hand-made cases, then both on real videos."""

import re

import numpy as np
import pytest
from qdrant_client import models

from pstuts_pipeline.search import context, retrieval, vectorstore
from pstuts_pipeline.search.fingerprints import build_fingerprint
from pstuts_pipeline.search.temporal import Place, TemporalSettings, kernel, smoothed


def test_the_kernel_is_one_at_zero_and_falls_off_as_a_gaussian():
    assert kernel(0.0, 30.0) == pytest.approx(1.0)
    assert kernel(30.0, 30.0) == pytest.approx(np.exp(-0.5))
    assert kernel(-60.0, 30.0) == pytest.approx(np.exp(-2.0))
    assert kernel(np.array([0.0, 10.0, 1000.0]), 10.0) == pytest.approx([1.0, np.exp(-0.5), 0.0])


def test_a_chunk_gains_from_its_near_same_video_neighbours_only():
    places = {
        "a": Place(1, 0.0, 20.0),  # midpoint 10
        "b": Place(1, 20.0, 40.0),  # midpoint 30: 20 s from a
        "c": Place(1, 200.0, 220.0),  # far from both
        "d": Place(2, 20.0, 40.0),  # same time, another video
        "e": Place(1, 40.0, 60.0),  # the floor: adds nothing to anyone
    }
    scores = {"a": 1.0, "b": 2.0, "c": 2.5, "d": 3.0, "e": 0.0}
    out = smoothed(scores, places, TemporalSettings(weight=1.0, sigma_s=20.0))
    near = float(kernel(20.0, 20.0))
    assert out["a"] == pytest.approx(1.0 + near * 2.0, abs=1e-6)
    assert out["b"] == pytest.approx(2.0 + near * 1.0, abs=1e-6)
    assert out["c"] == pytest.approx(2.5, abs=1e-3)  # 190 s away: nothing
    assert out["d"] == 3.0  # alone in its video
    assert out["e"] > 0.0  # at the floor itself, it still gains from b beside it
    # Off: unchanged. On: b (with a beside it) now passes c, which stands alone.
    assert smoothed(scores, places, TemporalSettings()) == scores
    assert out["b"] > out["c"]


def test_the_link_moves_to_a_near_neighbours_phrase_only_when_it_scores_higher_after_the_discount():
    def chunk(pid: str, start: float, stop: float, link_scores: list[float]) -> retrieval.Candidate:
        metadata = {"video_id": 1, "start": start, "stop": stop}  # as stored: every point names its video
        record = models.Record(id=pid, payload={"metadata": metadata, "page_content": ""})
        return retrieval.Candidate(record, 0.0, [0], ["x"], np.array(link_scores))

    here, near, far = chunk("a", 0, 20, [0.5]), chunk("b", 20, 40, [0.9]), chunk("c", 100, 120, [0.95])
    settings = TemporalSettings(sigma_s=30.0)
    retrieval.relink_to_neighbours([here], {"a": [near, far]}, settings)
    assert here.link_from is near  # 0.9 * kernel(20 s) = 0.72 > 0.5; c's 0.95 * kernel(100 s) is 0.004
    strong = chunk("a", 0, 20, [0.8])
    retrieval.relink_to_neighbours([strong], {"a": [near, far]}, settings)
    assert strong.link_from is None


def test_the_title_and_description_are_reduced_to_their_content_words():
    title = "Use layers for ultimate flexibility and control"
    desc = "Learn how to use layers to create designs, fix photos, or build collages."
    assert context.video_context(title, desc, 6) == "layers ultimate flexibility control designs fix"
    assert context.content_words("How to use the Pen tool in Photoshop") == ["pen", "tool"]


def test_neighbour_terms_are_the_words_beside_a_chunk_it_lacks_rarest_in_the_video_first():
    texts = [
        "Open the mask panel and choose feather.",
        "Now drag it over here.",
        "Brush the mask with black, brush again.",
        "Save the file.",
    ]
    # Beside chunk 1: chunks 0 and 2. "brush" is said twice in one chunk (2 x log(1 + 4/1)); "mask" twice but
    # in two chunks (2 x log(1 + 4/2)); each other word once in one chunk, ties in alphabetical order.
    assert context.neighbour_terms(texts, 1, 3) == ["brush", "mask", "black"]
    assert "save" not in context.neighbour_terms(texts, 1, 8)  # two chunks away
    assert context.neighbour_terms(texts, 3, 2) == ["brush", "black"]  # the last chunk has one side
    assert "mask" not in context.neighbour_terms(texts, 0, 8)  # chunk 0 says it already


def test_chunk_contexts_follow_the_settings_and_off_is_empty():
    texts = ["Open the mask panel.", "Drag it here.", "Brush the mask."]
    off = context.ContextSettings()
    assert not off.enabled and context.chunk_contexts("T", "D", texts, off) == ["", "", ""]
    titled = context.chunk_contexts("Layer masks", "Hide parts of a layer", texts, context.ContextSettings("title"))
    assert titled == ["layer masks hide parts"] * 3
    both = context.chunk_contexts("Layer masks", "", texts, context.ContextSettings("title+neighbours", "both"))
    assert both[1].startswith("layer masks ") and "mask" in both[1].split()
    assert context.contextual_text("layer masks", "Drag it here.") == "layer masks\nDrag it here."
    assert context.contextual_text("", "Drag it here.") == "Drag it here."
    with pytest.raises(ValueError, match="PSTUTS_CHUNK_CONTEXT"):
        context.ContextSettings("chapter")
    assert context.ContextSettings("title", "dense").dense and not context.ContextSettings("title", "dense").bm25


def test_the_fingerprint_holds_when_context_is_off_and_changes_with_it():
    today = build_fingerprint("hash", "model", "settings")
    assert build_fingerprint("hash", "model", "settings", None) == today
    on = build_fingerprint("hash", "model", "settings", context.ContextSettings("title"))
    assert on != today
    assert on != build_fingerprint("hash", "model", "settings", context.ContextSettings("title", "both"))


def test_bm25_terms_take_the_contextual_text_when_given():
    from pstuts_pipeline.chunking.chunker import TimedChunk
    from pstuts_pipeline.chunking.time_repair import Phrase

    chunk = TimedChunk(0, (Phrase(0, "Drag it here.", 0.0, 2.0),))
    video = vectorstore.VideoInfo(1, "Layer masks", "", "u", "h")
    plain = vectorstore.build_points(video, [chunk], [[1.0]], [[[1.0]]], "f")[0]
    situated = vectorstore.build_points(video, [chunk], [[1.0]], [[[1.0]]], "f", ["layer masks\nDrag it here."])[0]
    assert len(situated.vector["bm25"].indices) == len(plain.vector["bm25"].indices) + 2
    assert situated.payload == plain.payload  # the stored text stays the chunk's own


def first_stage_of(searchable, questions: list[str]) -> tuple:
    """The collection's client context, the question vectors and their first-stage rankings."""
    embeddings, qdrant = searchable["resources"]["embeddings"], searchable["resources"]["qdrant"]
    vectors = embeddings.query_embeddings().embed_documents([retrieval.dense_query_text(q) for q in questions])
    return qdrant, vectors


@pytest.mark.slow
def test_the_temporal_signal_reorders_real_results_by_their_neighbours_evidence(searchable, monkeypatch):
    questions = [q.text for q in searchable["questions"]]
    qdrant, vectors = first_stage_of(searchable, questions)
    on = retrieval.SearchSettings(temporal=TemporalSettings(weight=1.0, sigma_s=30.0))
    with qdrant.get_store() as store:
        rankings = retrieval.first_stage(store, questions, vectors, retrieval.CANDIDATES)
        before = retrieval.second_stage(store, questions, vectors, rankings, 5)
        after = retrieval.second_stage(store, questions, vectors, rankings, 5, on)
        fused = [dict(retrieval.fuse(list(r.values()))) for r in rankings]
        places = retrieval.places_of(store, list({p for f in fused for p in f}))
    changed = 0
    for scores, old, new in zip(fused, before, after, strict=True):
        lift = {p: s - scores[p] for p, s in smoothed(scores, places, on.temporal).items()}
        old_ids = [vectorstore.point_id(r.video_id, r.chunk_index) for r in old]
        new_ids = [vectorstore.point_id(r.video_id, r.chunk_index) for r in new]
        changed += old_ids != new_ids
        # What rose into the top 5 rose on its neighbours' evidence: more of it than what it pushed out.
        for risen in set(new_ids) - set(old_ids):
            assert all(lift[risen] > lift[fallen] for fallen in set(old_ids) - set(new_ids))
    assert changed >= len(questions) // 10, f"the signal changed {changed} of {len(questions)} rankings"
    # search_many reads the same setting from the environment.
    monkeypatch.setenv("PSTUTS_TEMPORAL_WEIGHT", "1.0")
    embeddings = searchable["resources"]["embeddings"]
    with qdrant.get_store() as store:
        from_env = retrieval.search_many(store, embeddings.query_embeddings(), embeddings.model_id, questions[:20], 5)
    assert [[r.chunk_index for r in rs] for rs in from_env] == [[r.chunk_index for r in rs] for rs in after[:20]]


@pytest.mark.slow
def test_turning_chunk_context_on_reingests_and_puts_the_title_in_every_chunks_bm25_terms(searchable, monkeypatch):
    from pstuts_pipeline.cli.ingest import ingest
    from pstuts_pipeline.definitions import build_definitions
    from pstuts_pipeline.defs.resources import resources_from_env
    from pstuts_pipeline.search import lexical

    qdrant = searchable["resources"]["qdrant"]
    for key, value in searchable["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PSTUTS_CHUNK_CONTEXT", "title")
    report = ingest(build_definitions(resources_from_env()), searchable["instance"])
    assert report.ok and len(report.plan.to_ingest) == 3, report.plan  # a new fingerprint: every video again
    with qdrant.get_store() as store:
        for video_id, records in vectorstore.points_of_videos(
            store, [q.video_id for q in searchable["questions"]]
        ).items():
            meta = records[0].payload["metadata"]
            title_terms = {lexical.term_index(t) for t in lexical.tokenize(context.video_context(meta["title"], ""))}
            stored = store.retrieve([r.id for r in records], with_vectors=["bm25"])
            for point in stored:
                assert title_terms <= set(point.vector["bm25"].indices), (video_id, meta["title"])
                assert (
                    point.payload["page_content"]
                    == next(r for r in records if r.id == point.id).payload["page_content"]
                )
    # Unchanged settings: nothing to do.
    again = ingest(build_definitions(resources_from_env()), searchable["instance"])
    assert again.ok and again.plan.to_ingest == []


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "PSTUTS_TEMPORAL_WEIGHT",
            "-0.5",
            "PSTUTS_TEMPORAL_WEIGHT is '-0.5'; input should be greater than or equal to 0",
        ),
        ("PSTUTS_CHUNK_VECTOR_WEIGHT", "nan", "PSTUTS_CHUNK_VECTOR_WEIGHT is 'nan'; input should be a finite number"),
        ("PSTUTS_TEMPORAL_WEIGHT", "lots", "PSTUTS_TEMPORAL_WEIGHT is 'lots'; input should be a valid number"),
        ("PSTUTS_TEMPORAL_SIGMA_S", "0", "PSTUTS_TEMPORAL_SIGMA_S is '0'; input should be greater than 0"),
    ],
)
def test_search_settings_refuse_weights_and_widths_that_mean_nothing(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        retrieval.SearchSettings.from_env()


def test_search_settings_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("PSTUTS_TEMPORAL_WEIGHT", "0.2")
    monkeypatch.setenv("PSTUTS_TEMPORAL_SIGMA_S", "40")
    monkeypatch.setenv("PSTUTS_TEMPORAL_RELINK", "1")
    settings = retrieval.SearchSettings.from_env()
    assert settings.temporal == TemporalSettings(weight=0.2, sigma_s=40.0, relink=True) and settings.chunk_weight == 0
