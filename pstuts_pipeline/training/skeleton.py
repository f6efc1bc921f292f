"""The one training skeleton the tuned embedder and the reranker share: arguments, the fit, progress, the card."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pstuts_pipeline.embedding.checksums import sha256_file
from pstuts_pipeline.embedding.versions import BASE_MODEL_NAME, NOTE, Draft, Log


def library_versions() -> dict[str, str]:
    """The versions of the training stack, for the card."""
    import sentence_transformers
    import torch
    import transformers

    return {
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Train with this many torch threads, then give the process its own setting back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively; elsewhere bf16 autocast is slower than float32."""
    import torch

    return bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def shown_metrics(logs: dict[str, Any]) -> dict[str, Any]:
    """A trainer log line with floats to 4 significant digits: a learning rate of 5e-05 must not print as 0.0."""
    return {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in logs.items()}


def timing(done: int, total: int | None, elapsed: float, unit: str) -> str:
    """The training log's and the CLI's progress text: '95 s elapsed, 0.52 steps/s, about 240 s left'.

    Only the elapsed time until some units are done.
    """
    text = f"{elapsed:.0f} s elapsed"
    if total and 0 < done < total and elapsed > 0:
        rate = done / elapsed
        text += f", {rate:.2f} {unit}/s, about {(total - done) / rate:.0f} s left"
    return text


def progress_callback(log: Log):  # -> transformers.TrainerCallback, imported lazily
    """A trainer callback that forwards loss and dev metrics to the caller's log as they come."""
    from transformers import TrainerCallback

    class LogProgress(TrainerCallback):
        started = time.perf_counter()

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201 - transformers' hook
            self.started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001, ANN201 - transformers' hook
            so_far = timing(state.global_step, state.max_steps, time.perf_counter() - self.started, "steps")
            log(f"step {state.global_step}/{state.max_steps} ({so_far}): {shown_metrics(logs or {})}")

    return LogProgress()


def fit(
    trainer_class: type, model: Any, args: Any, columns: dict[str, list[str]], loss: Any, evaluator: Any, log: Log
) -> tuple[Any, float, float]:
    """Train on `columns` with progress going to `log`, not transformers' printer; (trainer, wall s, CPU s)."""
    import transformers
    from datasets import Dataset

    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict(columns),
        loss=loss,
        evaluator=evaluator,
        callbacks=[progress_callback(log)],
    )
    trainer.remove_callback(transformers.PrinterCallback)  # it prints every log to stdout; ours goes to `log`
    wall_started, cpu_started = time.perf_counter(), time.process_time()
    trainer.train()
    return trainer, time.perf_counter() - wall_started, time.process_time() - cpu_started


def history(
    log_history: list[dict[str, Any]], evaluator_name: str, short: Callable[[dict[str, float]], dict[str, float]]
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(losses, dev evaluations) by step from a trainer's log history, metrics under their short names."""
    losses = [{"step": h["step"], "loss": round(h["loss"], 4)} for h in log_history if "loss" in h]
    evals = [
        {"step": h["step"], **short({k: v for k, v in h.items() if evaluator_name in k})}
        for h in log_history
        if any(evaluator_name in k for k in h)
    ]
    return losses, evals


def training_arguments(arguments_class: type, staging: Path, settings: Any, **extra: Any) -> Any:
    """The trainer's arguments from our settings: CPU, no checkpoints, no tqdm, dev checks every `eval_steps`."""
    return arguments_class(
        output_dir=str(staging / "checkpoints"),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps if settings.max_steps > 0 else -1,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup_ratio,
        eval_strategy="steps" if settings.eval_steps > 0 else "no",
        eval_steps=settings.eval_steps if settings.eval_steps > 0 else None,
        save_strategy="no",
        logging_steps=10,
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
        bf16=settings.bf16,
        seed=settings.seed,
        data_seed=settings.seed,
        **extra,
    )


def card(
    draft: Draft,
    train: Any,
    dev: Any,
    settings: Any,
    trainer: Any,
    short: Callable[[dict[str, float]], dict[str, float]],
    evaluator_name: str,
    seconds: dict[str, float],
    **fields: Any,
) -> dict[str, Any]:
    """The card every version carries: what it was made from (with sha256), how, how well, and how long it took."""
    losses, evals = history(trainer.state.log_history, evaluator_name, short)
    return {
        "name": draft.name,
        "created": draft.created.isoformat(),
        "base_model": {"name": BASE_MODEL_NAME, "path": str(draft.base), "sha256": draft.base_sha256},
        "model_sha256": sha256_file(draft.staging / "model.safetensors"),
        "training_data": train.files,
        "dev_data": dev.files,
        "skipped_questions": {"train": train.skipped_questions, "dev": dev.skipped_questions},
        "settings": asdict(settings),
        "steps": trainer.state.global_step,
        **fields,
        "eval_history": evals,
        "loss_history": losses,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "versions": library_versions(),
        "note": NOTE,
    }
