"""Would a prior fix the demo's ranking on PsTuts? Three reorderings of the top 10, weight chosen on train, judged on dev.

Run from the checkout:  .venv/bin/python -m benchmarks.ranking_priors [--storage DIR]

Issue 34 item 2: on the sample, "How do I open Free Transform?" ranks the closing line and the one-sentence intro
above the answer (docs/retrieval-experiments.md says why). Each candidate fix adds `weight * feature` to the fused
score of search's top 10 for every question: the linked phrase is an instruction (`answers.extractive.is_instruction`),
any phrase of the chunk is, or the chunk's phrase count (log; against one-sentence chunks). The weight is the one of
the grid with the best train mrr@10; dev is judged with it. The collection holds every train and dev video.
"""

import argparse
import json
import os
import warnings
from pathlib import Path

import numpy as np

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR

GRID = (-0.5, -0.2, 0.1, 0.2, 0.3, 0.5, 0.8)
NAMES = ("hit@1", "link@1", "mrr@10", "hit@5")


def features() -> dict:
    """Each candidate fix's feature of a result."""
    from pstuts_pipeline.answers import extractive

    return {
        "linked phrase is an instruction": lambda r: extractive.is_instruction(r.link_sentence),
        "some phrase is an instruction": lambda r: max((extractive.is_instruction(t) for _, t in r.phrases), default=0),
        "log phrases in the chunk": lambda r: float(np.log(max(len(r.phrases), 1))),
    }


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="Work folder; reuse it to skip ingesting and searching again.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from benchmarks.retrieval_benchmark import cached_results, work_folder
    from pstuts_pipeline.search import evaluation

    storage, data = work_folder(args.storage, "ranking_priors_")
    for name in ("train.json", "dev.json"):
        if not (data / name).exists():
            (data / name).symlink_to(PSTUTS_DIR / name)
    train = evaluation.load_questions([PSTUTS_DIR / "train.json"])
    dev = evaluation.load_questions([PSTUTS_DIR / "dev.json"])
    ranked = cached_results(data, storage, train + dev)
    on_train, on_dev = ranked[: len(train)], ranked[len(train) :]

    def scored(questions: list, lists: list) -> dict[str, float]:
        found = evaluation.evaluate(questions, lists)
        return {name: round(found[name], 4) for name in NAMES}

    def reordered(lists: list, weight: float, feature) -> list:  # noqa: ANN001 - a result -> float
        return [sorted(results, key=lambda r: -(r.score + weight * feature(r))) for results in lists]

    rows = {"search as it is": {"weight": 0.0, "train": scored(train, on_train), "dev": scored(dev, on_dev)}}
    for name, feature in features().items():
        weight = max(GRID, key=lambda w: scored(train, reordered(on_train, w, feature))["mrr@10"])
        rows[name] = {
            "weight": weight,
            "train": scored(train, reordered(on_train, weight, feature)),
            "dev": scored(dev, reordered(on_dev, weight, feature)),
        }
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
