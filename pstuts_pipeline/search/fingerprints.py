"""What a video's stored points were built from, as one short hash (no Qdrant or Dagster imports)."""

import hashlib

# Bump when the points' layout changes (vectors, payload): every video is then ingested again.
SCHEMA_VERSION = 2


def build_fingerprint(source_hash: str, model_id: str, settings: object, context: object = None) -> str:
    """What a video's points were built from: its content, the model, the chunking settings, our schema.

    `context`, the chunk-context settings, counts only when given (on): a collection built without it keeps
    its fingerprints, so turning nothing on re-ingests nothing.
    """
    parts = f"{SCHEMA_VERSION}|{source_hash}|{model_id}|{settings!r}"
    if context is not None:
        parts += f"|{context!r}"
    return hashlib.sha256(parts.encode("utf-8")).hexdigest()[:32]
