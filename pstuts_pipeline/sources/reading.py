"""The one way source files are read: regular files only, bounded in bytes, within a time limit.

A FIFO named `x.json` would block `open` and `read` forever, a symlink to /dev/zero would read until memory runs
out, and a stalled network mount would hold every other video back; each is refused naming the file instead.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

from pstuts_pipeline.settings import source_limits

BLOCK = 1 << 20
KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class UnreadableFile(OSError):
    """A source file that is not read: not a regular file, too big, too slow, or refused by the OS."""


def file_kind(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def read_source_bytes(path: Path, max_bytes: int | None = None, timeout_s: float | None = None) -> bytes:
    """A regular file's bytes, or UnreadableFile saying why not (its message needs only the file's name before it).

    O_NONBLOCK makes opening a FIFO return at once (a regular file ignores the flag); fstat on the opened
    descriptor, not the path, so a file swapped after the check is still the one checked.
    """
    limits = source_limits()
    limit = limits.max_file_bytes if max_bytes is None else max_bytes
    timeout = limits.read_timeout_s if timeout_s is None else timeout_s
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise UnreadableFile(error.errno or errno.EIO, f"cannot be read: {error.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableFile(errno.EINVAL, f"is {file_kind(mode)}, not a regular file: not read")
        deadline = time.monotonic() + timeout
        blocks: list[bytes] = []
        size = 0
        while True:
            block = os.read(fd, BLOCK)
            if not block:
                return b"".join(blocks)
            size += len(block)
            if size > limit:
                raise UnreadableFile(errno.EFBIG, f"is larger than {limit:,} bytes (PSTUTS_MAX_FILE_BYTES): not read")
            if time.monotonic() > deadline:
                raise UnreadableFile(
                    errno.ETIMEDOUT, f"took longer than {timeout:g} s to read (PSTUTS_READ_TIMEOUT_S): not read"
                )
            blocks.append(block)
    except UnreadableFile:
        raise
    except OSError as error:
        raise UnreadableFile(error.errno or errno.EIO, f"cannot be read: {error.strerror}") from None
    finally:
        os.close(fd)
