"""Task metrics over a whole split: what a model (or a student simulating a teacher) scores.

Classification uses accuracy and macro-F1; regression uses Pearson r and RMSE. Simulability
(paper Eq. 1) is the same computation with the teacher's predictions standing in for the gold
labels, so these functions are shared by teacher training, student training and evaluation.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

CLASSIFICATION_METRICS = ("accuracy", "macro_f1")
REGRESSION_METRICS = ("pearson", "rmse")


def _as_pair(predictions: ArrayLike, references: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape or predictions.ndim != 1:
        raise ValueError(
            "predictions and references must be 1-D arrays of the same length; got shapes "
            f"{predictions.shape} and {references.shape}"
        )
    if predictions.size == 0:
        raise ValueError("cannot score an empty split (0 predictions)")
    return predictions, references


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    """Fraction of positions where the predicted class equals the reference class."""
    predictions, references = _as_pair(predictions, references)
    return float(np.mean(predictions == references))


def macro_f1(predictions: ArrayLike, references: ArrayLike) -> float:
    r"""Unweighted mean over classes of :math:`F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c)`.

    Classes are those present in either array; a class with no true positive scores 0.
    """
    predictions, references = _as_pair(predictions, references)
    scores = []
    for label in np.union1d(predictions, references):
        tp = np.sum((predictions == label) & (references == label))
        fp = np.sum((predictions == label) & (references != label))
        fn = np.sum((predictions != label) & (references == label))
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def pearson(predictions: ArrayLike, references: ArrayLike) -> float:
    """Pearson correlation; 0.0 when either side is constant (correlation undefined)."""
    predictions, references = _as_pair(predictions, references)
    x = predictions.astype(np.float64) - predictions.mean()
    y = references.astype(np.float64) - references.mean()
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator > 0 else 0.0


def rmse(predictions: ArrayLike, references: ArrayLike) -> float:
    """Root mean squared error."""
    predictions, references = _as_pair(predictions, references)
    diff = predictions.astype(np.float64) - references.astype(np.float64)
    return float(np.sqrt(np.mean(diff * diff)))


def task_metrics(task: str, predictions: ArrayLike, references: ArrayLike) -> dict[str, float]:
    """All metrics of a task: accuracy and macro-F1, or Pearson r and RMSE.

    Args:
      task: "classification" (predictions are class ids) or "regression" (real values).
      predictions: (N,) model predictions.
      references: (N,) gold labels, or teacher predictions for simulability.

    Returns:
      A dict keyed by metric name.

    Raises:
      ValueError: for an unknown task, mismatched shapes or an empty split.
    """
    if task == "classification":
        return {"accuracy": accuracy(predictions, references),
                "macro_f1": macro_f1(predictions, references)}
    if task == "regression":
        return {"pearson": pearson(predictions, references), "rmse": rmse(predictions, references)}
    raise ValueError(f"unknown task {task!r}; expected 'classification' or 'regression'")


def primary_metric(task: str) -> str:
    """The metric that early stopping maximises: accuracy, or Pearson r for regression."""
    if task not in ("classification", "regression"):
        raise ValueError(f"unknown task {task!r}; expected 'classification' or 'regression'")
    return "accuracy" if task == "classification" else "pearson"
