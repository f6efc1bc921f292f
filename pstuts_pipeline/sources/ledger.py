"""What the last reconcile saw in the store (and the CLI in the Dagster instance), so a no-op needs neither.

Opening the store, importing Dagster's instance storage and the engine take time that an unchanged data folder
does not need (docs/benchmarks.md measures what the ledger saves). After each reconcile the ledger records the
videos' stored fingerprints, stamped with the store's record file (size, modification time, inode and first
bytes), whose token every Edge writer renews before its first write; the CLI adds the registered partitions,
stamped with the instance's files, and, when it found every video stored as it is, the data folder's files with the
settings it checked them with, so a no-op need not even read the folder (at 10,000 videos, most of its time). While those files are untouched, the record is what a fresh read would
return; any write, by us or anyone else, moves a stamp and sends the next reconcile the slow way. Only a local
store and Dagster's default SQLite storage have files to stamp; with a server or other storage that part is not
used. The sensor relies on the store part only: under `dagster dev` the instance's files change every few
seconds. No Dagster or Qdrant imports.
"""

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

LEDGER_FILE = "pstuts_ingest_ledger.json"
LEDGER_VERSION = 3
# Dagster instance settings that move its storage out of DAGSTER_HOME's SQLite files.
STORAGE_SETTINGS = ("storage", "run_storage", "event_log_storage", "schedule_storage")

Stamp = list[int | str] | None


def file_stamp(path: Path) -> Stamp:
    """What changes whenever a file is written; None if it does not exist.

    Opened without blocking and read only if regular: a FIFO named like a source file would hang a plain open, and
    a link to /dev/zero has no end. What cannot be opened stamps as its error, so it never looks unchanged and fine.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        return [f"unreadable: errno {error.errno}"]
    try:
        info = os.fstat(fd)
        head = os.read(fd, 4096) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    return [info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode, hashlib.sha1(head).hexdigest()]


def sqlite_files(database: Path) -> list[Path]:
    """A SQLite database and its write-ahead log, where recent commits live until a checkpoint."""
    return [database, database.with_name(database.name + "-wal")]


def qdrant_local_files(qdrant_path: Path, collection: str) -> list[Path]:
    """The file that changes when a local collection does: the record every Edge writer renews before it writes
    (`search/edge_store.py`). Not the shard's own files: Edge rewrites its edge_config.json on every load."""
    return [qdrant_path / f"{collection}.json"]


def dagster_partition_files(dagster_home: Path) -> list[Path] | None:
    """The files that hold a default instance's dynamic partitions, or None for any other storage."""
    config = dagster_home / "dagster.yaml"
    if config.exists():
        import yaml

        settings = yaml.safe_load(config.read_text()) or {}
        if not isinstance(settings, dict) or any(key in settings for key in STORAGE_SETTINGS):
            return None
    return [config, *sqlite_files(dagster_home / "history" / "runs" / "index.db")]


def stamps(paths: list[Path]) -> dict[str, Stamp]:
    return {str(p): file_stamp(p) for p in paths}


@dataclass
class Ledger:
    """One ingest's view of the store and the instance, and the stamps of the files it came from."""

    key: dict[str, str]
    stamps: dict[str, Stamp]
    fingerprints: dict[str, list[str]] = field(default_factory=dict)
    points: int = 0
    # The registered partitions and the stamps of the instance files they came from (CLI only).
    partitions: list[str] | None = None
    partition_stamps: dict[str, Stamp] | None = None
    # The data folder's files when the CLI last found every video stored as it is now, and the settings it was
    # checked with (`fingerprints.settings_key`): while both hold, a no-op ingest need not read the data folder either.
    sources: dict[str, Stamp] | None = None
    settings: str = ""

    def stored(self) -> dict[int, set[str]]:
        """The fingerprints as `vectorstore.stored_fingerprints` returns them."""
        return {int(video): set(prints) for video, prints in self.fingerprints.items()}

    def still_current(self) -> bool:
        """Whether no Qdrant file it was read from has been written since."""
        return stamps([Path(p) for p in self.stamps]) == self.stamps

    def sources_unchanged(self, files: list[Path], settings: str) -> bool:
        """Whether the data folder holds the same files, untouched, and the settings are those of the last check."""
        return self.sources is not None and self.settings == settings and stamps(files) == self.sources

    def current_partitions(self, dagster_home: Path) -> list[str] | None:
        """The registered partitions if the instance files they were read from are untouched, else None."""
        watched = dagster_partition_files(dagster_home)
        if self.partitions is None or self.partition_stamps is None or watched is None:
            return None
        if sorted(self.partition_stamps) != sorted(str(p) for p in watched):
            return None
        return self.partitions if stamps(watched) == self.partition_stamps else None


def ledger_key(qdrant_path: Path, collection: str, dagster_home: Path) -> dict[str, str]:
    return {"qdrant": str(qdrant_path.resolve()), "collection": collection, "dagster_home": str(dagster_home.resolve())}


def read_ledger(qdrant_path: Path, collection: str, dagster_home: Path) -> Ledger | None:
    """The ledger for this store and instance if it is still current, else None."""
    path = dagster_home / LEDGER_FILE
    try:
        raw = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if raw.pop("version", None) != LEDGER_VERSION:
        return None
    try:
        ledger = Ledger(**raw)
    except TypeError:
        return None
    watched = qdrant_local_files(qdrant_path, collection)
    if ledger.key != ledger_key(qdrant_path, collection, dagster_home):
        return None
    if sorted(ledger.stamps) != sorted(str(p) for p in watched) or not ledger.still_current():
        return None
    return ledger


def write_ledger(dagster_home: Path, ledger: Ledger) -> None:
    """Replace the ledger in one step, so a reader never sees half of one."""
    path = dagster_home / LEDGER_FILE
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"version": LEDGER_VERSION, **asdict(ledger)}))
    temporary.replace(path)
