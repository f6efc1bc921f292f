"""Fresh folders and child processes for one measurement: `pstuts` as a user runs it, timed, with its peak memory."""

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pstuts_pipeline_tests.support import REPO
from pstuts_pipeline_tests.support.pstuts_vqa import link_into

# Our own settings must not leak into the children from the calling shell.
CLEARED_ENV = ("DAGSTER_HOME", "QDRANT_URL", "QDRANT_API_KEY", "OPENAI_BASE_URL")


@dataclass
class Run:
    """One child process: what it was, how long it took, how much memory it peaked at."""

    name: str
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    returncode: int
    output: str = field(repr=False, default="")
    details: dict = field(default_factory=dict)


def run_child(name: str, command: list[str], env: dict[str, str], log_dir: Path) -> Run:
    """Run a command to completion; its wall time and its own peak RSS (wait4, not the whole family's history)."""
    log = log_dir / f"{name}.log"
    with log.open("w") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(errors="replace")
    cpu = round(usage.ru_utime + usage.ru_stime, 2)
    run = Run(name, round(seconds, 2), cpu, round(usage.ru_maxrss / 1024, 1), process.returncode, output)
    if run.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {run.returncode}); its output is in {log}:\n{output[-3000:]}")
    return run


def pstuts_command() -> list[str]:
    script = Path(sys.executable).parent / "pstuts"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pstuts_pipeline.cli.app"]


def table_value(output: str, row: str) -> int:
    """A number from the `pstuts ingest` summary table."""
    match = re.search(rf"{re.escape(row)}\s*│\s*(\d+)", output)
    if not match:
        raise RuntimeError(f"no '{row}' row in the pstuts ingest output:\n{output[-2000:]}")
    return int(match.group(1))


class Workspace:
    """Fresh folders for one measurement: data (symlinks or written files), storage, Dagster home."""

    def __init__(self, root: Path, name: str, settings: dict[str, str] | None = None):
        self.settings = settings or {}
        self.root = root / name
        shutil.rmtree(self.root, ignore_errors=True)
        self.data = self.root / "data"
        self.storage = self.root / "storage"
        self.home = self.storage / "dagster_home"
        self.logs = self.root / "logs"
        for folder in (self.data, self.home, self.logs):
            folder.mkdir(parents=True)

    def link(self, files: list[Path]) -> None:
        link_into(self.data, files)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PSTUTS_") and k not in CLEARED_ENV}
        env.update(PSTUTS_DATA_DIR=str(self.data), PSTUTS_STORAGE_DIR=str(self.storage), DAGSTER_HOME=str(self.home))
        # `link` puts links to the licensed splits in the data folder: read them (they lead out of it).
        env.update(PSTUTS_ALLOW_LINKS_OUTSIDE="1")
        return {**env, **self.settings}

    def ingest(self, name: str) -> Run:
        self.last_started = time.time()
        run = run_child(name, [*pstuts_command(), "ingest"], self.env(), self.logs)
        run.details = {
            "videos_ingested": table_value(run.output, "videos ingested"),
            "videos_unchanged": table_value(run.output, "videos unchanged (skipped)"),
            "points": table_value(run.output, "points in collection"),
        }
        return run

    def texts_embedded(self) -> dict[str, int]:
        """What the last ingest's runs sent to the model (their steps' metadata), read from its Dagster instance."""
        import dagster as dg

        with dg.DagsterInstance.from_config(str(self.home)) as instance:

            def total(asset: str, key: str) -> int:
                records = instance.fetch_observations(dg.AssetKey(asset), limit=10_000).records
                # A step logs its run's totals once, as an observation beside each partition's own materialization.
                per_run = {
                    r.run_id: r.asset_observation.metadata[key].value
                    for r in records
                    if r.timestamp >= self.last_started
                }
                return int(sum(per_run.values()))

            windows = total("kamradt_chunks", "windows_embedded")
            collection = total("qdrant_collection", "texts_embedded")
        return {"chunker_windows": windows, "collection_texts": collection, "total": windows + collection}


def machine() -> dict[str, str]:
    cpu = ""
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor()
    memory_kb = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line
    )
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "ram_gb": f"{memory_kb / 1024 / 1024:.1f}",
        "python": platform.python_version(),
    }


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())
