"""Scoring human simulability studies of saliency methods (Lu et al., 2022, §3).

People see only the top-k words of a text under saliency method j and guess its label (or
answer "I don't know"). With answers collected per task (sample i, method j, k):

- Eq. 1, majority vote: A_ijk = 1 iff the gold label got strictly more votes than every
  other answer, "I don't know" included (so a tie, or an "I don't know" majority, gives 0);
- accuracy p_jk = mean over samples of A_ijk;
- Eq. 2, difficulty-weighted score: s_j = sum_k w_k p_jk with
  w_k = (sum_j sum_k' p_jk') / (K^2 sum_j p_jk), so a k where every method is less accurate
  (a harder k) weighs more, and the weights average to 1 over the K settings when p is flat;
- Flip: a sample is flipped for method j when it is recognized at some k1 and not at a
  larger k2 (showing more words hurt); Aids (Table 7): N - Flips - the samples recognized
  at every k.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
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
    samples = sorted({t["sample"] for t in tasks}, key=str)
    methods = list(dict.fromkeys(t["method"] for t in tasks))
    ks = sorted({int(t["k"]) for t in tasks})
    recognized = np.full((len(samples), len(methods), len(ks)), -1)
    index = ({s: i for i, s in enumerate(samples)}, {m: j for j, m in enumerate(methods)},
             {k: i for i, k in enumerate(ks)})
    for t in tasks:
        cell = (index[0][t["sample"]], index[1][t["method"]], index[2][int(t["k"])])
        recognized[cell] = majority_correct(votes[t["task_id"]], t["gold"])
    if (recognized < 0).any():
        raise StudyInputError(f"{int((recognized < 0).sum())} (sample, method, k) cells have "
                              "no task; every sample needs every method at every k")
    p = accuracies(recognized)
    flipped, aided = flips_and_aids(recognized)
    return {"methods": methods, "ks": ks, "num_samples": len(samples),
            "accuracy": {m: p[j].tolist() for j, m in enumerate(methods)},
            "weights": difficulty_weights(p).tolist(),
            "score": dict(zip(methods, method_scores(p).tolist(), strict=True)),
            "flips": dict(zip(methods, flipped.tolist(), strict=True)),
            "aids": dict(zip(methods, aided.tolist(), strict=True))}


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
