"""Building human simulability tasks (Lu et al., 2022, §3): what a person is shown and who
labels what.

A task (sample i, method j, k) shows the sample's k highest-scoring words at their original
positions and every other word as "."; words that are only punctuation (and any listed as
hidden) are never among the shown top-k (configurable). Ties are broken by position, the
earlier word first, so a task is a function of the scores alone.

Work packages: every task is labelled by `annotators_per_task` people; each person gets
`tasks_per_annotator` tasks (the last one possibly fewer) and never the same sample twice.
Tasks are laid out with the sample index varying fastest over a seeded order of samples, so
any run of at most N consecutive slots holds N distinct samples; each person takes the next
run of slots, and the order they see their tasks in is shuffled (seeded).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

HIDDEN = "."
PUNCTUATION = frozenset(string.punctuation) | {"``", "''", "--", "...", "-lrb-", "-rrb-"}


def is_punctuation(word: str) -> bool:
    """A word made only of punctuation characters (or a PTB bracket / quote token)."""
    return word in PUNCTUATION or (bool(word) and all(c in string.punctuation for c in word))


def shown_words(words: Sequence[str], scores: ArrayLike, k: int, *,
                drop_punctuation: bool = True) -> list[str]:
    """The task text as a list: the top-k eligible words in place, the rest as ".". A word
    whose score is NaN (e.g. cut off by the model's max length) is never shown.

    Raises:
      ValueError: k < 1, or scores of another length than the words.
    """
    scores = np.asarray(scores, np.float64)
    if len(scores) != len(words):
        raise ValueError(f"{len(words)} words but {len(scores)} scores")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    eligible = [i for i, w in enumerate(words)
                if not (drop_punctuation and is_punctuation(w)) and not np.isnan(scores[i])]
    # stable sort on the negated score: equal scores keep their order (earlier word first)
    order = sorted(eligible, key=lambda i: -scores[i])
    keep = set(order[:k])
    return [w if i in keep else HIDDEN for i, w in enumerate(words)]


class Assignment(NamedTuple):
    """Who labels which task: ``annotator[s]`` labels ``task[s]`` for every slot s."""

    annotator: np.ndarray  # (S,) int
    task: np.ndarray  # (S,) int, indices into the task list


def assign_packages(task_samples: ArrayLike, *, annotators_per_task: int = 5,
                    tasks_per_annotator: int = 100, seed: int = 0) -> Assignment:
    """Work packages for tasks whose samples are `task_samples` (one sample id per task).

    Raises:
      ValueError: settings below 1, or more tasks per annotator than there are samples (a
        person would have to see a sample twice).
    """
    task_samples = np.asarray(task_samples)
    if annotators_per_task < 1 or tasks_per_annotator < 1:
        raise ValueError(f"annotators_per_task and tasks_per_annotator must be >= 1, got "
                         f"{annotators_per_task} and {tasks_per_annotator}")
    samples = np.unique(task_samples)
    if tasks_per_annotator > len(samples):
        raise ValueError(f"tasks_per_annotator={tasks_per_annotator} exceeds the "
                         f"{len(samples)} samples: a person would see a sample twice")
    rng = np.random.default_rng(seed)
    sample_order = rng.permutation(samples)
    by_sample = {s: rng.permutation(np.flatnonzero(task_samples == s)) for s in samples}
    per_sample = {len(v) for v in by_sample.values()}
    if len(per_sample) != 1:
        raise ValueError(f"every sample needs the same number of tasks (methods x ks); got "
                         f"{sorted(per_sample)}")
    rounds = per_sample.pop()
    # slot order: replicate r, then the sample's r-th task round, sample fastest
    slots = np.array([by_sample[s][t] for _ in range(annotators_per_task)
                      for t in range(rounds) for s in sample_order])
    annotator = np.arange(len(slots)) // tasks_per_annotator
    for person in np.unique(annotator):  # each person's own order, shuffled
        mine = np.flatnonzero(annotator == person)
        slots[mine] = slots[rng.permutation(mine)]
    return Assignment(annotator, slots)
