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

from collections import Counter
from collections.abc import Hashable, Iterable

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
