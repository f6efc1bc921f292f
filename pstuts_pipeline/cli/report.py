"""What an ingest did, and the verdict of one with nothing to do, reached without importing Dagster."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pstuts_pipeline.search import fingerprints
from pstuts_pipeline.settings import ChunkingSettings, EmbeddingSettings, StoreSettings, load, paths
from pstuts_pipeline.sources import ledger as ledgers
from pstuts_pipeline.sources import source_files
from pstuts_pipeline.sources.reconciliation import Reconciliation, reconcile_folder


@dataclass
class IngestReport:
    """What an ingest did, for the summary and the exit code."""

    plan: Reconciliation
    run_ids: list[str] = field(default_factory=list)
    # One line per failed run: its videos, why, and where its tracebacks are.
    failed_runs: list[str] = field(default_factory=list)
    # The videos of failed runs (to ingest, but not ingested), each with its run's cause.
    unfinished: dict[str, str] = field(default_factory=dict)
    reclaimed: list[str] = field(default_factory=list)
    chunks: int = 0
    points_in_collection: int = 0
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=dict)
    dagster_home: str = ""
    # True when the ledger showed nothing to do, so neither Qdrant nor the Dagster instance was opened.
    from_ledger: bool = False

    @property
    def ok(self) -> bool:
        return not self.plan.failed and not self.failed_runs and not self.plan.removal_refused


@dataclass(frozen=True)
class IngestSettings:
    """What an ingest with nothing to do is decided from: the data folder, the model, the chunking, the store."""

    data_dir: Path
    embeddings: EmbeddingSettings
    chunking: ChunkingSettings
    store: StoreSettings

    @classmethod
    def from_env(cls) -> IngestSettings:
        """Read from the environment, as the resources would be, without building them (nor importing Dagster)."""
        return cls(paths().data_dir, load(EmbeddingSettings), load(ChunkingSettings), load(StoreSettings))

    @classmethod
    def of(cls, resources: Mapping[str, Any]) -> IngestSettings:
        """The same, from built resources (`defs.resources`)."""
        return cls(
            resources["transcript_source"].path(),
            resources["embeddings"].typed(),
            resources["chunker"].typed(),
            resources["qdrant"].typed(),
        )


def unchanged_report(
    config: IngestSettings, only: list[str] | None = None, allow_removal: bool = False
) -> IngestReport | None:
    """The report of an ingest with nothing to do, decided from the ledger; None when there is work or no proof.

    Needs neither Qdrant nor the Dagster instance nor Dagster itself (nor their imports), which is most of a no-op
    ingest's time.
    """
    started = time.perf_counter()
    if config.store.url:
        return None
    home = paths().dagster_home
    ledger = ledgers.read_ledger(config.store.folder(), config.store.collection, home)
    if ledger is None or (partitions := ledger.current_partitions(home)) is None:
        return None

    def from_ledger(plan: Reconciliation) -> IngestReport:
        seconds = round(time.perf_counter() - started, 2)
        return IngestReport(
            plan, points_in_collection=ledger.points, seconds=seconds, dagster_home=str(home), from_ledger=True
        )

    folder = config.data_dir
    fingerprint_of = fingerprints.fingerprint_function(config.embeddings, config.chunking)
    if not only and ledger.sources_unchanged(source_files(folder), fingerprints.settings_key(folder, fingerprint_of)):
        # The same files, untouched, with the same settings: the last check found every video stored as it is.
        return from_ledger(Reconciliation(unchanged=sorted(ledger.fingerprints, key=int)))
    catalog, result = reconcile_folder(
        folder, home, ledger.stored(), fingerprint_of, only=only, allow_removal=allow_removal, wait=True
    )
    if result.has_work or not set(catalog.videos) <= set(partitions):
        return None
    return from_ledger(result)
