"""A synthetic task with a planted answer for learned explainers: which teacher heads teach.

Sequences ``[CLS] body [SEP]`` of a small vocabulary. Exactly one body token is a *key*
token, drawn from one of two sets of key tokens; its set decides the label. Another body
token is a *decoy* (a third set, independent of the label); the rest is filler. The teacher
is the rule itself (logits +-2), so a student's simulability is its accuracy on the rule.

The teacher's explainer input is one layer of synthetic query-pooled attention logits: each
head puts a logit of ``signal`` on its target (the key, the decoy, [CLS] or [SEP]) and every
logit gets Gaussian noise. The heads that target the key are the informative ones; SMaT's
head coefficients (Fernandes et al. 2022, Eq. 11) should move onto them.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

PAD, CLS, SEP = 0, 1, 2
TARGETS = ("key", "decoy", "cls", "sep")
# What each of the teacher's 8 heads points at; the uniform mean of these heads puts more
# weight on the decoy (3 heads) than on the key (2 heads).
HEAD_TARGETS = ("decoy", "cls", "key", "decoy", "sep", "key", "decoy", "cls")
STATIC_ARMS = ("static_mean", "static_oracle")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlantedTask:
    """The planted task's vocabulary and teacher heads.

    Attributes:
      seq_len: T, tokens per sequence including [CLS] and [SEP].
      num_key: key tokens per label (2 * num_key key tokens in all).
      num_decoy: decoy tokens; num_filler: filler tokens.
      signal: the pooled attention logit a teacher head puts on its target token.
      noise: standard deviation of the Gaussian noise on every teacher logit.
      head_targets: per teacher head, one of :data:`TARGETS`.
    """

    seq_len: int = 16
    num_key: int = 16
    num_decoy: int = 16
    num_filler: int = 77
    signal: float = 4.0
    noise: float = 0.5
    head_targets: tuple[str, ...] = HEAD_TARGETS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.head_targets) - set(TARGETS))
        if unknown or "key" not in self.head_targets:
            raise ValueError(f"PlantedTask.head_targets={self.head_targets!r}: each one of "
                             f"{TARGETS}, at least one 'key'.")
        if self.seq_len < 4:
            raise ValueError(f"PlantedTask.seq_len={self.seq_len}: [CLS], [SEP] and at least "
                             "a key and a decoy token need 4.")

    @property
    def vocab_size(self) -> int:
        return 3 + 2 * self.num_key + self.num_decoy + self.num_filler

    @property
    def informative_heads(self) -> tuple[int, ...]:
        return tuple(h for h, target in enumerate(self.head_targets) if target == "key")


class PlantedRows(NamedTuple):
    """One split of the planted task, one row per example."""

    input_ids: np.ndarray  # (N, T) int32
    labels: np.ndarray  # (N,) int32: the rule's label
    teacher_logits: np.ndarray  # (N, 2) float32
    teacher_features: np.ndarray  # (N, 1, H, T) float32: pooled attention logits
    key_position: np.ndarray  # (N,) int: where the deciding token is


def planted_rows(task: PlantedTask, num: int, rng: np.random.Generator) -> PlantedRows:
    """`num` examples of the task, drawn from `rng`."""
    t, body = task.seq_len, task.seq_len - 2
    key_start, decoy_start = 3, 3 + 2 * task.num_key
    filler_start = decoy_start + task.num_decoy
    labels = rng.integers(0, 2, size=num)
    ids = rng.integers(filler_start, task.vocab_size, size=(num, t))
    ids[:, 0], ids[:, -1] = CLS, SEP
    positions = np.stack([rng.choice(body, size=2, replace=False) for _ in range(num)]) + 1
    key_pos, decoy_pos = positions[:, 0], positions[:, 1]
    rows = np.arange(num)
    ids[rows, key_pos] = key_start + labels * task.num_key + rng.integers(0, task.num_key,
                                                                          size=num)
    ids[rows, decoy_pos] = decoy_start + rng.integers(0, task.num_decoy, size=num)
    where = {"key": key_pos, "decoy": decoy_pos, "cls": np.zeros(num, int),
             "sep": np.full(num, t - 1)}
    features = task.noise * rng.standard_normal((num, 1, len(task.head_targets), t))
    for h, target in enumerate(task.head_targets):
        features[rows, 0, h, where[target]] += task.signal
    logits = np.where(labels[:, None] == 1, [[-2.0, 2.0]], [[2.0, -2.0]])
    return PlantedRows(ids.astype(np.int32), labels.astype(np.int32),
                       logits.astype(np.float32), features.astype(np.float32), key_pos)


def static_coefficients(task: PlantedTask, which: str) -> np.ndarray:
    """Frozen head coefficients lambda: uniform ("static_mean") or uniform over the
    informative heads ("static_oracle").

    Raises:
      ValueError: `which` not one of :data:`STATIC_ARMS`.
    """
    heads = len(task.head_targets)
    if which == "static_mean":
        return np.full(heads, 1.0 / heads, np.float32)
    if which != "static_oracle":
        raise ValueError(f"unknown static coefficients {which!r}; expected one of "
                         f"{STATIC_ARMS}")
    lam = np.zeros(heads, np.float32)
    lam[list(task.informative_heads)] = 1.0 / len(task.informative_heads)
    return lam
