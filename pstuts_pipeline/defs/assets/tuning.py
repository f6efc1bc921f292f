"""The tuned embedder as an asset: all-MiniLM-L6-v2 fine-tuned on PsTuts questions, as a versioned folder."""

import dagster as dg

from pstuts_pipeline.defs.assets.training import (
    TUNING_GROUP,
    TrainingConfig,
    materialize_in_process,
    model_version_result,
)
from pstuts_pipeline.training import tuning


class TunedEmbedderConfig(TrainingConfig):
    """The embedder's training; versions go to PSTUTS_TUNED_MODELS_DIR unless out_dir is set."""

    def settings(self) -> tuning.TuningSettings:
        return self.settings_for(tuning.TuningSettings)


@dg.asset(group_name=TUNING_GROUP, kinds={"pytorch"})
def tuned_embedder(context: dg.AssetExecutionContext, config: TunedEmbedderConfig) -> dg.MaterializeResult:
    """all-MiniLM-L6-v2 fine-tuned on PsTuts-VQA questions, written as a new versioned model folder."""
    result = config.train_with(tuning.train, config.settings(), context.log.info)
    return model_version_result(result.folder, result.card, "dev_base", "dev_tuned")


def materialize_tuned_embedder(
    instance: dg.DagsterInstance, config: TunedEmbedderConfig, log_level: str = "INFO"
) -> dg.AssetMaterialization:
    """Run the asset in-process against an instance (as `pstuts tune` does) and return its materialization."""
    return materialize_in_process(tuned_embedder, instance, config, log_level)
