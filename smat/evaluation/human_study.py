"""Scoring human simulability studies of saliency methods (Lu et al., 2022, §3).

People see only the top-k words of a text under saliency method j and guess its label (or
answer "I don't know"). With answers collected per task (sample i, method j, k):

- Eq. 1, majority vote: A_ijk = 1 iff the gold label got strictly more votes than every
  other answer, "I don't know" included (so a tie, or an "I don't know" majority, gives 0);
- accuracy p_jk = mean over samples of A_ijk;
- Eq. 2, difficulty-weighted score: s_j = sum_k w_k p_jk with
  w_k = (sum_j sum_k' p_jk') / (K^2 sum_j p_jk), so a k where every method is less accurate
  (a harder k) weighs more, and the weights average to 1 over the K settings when p is flat;
- inter-annotator agreement: Fleiss' kappa over the tasks' answers; workers who answer
  too fast or only "I don't know" can be filtered out first;
- Flip: a sample is flipped for method j when it is recognized at some k1 and not at a
  larger k2 (showing more words hurt); Aids (Table 7): N - Flips - the samples recognized
  at every k.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

DONT_KNOW = "I don't know"


def majority_correct(answers: Iterable[Hashable], gold: Hashable) -> int:
    """Eq. 1 for one task: 1 iff `gold` has strictly more votes than any other answer
    (``DONT_KNOW`` counts as an answer); no answers give 0."""
    votes = Counter(answers)
    right = votes.pop(gold, 0)
    return int(right > 0 and all(right > n for n in votes.values()))


def accuracies(recognized: ArrayLike) -> np.ndarray:
    """p_jk: the mean over samples of A_ijk, from A of shape (N, J, K)."""
    recognized = np.asarray(recognized)
    if recognized.ndim != 3:
        raise ValueError(f"recognized must be (samples, methods, ks), got {recognized.shape}")
    return recognized.mean(axis=0)


def difficulty_weights(p: ArrayLike) -> np.ndarray:
    """w_k of Eq. 2 from accuracies p (J, K).

    Raises:
      ValueError: p is not (J, K), or some k has accuracy 0 for every method (its weight
        would be infinite).
    """
    p = np.asarray(p, np.float64)
    if p.ndim != 2:
        raise ValueError(f"p must be (methods, ks), got {p.shape}")
    per_k = p.sum(axis=0)
    if (per_k == 0).any():
        raise ValueError(f"every method has accuracy 0 at the k settings "
                         f"{np.flatnonzero(per_k == 0).tolist()}; Eq. 2 is undefined there")
    return p.sum() / (p.shape[1] ** 2 * per_k)


def method_scores(p: ArrayLike) -> np.ndarray:
    """s_j of Eq. 2: the difficulty-weighted accuracy of each method, from p (J, K)."""
    p = np.asarray(p, np.float64)
    return (p * difficulty_weights(p)).sum(axis=1)


def flips(recognized: ArrayLike) -> np.ndarray:
    """(N, J) bool: recognized at some k1 and not at a larger k2 (ks in increasing order on
    the last axis of A (N, J, K))."""
    a = np.asarray(recognized).astype(bool)
    seen_before = np.maximum.accumulate(a, axis=-1)  # recognized at some k' <= k
    return (seen_before[..., :-1] & ~a[..., 1:]).any(axis=-1)


def flips_and_aids(recognized: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Table 7 per method: the numbers of flipped samples and of samples that showing more
    words aided (N - flips - recognized at every k)."""
    a = np.asarray(recognized).astype(bool)
    flipped = flips(a).sum(axis=0)
    always = a.all(axis=-1).sum(axis=0)
    return flipped, a.shape[0] - flipped - always


class StudyInputError(ValueError):
    """Answers that do not fit the study's tasks (each problem counted in the message)."""


def check_answers(tasks: Sequence[Mapping[str, Any]],
                  answers: Sequence[Mapping[str, Any]], *,
                  lenient: bool = False) -> list[Mapping[str, Any]]:
    """The answers that fit the tasks; every other one is counted by kind.

    Args:
      tasks: one mapping per task with "task_id" and "classes" (its label names).
      answers: one mapping per answer with "worker", "task_id" and "answer" (a class name
        or :data:`DONT_KNOW`).
      lenient: warn about the problems and drop those answers instead of raising.

    Raises:
      StudyInputError: (without `lenient`) answers for unknown task ids, a second answer by
        one worker to one task, or answers outside the task's classes; the message counts
        each kind.
    """
    classes = {t["task_id"]: set(t["classes"]) for t in tasks}
    problems: Counter[str] = Counter()
    seen: set[tuple[Any, Any]] = set()
    kept = []
    for row in answers:
        key = (row["worker"], row["task_id"])
        if row["task_id"] not in classes:
            problems["answers for unknown task ids"] += 1
        elif key in seen:
            problems["repeated answers by one worker to one task"] += 1
        elif row["answer"] != DONT_KNOW and row["answer"] not in classes[row["task_id"]]:
            problems["answers outside the task's classes"] += 1
        else:
            seen.add(key)
            kept.append(row)
    if problems:
        message = "; ".join(f"{n} {kind}" for kind, n in problems.items())
        if not lenient:
            raise StudyInputError(f"{message} (pass lenient to drop them with a warning)")
        warnings.warn(f"dropped {message}", stacklevel=2)
    return kept


def score_study(tasks: Sequence[Mapping[str, Any]],
                answers: Sequence[Mapping[str, Any]], *,
                lenient: bool = False) -> dict[str, Any]:
    """Majority vote, accuracies, scores, Flips and Aids of a study (module doc).

    Args:
      tasks: one mapping per task: "task_id", "sample", "method", "k", "gold" and
        "classes"; every (sample, method) needs every k.
      answers: per-annotator answers (:func:`check_answers`).

    Returns:
      ``{"methods", "ks", "num_samples", "accuracy" {method: [p_k]}, "weights" [w_k],
      "score" {method: s}, "flips" {method: n}, "aids" {method: n}}``.

    Raises:
      StudyInputError: as :func:`check_answers`, or tasks that do not cover every
        (sample, method, k).
    """
    kept = check_answers(tasks, answers, lenient=lenient)
    votes: dict[Any, list[Any]] = {t["task_id"]: [] for t in tasks}
    for row in kept:
        votes[row["task_id"]].append(row["answer"])
    samples, methods, ks, cell_of = _grid(tasks)
    recognized = np.full((len(samples), len(methods), len(ks)), -1)
    for t in tasks:
        recognized[cell_of(t)] = majority_correct(votes[t["task_id"]], t["gold"])
    if (recognized < 0).any():
        raise StudyInputError(f"{int((recognized < 0).sum())} (sample, method, k) cells have "
                              "no task; every sample needs every method at every k")
    return _scores(recognized, samples, methods, ks)


def score_rank_correlation(first: Mapping[str, float], second: Mapping[str, float]) -> float:
    """Spearman rho between two studies' method scores (e.g. human readers and a machine
    reader), over the methods both scored.

    Raises:
      ValueError: fewer than 3 shared methods.
    """
    shared = [m for m in first if m in second]
    if len(shared) < 3:
        raise ValueError(f"a rank correlation needs 3 or more shared methods, got {shared}")
    from scipy import stats

    return float(stats.spearmanr([first[m] for m in shared],
                                 [second[m] for m in shared]).statistic)


def filter_workers(answers: Sequence[Mapping[str, Any]], *, min_seconds: float | None = None,
                   drop_all_dont_know: bool = True
                   ) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
    """Drop every answer of workers who answered too fast (median seconds per task below
    `min_seconds`; needs a "seconds" field) or only "I don't know".

    Returns:
      The kept answers and {dropped worker: why}.

    Raises:
      StudyInputError: `min_seconds` given but an answer has no "seconds".
    """
    by_worker: dict[Any, list[Mapping[str, Any]]] = {}
    for row in answers:
        by_worker.setdefault(row["worker"], []).append(row)
    dropped = {}
    for worker, rows in by_worker.items():
        if min_seconds is not None:
            if any("seconds" not in r or r["seconds"] in ("", None) for r in rows):
                raise StudyInputError(f"worker {worker} has answers without 'seconds'; "
                                      "filtering by speed needs the answer times")
            median = float(np.median([float(r["seconds"]) for r in rows]))
            if median < min_seconds:
                dropped[str(worker)] = f"median {median:.2f} s per task < {min_seconds} s"
                continue
        if drop_all_dont_know and all(r["answer"] == DONT_KNOW for r in rows):
            dropped[str(worker)] = f"answered only {DONT_KNOW!r} ({len(rows)} tasks)"
    return [r for r in answers if str(r["worker"]) not in dropped], dropped


def fleiss_kappa(labels_per_task: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' kappa of the answers to each task (tasks with fewer than 2 answers are left
    out; "I don't know" is a category). Tasks may have different numbers of answers: each
    task's agreement uses its own count, the usual generalization.

    Raises:
      ValueError: no task with 2 or more answers.
    """
    tasks = [list(t) for t in labels_per_task if len(t) >= 2]
    if not tasks:
        raise ValueError("inter-annotator agreement needs tasks with 2 or more answers")
    categories = sorted({a for t in tasks for a in t}, key=str)
    counts = np.array([[t.count(c) for c in categories] for t in tasks], np.float64)
    n = counts.sum(axis=1)
    agreement = ((counts * (counts - 1)).sum(axis=1) / (n * (n - 1))).mean()
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares ** 2).sum())
    return 1.0 if chance == 1.0 else float((agreement - chance) / (1 - chance))


def score_recognized(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scores from an already majority-voted table: one row per (sample, method, k) with
    "sample", "method", "k" and "correct" (0 / 1), e.g. a study run elsewhere.

    Raises:
      StudyInputError: a (sample, method, k) cell given twice or missing, or a "correct"
        value that is not 0 or 1 (each counted); a k that is not a whole number (naming
        the row).
    """
    samples, methods, ks, cell_of = _grid(rows)
    recognized = np.full((len(samples), len(methods), len(ks)), -1)
    problems: Counter[str] = Counter()
    given: set[tuple[int, int, int]] = set()
    for r in rows:
        cell = cell_of(r)
        if cell in given:
            problems["repeated (sample, method, k) rows"] += 1
        elif str(r["correct"]).strip() not in ("0", "1"):
            problems["'correct' values other than 0 or 1"] += 1
        else:
            recognized[cell] = int(str(r["correct"]).strip())
        given.add(cell)
    if len(given) < recognized.size:
        problems["missing (sample, method, k) cells"] += recognized.size - len(given)
    if problems:
        raise StudyInputError("; ".join(f"{n} {kind}" for kind, n in problems.items()))
    return _scores(recognized, samples, methods, ks)


def _whole_k(row: Mapping[str, Any], position: int) -> int:
    try:
        return int(row["k"])
    except (TypeError, ValueError):
        raise StudyInputError(f"row {position} (from 0): k {row['k']!r} is not a whole number "
                              f"of words") from None


def _grid(rows: Sequence[Mapping[str, Any]]):
    """The samples, methods (in first-seen order) and sorted ks of task-like rows, and a
    function from a row to its (sample, method, k) cell of the A array.

    Raises:
      StudyInputError: a k that is not a whole number (naming the row and the value).
    """
    samples = sorted({r["sample"] for r in rows}, key=str)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    ks = sorted({_whole_k(r, i) for i, r in enumerate(rows)})
    index = ({s: i for i, s in enumerate(samples)}, {m: j for j, m in enumerate(methods)},
             {k: i for i, k in enumerate(ks)})

    def cell_of(row: Mapping[str, Any]) -> tuple[int, int, int]:
        return index[0][row["sample"]], index[1][row["method"]], index[2][int(row["k"])]

    return samples, methods, ks, cell_of


def _scores(recognized: np.ndarray, samples: list, methods: list, ks: list) -> dict[str, Any]:
    p = accuracies(recognized)
    flipped, aided = flips_and_aids(recognized)
    return {"methods": methods, "ks": ks, "num_samples": len(samples),
            "accuracy": {m: p[j].tolist() for j, m in enumerate(methods)},
            "weights": difficulty_weights(p).tolist(),
            "score": dict(zip(methods, method_scores(p).tolist(), strict=True)),
            "flips": dict(zip(methods, flipped.tolist(), strict=True)),
            "aids": dict(zip(methods, aided.tolist(), strict=True))}


def plot_accuracy(report: Mapping[str, Any], path: str | Path):
    """Accuracy against k, one line per method (Lu et al.'s view of Table 3). Returns the
    ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    for method in report["methods"]:
        ax.plot(report["ks"], [100 * p for p in report["accuracy"][method]], marker="o",
                label=f"{method} ({100 * report['score'][method]:.1f})")
    ax.set_xlabel("words shown (k)")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=7, title="method (score)", title_fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return fig
