"""The sha256 of a model file, computed once per file version: what every model folder is checked and named by."""

import functools
import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    """The file's sha256, hashed again only when its size or modification time changed since the last check."""
    stat = path.stat()
    return _sha256_of(path.resolve(), stat.st_size, stat.st_mtime_ns)


@functools.cache
def _sha256_of(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
