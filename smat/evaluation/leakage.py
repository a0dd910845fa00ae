"""Label leakage of explanations: can the explained model's prediction be read from an
explanation alone, without its text?

A learned explainer is trained to make students simulate a teacher. It can raise
simulability by encoding the teacher's label in *where* it puts its mass (always the first
token for one class, spread out for the other) instead of by pointing at the evidence; Hsia,
Pruthi et al. (2023) game ERASER's metrics and simulability evaluations this way. The probe
here sees only an explanation's positions and mass: the share of absolute mass on the
first and the last token, in equal relative-position bins of the sequence, the largest
share, the normalised entropy, and the length. A cross-validated logistic regression reads
the predicted class from them; the same probe on static explainers, and on the length
alone, are the references a learned explainer is compared with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["explanation_features", "length_features", "probe_accuracy"]


def explanation_features(scores: np.ndarray, mask: np.ndarray, *, bins: int = 8,
                         edge_tokens: int = 0) -> np.ndarray:
    """Position-and-mass features of explanations, (N, bins + 5 + 2 edge_tokens), with no
    token identity.

    Args:
      scores: (N, T) saliency scores (signed or not; their absolute values are the mass).
      mask: (N, T) the real tokens (special ones included: mass put on [CLS] / [SEP] is a
        channel too); each row's real tokens are a prefix.
      bins: equal bins of the relative position 0..1 over the real tokens.
      edge_tokens: also the share on each of the first and of the last this many real
        tokens after the first and before the last (a label written into which of the
        first words holds the mass falls in one relative bin of a long row).

    Returns:
      Per row: the mass share on the first and on the last real token, on each bin, the
      largest share, the entropy divided by log(length), log(length), then the edge
      tokens' shares (0 where a row is too short).

    Raises:
      ValueError: shapes that differ, no bins, or a row without real tokens.
    """
    scores, mask = np.asarray(scores, np.float64), np.asarray(mask, bool)
    if scores.shape != mask.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and mask {mask.shape} must be the same (N, T)")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    lengths = mask.sum(axis=1)
    if (lengths == 0).any():
        raise ValueError(f"row {int(np.argmin(lengths))} has no real tokens")
    mass = np.where(mask, np.abs(scores), 0.0)
    total = mass.sum(axis=1, keepdims=True)
    # an explanation with no mass at all says nothing: spread it evenly
    share = np.where(total > 0, mass / np.where(total > 0, total, 1.0), mask / lengths[:, None])
    rows = np.arange(len(share))
    position = np.arange(share.shape[1])[None, :] / lengths[:, None]  # 0 <= p < 1 on tokens
    which = np.minimum((position * bins).astype(int), bins - 1)
    binned = np.stack([(share * (which == b) * mask).sum(axis=1) for b in range(bins)], axis=1)
    logs = np.log(np.where(share > 0, share, 1.0))
    entropy = -(share * logs).sum(axis=1) / np.maximum(np.log(lengths), 1e-12)
    if edge_tokens < 0:
        raise ValueError(f"edge_tokens must be >= 0, got {edge_tokens}")
    edges = [np.where(k < lengths - 1, share[rows, np.minimum(k, share.shape[1] - 1)], 0.0)
             for k in range(1, edge_tokens + 1)]
    edges += [np.where(lengths - 1 - k > 0, share[rows, np.maximum(lengths - 1 - k, 0)], 0.0)
              for k in range(1, edge_tokens + 1)]
    return np.column_stack([share[:, 0], share[rows, lengths - 1], binned, share.max(axis=1),
                            np.where(lengths > 1, entropy, 0.0), np.log(lengths), *edges])


def length_features(mask: np.ndarray) -> np.ndarray:
    """The reference probe's one feature: log(length), (N, 1)."""
    return np.log(np.asarray(mask, bool).sum(axis=1, keepdims=True).astype(np.float64))


def _fit_logistic(x: np.ndarray, y: np.ndarray, classes: int, l2: float) -> np.ndarray:
    """Weights (F + 1, C) of an L2-regularised multinomial logistic regression."""
    design = np.column_stack([x, np.ones(len(x))])
    onehot = np.eye(classes)[y]

    def loss(flat: np.ndarray) -> tuple[float, np.ndarray]:
        w = flat.reshape(design.shape[1], classes)
        logits = design @ w
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        penalty = 0.5 * l2 * (w[:-1] ** 2).sum()  # the bias is not shrunk
        grad = design.T @ (np.exp(log_p) - onehot) / len(y)
        grad[:-1] += l2 * w[:-1]
        return float(-(onehot * log_p).sum() / len(y) + penalty), grad.ravel()

    # scipy is imported on use: scipy.stats and optimize add 1.2 s to every command's start
    from scipy import optimize

    start = np.zeros(design.shape[1] * classes)
    return optimize.minimize(loss, start, jac=True, method="L-BFGS-B").x.reshape(
        design.shape[1], classes)


def probe_accuracy(features: np.ndarray, labels: np.ndarray, *, folds: int = 5,
                   seed: int = 0, l2: float = 1e-2) -> dict[str, Any]:
    """How well `labels` can be read from `features`: k-fold cross-validated accuracy of a
    multinomial logistic regression (features standardised on each training part).

    Returns:
      accuracy (over all held-out predictions), fold_accuracies, majority (the accuracy of
      always answering each training part's most frequent class), p_value (one-sided
      binomial test of the correct held-out predictions against the majority rate), num_rows.

    Raises:
      ValueError: fewer rows than folds, folds < 2, or features and labels that disagree.
    """
    features = np.asarray(features, np.float64)
    _, y = np.unique(np.asarray(labels), return_inverse=True)
    if len(features) != len(y):
        raise ValueError(f"{len(features)} feature rows for {len(y)} labels")
    if folds < 2 or len(y) < folds:
        raise ValueError(f"need folds >= 2 and at least that many rows; got {folds} folds "
                         f"for {len(y)} rows")
    classes = int(y.max()) + 1
    order = np.random.default_rng(seed).permutation(len(y))
    correct = np.zeros(len(y), bool)
    majority_correct = np.zeros(len(y), bool)
    fold_accuracies = []
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        mean, std = features[train].mean(axis=0), features[train].std(axis=0)
        scale = np.where(std > 0, std, 1.0)
        w = _fit_logistic((features[train] - mean) / scale, y[train], classes, l2)
        design = np.column_stack([(features[part] - mean) / scale, np.ones(len(part))])
        correct[part] = np.argmax(design @ w, axis=1) == y[part]
        majority_correct[part] = y[part] == np.bincount(y[train], minlength=classes).argmax()
        fold_accuracies.append(float(correct[part].mean()))
    majority = float(majority_correct.mean())
    from scipy import stats

    test = stats.binomtest(int(correct.sum()), len(y), min(max(majority, 1e-12), 1 - 1e-12),
                           alternative="greater")
    return {"accuracy": float(correct.mean()), "fold_accuracies": fold_accuracies,
            "majority": majority, "p_value": float(test.pvalue), "num_rows": int(len(y))}
