"""`pstuts tune` and `pstuts tune-reranker`: the training assets run from the command line, with their figures."""

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict

import typer
from rich.table import Table

from pstuts_pipeline.cli.render import console

if TYPE_CHECKING:
    import dagster as dg

TrainFiles = Annotated[list[Path], typer.Option("--train", help="PsTuts-VQA-format file to train on (repeatable).")]
DevFiles = Annotated[list[Path], typer.Option("--dev", help="File to validate on, never trained on (repeatable).")]
OutDir = Annotated[Path | None, typer.Option("--out", help="Parent folder of model versions.")]
MaxSteps = Annotated[int, typer.Option(min=0, help="Cap on steps (0 = no cap).")]
EvalSteps = Annotated[int, typer.Option(min=0, help="Evaluate on dev every N steps (0 = start and end).")]
Threads = Annotated[
    int, typer.Option(min=1, help="Torch threads (default: all cores; 1 is fastest on a CPU busy with other work).")
]
# A user's machine is rarely shared: train on every core it gives this process.
ALL_CORES = len(os.sched_getaffinity(0))


class TrainingFiles(TypedDict):
    train_files: list[str]
    dev_files: list[str]
    out_dir: str


def training_files(train: list[Path], dev: list[Path], out: Path | None) -> TrainingFiles:
    """The files and output folder of a training command, as the training assets' config takes them."""
    return {
        "train_files": [str(f.resolve()) for f in train],
        "dev_files": [str(f.resolve()) for f in dev],
        "out_dir": str(out.resolve()) if out else "",
    }


def tune(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training pairs.")] = 2.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Pairs per step.")] = 64,
    max_steps: MaxSteps = 0,
    eval_steps: EvalSteps = 0,
    threads: Threads = ALL_CORES,
) -> None:
    """Fine-tune the embedder on the training files' questions (the `tuned_embedder` asset); print the model folder."""
    from pstuts_pipeline.defs.assets.tuning import TunedEmbedderConfig, materialize_tuned_embedder
    from pstuts_pipeline.defs.instance import instance_for_cli

    config = TunedEmbedderConfig(
        **training_files(train, dev, out),
        epochs=epochs,
        batch_size=batch_size,
        max_steps=max_steps,
        eval_steps=eval_steps,
        threads=threads,
    )
    print_trained(
        materialize_tuned_embedder(instance_for_cli(), config),
        "pstuts tune",
        ("pairs", "steps", "training_seconds", "dev_accuracy@5", "dev_mrr@10"),
        "use it: PSTUTS_EMBEDDING_MODEL=<folder below> (or =latest), then `pstuts ingest` into a new collection",
    )


def tune_reranker(
    train: TrainFiles,
    dev: DevFiles,
    out: OutDir = None,
    epochs: Annotated[float, typer.Option(min=0.01, help="Passes over the training questions.")] = 1.0,
    batch_size: Annotated[int, typer.Option(min=2, help="Questions per step.")] = 32,
    max_steps: Annotated[
        int | None, typer.Option(min=0, help="Cap on steps (0 = no cap; default: the asset's, 220).")
    ] = None,
    learning_rate: Annotated[float, typer.Option(min=0, help="Peak learning rate.")] = 5e-5,
    eval_steps: EvalSteps = 0,
    threads: Threads = ALL_CORES,
) -> None:
    """Train the cross-encoder reranker on the training files' questions (the `reranker` asset); print its folder."""
    from pstuts_pipeline.defs.assets.reranker import DEFAULTS, RerankerConfig, materialize_reranker
    from pstuts_pipeline.defs.instance import instance_for_cli

    config = RerankerConfig(
        **training_files(train, dev, out),
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        eval_steps=eval_steps,
        threads=threads,
        max_steps=DEFAULTS.max_steps if max_steps is None else max_steps,
    )
    print_trained(
        materialize_reranker(instance_for_cli(), config),
        "pstuts tune-reranker",
        ("pairs", "steps", "training_seconds", "dev_mrr@10"),
        "use it: PSTUTS_RERANKER=<folder below> (or =latest) with `pstuts search` / `pstuts evaluate`",
    )


def print_trained(event: "dg.AssetMaterialization", title: str, names: tuple[str, ...], hint: str) -> None:
    """A training run's figures and dev metrics, how to use the model, and its folder as the last line."""
    table = Table(title=title, show_header=False)
    for name in names:
        table.add_row(name, str(event.metadata[name].value))
    console.print(table)
    console.print(event.metadata["dev_metrics"].value)
    console.print(hint)
    print(event.metadata["model_folder"].value, flush=True)
