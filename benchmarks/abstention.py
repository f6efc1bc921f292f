"""Does search know when it doesn't know? Confidence and "no good match" on PsTuts-VQA, fitted on train, judged on dev.

Run from the checkout:  .venv/bin/python -m benchmarks.abstention [--storage DIR] [--json out.json]

One collection holds every other video of train and of dev (sorted by id), so each split asks questions of videos
that are present and of videos that are absent. On train: fit `search.confidence`'s logistic model (target: a
top-5 result holds the answer) and choose the threshold that best separates "the question's video is absent" from
"present" by the first result's confidence (balanced accuracy). On dev, with both fixed: abstention precision
(abstained questions whose video is absent) and recall (absent-video questions abstained), and the answered
questions' hit@1 / link@1; also the calibration of the first result's confidence (observed hit@1 per bin).
Nothing is chosen on dev or on the sample in data/.
"""

import argparse
import json
import os
import warnings
from pathlib import Path

import numpy as np

from pstuts_pipeline_tests.support.pstuts_vqa import PSTUTS_DIR

TOP = 5
GRID = np.round(np.arange(0.0, 1.0001, 0.01), 2)


def present_half(videos: list[dict]) -> list[dict]:
    """Every other video by id, starting with the first: the half a collection holds."""
    return sorted(videos, key=lambda v: int(v["video_id"]))[::2]


def features(ranked: list[list], questions: list) -> tuple[np.ndarray, np.ndarray]:
    """Each top-5 result's signals and whether it holds the answer (same video, the answer's midpoint inside it)."""
    from pstuts_pipeline.search.confidence import SIGNALS

    rows, labels = [], []
    for question, results in zip(questions, ranked, strict=True):
        for r in results[:TOP]:
            rows.append([r.signals[name] for name in SIGNALS])
            labels.append(r.video_id == question.video_id and r.start <= question.midpoint <= r.stop)
    return np.asarray(rows, dtype=np.float64), np.asarray(labels, dtype=np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50) -> np.ndarray:
    """(intercept, weights...) by Newton's method with a small ridge."""
    design = np.hstack([np.ones((len(x), 1)), x])
    beta = np.zeros(design.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (p - y) + l2 * beta
        hessian = (design * (p * (1 - p))[:, None]).T @ design + l2 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def judged(questions: list, ranked: list[list], present: set[int], threshold: float) -> dict[str, float]:
    """Abstention precision/recall and the answered questions' hit@1 / link@1 at a threshold."""
    from pstuts_pipeline.search import evaluation

    absent = np.array([q.video_id not in present for q in questions])
    confident = np.array([bool(r) and r[0].confidence >= threshold for r in ranked])
    abstained = ~confident
    first = [evaluation.judge(q, r[:1]) for q, r in zip(questions, ranked)]
    hit = np.array([j.hit_rank == 1 for j in first])
    link = np.array([j.link_rank == 1 for j in first])
    answered = confident.sum() or 1
    return {
        "questions": len(questions),
        "absent_share": float(absent.mean()),
        "abstained_share": float(abstained.mean()),
        "abstention_precision": float((abstained & absent).sum() / (abstained.sum() or 1)),
        "abstention_recall": float((abstained & absent).sum() / (absent.sum() or 1)),
        "balanced_accuracy": float(
            ((abstained & absent).sum() / (absent.sum() or 1) + (confident & ~absent).sum() / ((~absent).sum() or 1))
            / 2
        ),
        "answered_hit@1": float((hit & confident).sum() / answered),
        "answered_link@1": float((link & confident).sum() / answered),
        "all_hit@1": float(hit.mean()),
        "all_link@1": float(link.mean()),
        "present_hit@1": float(hit[~absent].mean()),
    }


def calibration(questions: list, ranked: list[list]) -> list[dict[str, float]]:
    """Observed hit@1 against the first result's mean confidence, in bins of confidence."""
    from pstuts_pipeline.search import evaluation

    conf = np.array([r[0].confidence for r in ranked])
    hit = np.array([evaluation.judge(q, r[:1]).hit_rank == 1 for q, r in zip(questions, ranked)])
    rows = []
    for low, high in [(0, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.5), (0.5, 0.7), (0.7, 1.01)]:
        inside = (conf >= low) & (conf < high)
        if inside.any():
            rows.append(
                {
                    "bin": f"{low:.1f}-{min(high, 1):.1f}",
                    "questions": int(inside.sum()),
                    "mean_confidence": float(conf[inside].mean()),
                    "observed_hit@1": float(hit[inside].mean()),
                }
            )
    return rows


def rescore(ranked: list[list], coefficients: np.ndarray) -> list[list]:
    """The results with their confidence from other coefficients."""
    from dataclasses import replace

    from pstuts_pipeline.search import confidence

    return [
        [replace(r, confidence=confidence.probability(r.signals, tuple(coefficients))) for r in rs] for rs in ranked
    ]


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="Work folder; reuse it to skip re-ingesting (default: temporary).")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from benchmarks.retrieval_benchmark import cached_results, work_folder
    from pstuts_pipeline.search import confidence, evaluation

    storage, data_dir = work_folder(args.storage, "abstention_")
    present: set[int] = set()
    for split in ("train", "dev"):
        kept = present_half(json.loads((PSTUTS_DIR / f"{split}.json").read_text()))
        present |= {int(v["video_id"]) for v in kept}
        (data_dir / f"{split}_half.json").write_text(json.dumps(kept))
    train = evaluation.load_questions([PSTUTS_DIR / "train.json"])
    dev = evaluation.load_questions([PSTUTS_DIR / "dev.json"])
    ranked = cached_results(data_dir, storage, train + dev)
    ranked_train, ranked_dev = ranked[: len(train)], ranked[len(train) :]

    x, y = features(ranked_train, train)
    beta = fit_logistic(x, y)
    print("coefficients (intercept, " + ", ".join(confidence.SIGNALS) + "):", [round(b, 3) for b in beta])
    fitted_train, fitted_dev = rescore(ranked_train, beta), rescore(ranked_dev, beta)
    scores = {t: judged(train, fitted_train, present, t)["balanced_accuracy"] for t in GRID}
    chosen = max(GRID, key=lambda t: (scores[t], -t))
    print(f"threshold chosen on train: {chosen:.2f} (balanced accuracy {scores[chosen]:.3f})")
    figures = {
        "coefficients": [float(b) for b in beta],
        "threshold": float(chosen),
        "train": judged(train, fitted_train, present, chosen),
        "dev": judged(dev, fitted_dev, present, chosen),
        "dev_calibration": calibration(dev, fitted_dev),
        "dev_by_threshold": {f"{t:.2f}": judged(dev, fitted_dev, present, t) for t in (0.05, 0.1, chosen, 0.2, 0.3)},
        "shipped": {
            "coefficients": list(confidence.COEFFICIENTS),
            "threshold": confidence.MIN_CONFIDENCE,
            "dev": judged(dev, rescore(ranked_dev, confidence.COEFFICIENTS), present, confidence.MIN_CONFIDENCE),
        },
        "dev_search": evaluation.evaluate(dev, ranked_dev),
    }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
