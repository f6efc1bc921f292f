"""What the training assets share: their config, running one in-process as the CLI does, and its materialization."""

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field

from pstuts_pipeline.training import tuning

TUNING_GROUP = "tuning"
DEFAULTS = tuning.TuningSettings()


class TrainingConfig(dg.Config):
    """What to train on and how; dev files only validate, they are never trained on."""

    train_files: list[str] = Field(description="PsTuts-VQA-format JSON files whose questions train the model.")
    dev_files: list[str] = Field(description="PsTuts-VQA-format JSON files for validation (never trained on).")
    epochs: float = Field(default=DEFAULTS.epochs, description="Passes over the training pairs.")
    batch_size: int = Field(default=DEFAULTS.batch_size, description="Pairs per step (in-batch negatives).")
    max_steps: int = Field(default=DEFAULTS.max_steps, description="Cap on optimizer steps (0 = no cap).")
    learning_rate: float = Field(default=DEFAULTS.learning_rate, description="Peak learning rate.")
    eval_steps: int = Field(default=DEFAULTS.eval_steps, description="Dev evaluation every N steps (0 = start/end).")
    threads: int = Field(default=DEFAULTS.threads, description="Torch threads (1 suits a shared CPU best).")
    out_dir: str = Field(default="", description="Parent folder of model versions (default: under the storage dir).")

    def settings_for(self, settings_class: type) -> Any:
        """Training settings of `settings_class` from the fields it shares with this config."""
        names = {f.name for f in dataclasses.fields(settings_class)}
        return settings_class(**{k: v for k, v in self.model_dump().items() if k in names})

    def train_with(self, train: Callable[..., Any], settings: Any, log: Callable[[str], None]) -> Any:
        """Call a training function on this config's files and folder; unusable inputs fail the run, not retried."""
        try:
            return train(
                [Path(f) for f in self.train_files],
                [Path(f) for f in self.dev_files],
                Path(self.out_dir) if self.out_dir else None,
                settings,
                log=log,
            )
        except (tuning.TuningDataError, FileNotFoundError) as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from exc


def model_version_result(folder: Path, card: dict, before: str, after: str) -> dg.MaterializeResult:
    """A trained model version as a materialization: its folder, hashes, data, settings and dev metrics.

    `before` and `after` name the card's dev metrics of the starting and the trained model; the data version is the
    model's hash, so assets reading it see a new version only when the weights change.
    """
    metrics = card["metrics"]
    frame = pd.DataFrame({before.removeprefix("dev_"): metrics[before], after.removeprefix("dev_"): metrics[after]})
    frame["gain"] = frame.iloc[:, 1] - frame.iloc[:, 0]
    return dg.MaterializeResult(
        metadata={
            "model_folder": dg.MetadataValue.path(str(folder)),
            "base_model_sha256": card["base_model"]["sha256"],
            "model_sha256": card["model_sha256"],
            "pairs": card["pairs"],
            "steps": card["steps"],
            "training_seconds": card["seconds"]["training"],
            "seconds": card["seconds"]["total"],
            **{f"dev_{name}": value for name, value in metrics[after].items()},
            "dev_metrics": dg.MetadataValue.md(frame.round(4).to_markdown()),
            "training_data": dg.MetadataValue.json(card["training_data"]),
            "settings": dg.MetadataValue.json(card["settings"]),
        },
        data_version=dg.DataVersion(card["model_sha256"]),
    )


def materialize_in_process(
    asset: dg.AssetsDefinition, instance: dg.DagsterInstance, config: dg.Config, log_level: str = "INFO"
) -> dg.AssetMaterialization:
    """Run a training asset in-process against an instance, as the CLI does; a failure says why in one line."""
    name = asset.key.to_user_string()
    result = dg.materialize(
        [asset],
        instance=instance,
        run_config={
            "ops": {name: {"config": config.model_dump()}},
            "loggers": {"console": {"config": {"log_level": log_level}}},
        },
        tags={"pstuts/trigger": "cli"},
        raise_on_error=False,
    )
    if not result.success:
        failure = result.failure_data_for_node(name)
        detail = "see the run's logs"
        if failure is not None and failure.user_failure_data is not None:
            detail = failure.user_failure_data.description or detail
        elif failure is not None and failure.error is not None:
            detail = failure.error.message.strip()
        raise RuntimeError(f"{name} failed (run {result.run_id}): {detail}")
    return result.asset_materializations_for_node(name)[0]
