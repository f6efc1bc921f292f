"""The in-domain reranker as an asset: a cross-encoder trained on PsTuts questions, written as a versioned folder."""

import dagster as dg
from pydantic import Field

from pstuts_pipeline.defs.assets.training import (
    TUNING_GROUP,
    TrainingConfig,
    materialize_in_process,
    model_version_result,
)
from pstuts_pipeline.training import reranker as reranker_training

DEFAULTS = reranker_training.RerankerSettings()


class RerankerConfig(TrainingConfig):
    """The reranker's training; versions go to PSTUTS_RERANKERS_DIR unless out_dir is set."""

    epochs: float = Field(default=DEFAULTS.epochs, description="Passes over the training questions.")
    batch_size: int = Field(default=DEFAULTS.batch_size, description="Questions per step, each with its negatives.")
    max_steps: int = Field(default=DEFAULTS.max_steps, description="Cap on optimizer steps (0 = no cap).")
    max_questions: int = Field(default=DEFAULTS.max_questions, description="Training questions used (0 = all).")
    negatives: int = Field(default=DEFAULTS.negatives, description="First-stage hard negatives per question.")
    dev_questions: int = Field(default=DEFAULTS.dev_questions, description="Dev questions checked while training.")

    def settings(self) -> reranker_training.RerankerSettings:
        return self.settings_for(reranker_training.RerankerSettings)


@dg.asset(group_name=TUNING_GROUP, kinds={"pytorch"})
def reranker(context: dg.AssetExecutionContext, config: RerankerConfig) -> dg.MaterializeResult:
    """A cross-encoder from all-MiniLM-L6-v2 trained to pick the answer phrase over other videos' first-stage hits."""
    result = config.train_with(reranker_training.train, config.settings(), context.log.info)
    return model_version_result(result.folder, result.card, "dev_untrained", "dev_trained")


def materialize_reranker(instance: dg.DagsterInstance, config: RerankerConfig) -> dg.AssetMaterialization:
    """Run the asset in-process against an instance (as `pstuts tune-reranker` does) and return its materialization."""
    return materialize_in_process(reranker, instance, config)
