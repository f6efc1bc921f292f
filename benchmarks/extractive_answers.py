"""Extractive answers on dev's fixed 200-question sample: the metrics, and N random answers to read side by side.

Run from the checkout, over a collection that holds train + dev (as `pstuts evaluate --answers` scores it):

    PSTUTS_DATA_DIR=... PSTUTS_STORAGE_DIR=... .venv/bin/python -m benchmarks.extractive_answers out.json

To compare with an older version of the answer code on the same collection, run it from a worktree of that commit
(`git worktree add /tmp/old <commit>`, copy this file into its benchmarks/, `cd /tmp/old`), whose package is then
the one imported.
"""

import argparse
import json
import random
from pathlib import Path

from pstuts_pipeline.answers import metrics
from pstuts_pipeline.defs.resources import resources_from_env
from pstuts_pipeline.search import evaluation
from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="The metrics and the sampled answers, as JSON.")
    parser.add_argument("--shown", type=int, default=20, help="Random answers to keep (seed 20).")
    args = parser.parse_args()
    resources = resources_from_env()
    embeddings, qdrant = resources["embeddings"], resources["qdrant"]
    questions = metrics.sample_questions(evaluation.load_questions([PSTUTS_DIR / "dev.json"]), metrics.SAMPLE_SIZE)
    with qdrant.get_store() as store:
        answers, _, seconds = metrics.answer_questions(
            store,
            embeddings.query_embeddings(),
            embeddings.model_id,
            questions,
            resources["chat_model"].settings(),
        )
    shown = sorted(random.Random(20).sample(range(len(questions)), min(args.shown, len(questions))))
    result = {
        "figures": metrics.summarize(questions, answers, seconds),
        "answers": [
            {
                "question": questions[i].text,
                "gold": questions[i].answer,
                "gold_moment": [questions[i].video_id, round(questions[i].begin, 1)],
                "answer": answers[i].answer,
                "cited": [[c.video_id, round(c.time, 1)] for c in answers[i].citations[:1]],
            }
            for i in shown
        ],
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["figures"]))


if __name__ == "__main__":
    main()
