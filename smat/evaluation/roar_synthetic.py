r"""The synthetic validation of Recursive ROAR (Madsen et al., 2022, §3.3, **Eq. 1**).

Hooker et al. (2019) generate 16-dimensional inputs with exactly 4 informative,
mutually redundant features,

.. math::

  \mathbf{x} = \frac{\mathbf{a} z}{10} + \mathbf{d}\eta + \frac{\epsilon}{10}, \qquad
  y = [z > 0],

with :math:`z, \eta \sim \mathcal N(0, 1)` and :math:`\epsilon \sim \mathcal N(0, I)` per
example and :math:`\mathbf a, \mathbf d \sim \mathcal N(0, I)` drawn once
(:math:`a_j = 0` for :math:`j \geq 4`). Madsen et al. explain a logistic regression by
the absolute values of its weights and show that Recursive ROAR follows the ground-truth
removal order (the 4 informative features first), while ROAR, ranking once by the
weights of the model trained on all features, does not.

Everything here is pure JAX: a Newton-method logistic regression, the ROAR curve (one
``vmap`` over the number of masked features) and the Recursive ROAR curve (one
``lax.scan``), both using :func:`smat.evaluation.roar.roar_mask` in count mode with
one feature per step. A masked feature is set to 0, the mean of every feature.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float

from smat.evaluation.roar import roar_mask

__all__ = [
    "LogisticRegression",
    "RoarCurve",
    "SyntheticProblem",
    "accuracy",
    "fit_logistic_regression",
    "ground_truth_curve",
    "make_synthetic_problem",
    "roar_curve",
]


class SyntheticProblem(NamedTuple):
    """A train / test sample of the Eq. 1 problem.

    Attributes:
      x_train: ``(n_train, dim)`` float32 inputs.
      y_train: ``(n_train,)`` float32 labels in {0, 1}.
      x_test: ``(n_test, dim)``.
      y_test: ``(n_test,)``.
      informative: ``(dim,)`` bool, True at the features with :math:`a_j \\neq 0`.
    """

    x_train: Float[Array, "n_train dim"]
    y_train: Float[Array, " n_train"]
    x_test: Float[Array, "n_test dim"]
    y_test: Float[Array, " n_test"]
    informative: Bool[Array, " dim"]


class RoarCurve(NamedTuple):
    """A ROAR curve of the synthetic problem.

    Attributes:
      accuracy: ``(dim + 1,)`` test accuracy with k = 0..dim features masked.
      masked: ``(dim + 1, dim)`` bool, the features masked at each k (nested).
    """

    accuracy: Float[Array, " steps"]
    masked: Bool[Array, "steps dim"]


class LogisticRegression(NamedTuple):
    """Weights ``(dim,)`` and bias ``()`` of a logistic regression."""

    weights: Float[Array, " dim"]
    bias: Float[Array, ""]


@functools.partial(jax.jit, static_argnames=("num_train", "num_test", "dim", "num_informative"))
def make_synthetic_problem(
    key: jax.Array, *, num_train: int = 2000, num_test: int = 2000, dim: int = 16,
    num_informative: int = 4,
) -> SyntheticProblem:
    """Sample the problem of Eq. 1 (Hooker et al., 2019; Madsen et al., 2022, §3.3).

    Args:
      key: PRNG key; ``a`` and ``d`` are drawn once from it, then the examples.
      num_train / num_test: examples per split.
      dim: input dimension (16 in the papers).
      num_informative: leading features with nonzero ``a`` (4 in the papers).

    Returns:
      :class:`SyntheticProblem`.
    """
    k_a, k_d, k_data = jax.random.split(key, 3)
    informative = jnp.arange(dim) < num_informative  # (D,)
    a = jnp.where(informative, jax.random.normal(k_a, (dim,)), 0.0)  # (D,)
    d = jax.random.normal(k_d, (dim,))  # (D,)
    n = num_train + num_test
    k_z, k_eta, k_eps = jax.random.split(k_data, 3)
    z = jax.random.normal(k_z, (n,))
    eta = jax.random.normal(k_eta, (n,))
    eps = jax.random.normal(k_eps, (n, dim))
    x = a[None, :] * z[:, None] / 10 + d[None, :] * eta[:, None] + eps / 10  # (N, D)
    y = (z > 0).astype(jnp.float32)
    return SyntheticProblem(x[:num_train], y[:num_train], x[num_train:], y[num_train:],
                            informative)


def fit_logistic_regression(
    x: Float[Array, "n dim"], y: Float[Array, " n"], *, l2: float = 1e-4, steps: int = 30
) -> LogisticRegression:
    r"""L2-regularised logistic regression fitted by Newton's method (pure, vmap-able).

    Minimises :math:`\frac1n \sum_i \log(1 + e^{-s_i (w^\top x_i + b)}) +
    \frac{\lambda}{2}(\|w\|^2 + b^2)`, :math:`s_i = 2y_i - 1`, with ``steps`` full Newton
    steps from zero (the objective is strongly convex, so this converges quadratically).

    Args:
      x: ``(n, dim)`` inputs.
      y: ``(n,)`` labels in {0, 1}.
      l2: :math:`\lambda > 0` (keeps the Hessian invertible when a feature is constant,
        e.g. masked).
      steps: Newton iterations.

    Returns:
      :class:`LogisticRegression`.
    """
    features = jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)  # (n, D+1)
    eye = jnp.eye(features.shape[1], dtype=x.dtype)

    def newton(theta, _):
        p = jax.nn.sigmoid(features @ theta)  # (n,)
        grad = features.T @ (p - y) / x.shape[0] + l2 * theta  # (D+1,)
        hess = (features.T * (p * (1 - p))[None, :]) @ features / x.shape[0] + l2 * eye
        return theta - jnp.linalg.solve(hess, grad), None

    theta, _ = lax.scan(newton, jnp.zeros(features.shape[1], x.dtype), None, length=steps)
    return LogisticRegression(theta[:-1], theta[-1])


def accuracy(model: LogisticRegression, x: Float[Array, "n dim"],
             y: Float[Array, " n"]) -> Float[Array, ""]:
    """Fraction of examples where ``[w.x + b > 0]`` equals the label."""
    predictions = (x @ model.weights + model.bias > 0).astype(y.dtype)
    return jnp.mean(predictions == y)


def _masked_accuracy(problem: SyntheticProblem, masked: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Retrain with the masked features set to 0; test accuracy and |weights| (importance)."""
    keep = jnp.logical_not(masked)[None, :]  # (1, D)
    model = fit_logistic_regression(jnp.where(keep, problem.x_train, 0.0), problem.y_train)
    return (accuracy(model, jnp.where(keep, problem.x_test, 0.0), problem.y_test),
            jnp.abs(model.weights))


def _curve_from_scores(problem: SyntheticProblem, scores: jax.Array) -> RoarCurve:
    dim = scores.shape[0]
    maskable = jnp.ones((1, dim), bool)
    counts = jnp.arange(dim + 1)  # (D+1,)
    masks = jax.vmap(lambda k: roar_mask(scores[None, :], maskable, count=k)[0])(counts)
    return RoarCurve(jax.vmap(lambda m: _masked_accuracy(problem, m)[0])(masks), masks)


@functools.partial(jax.jit, static_argnames=("recursive",))
def roar_curve(problem: SyntheticProblem, *, recursive: bool) -> RoarCurve:
    """Test accuracy after masking k = 0..dim features, one per step, and retraining.

    ROAR ranks the features once by :math:`|w|` of the model trained on all features;
    Recursive ROAR ranks by :math:`|w|` of the model retrained at the previous step,
    keeping already-masked features masked (Madsen et al., 2022, §3.2-3.3).

    Args:
      problem: from :func:`make_synthetic_problem`.
      recursive: Recursive ROAR instead of ROAR.

    Returns:
      :class:`RoarCurve`: accuracies and masks for k = 0..dim masked features.
    """
    dim = problem.x_train.shape[1]
    first_accuracy, first_scores = _masked_accuracy(problem, jnp.zeros(dim, bool))
    if not recursive:
        return _curve_from_scores(problem, first_scores)
    maskable = jnp.ones((1, dim), bool)

    def step(carry, k):
        masked, scores = carry  # (D,), (D,): the previous step's mask and importance
        masked = roar_mask(scores[None, :], maskable, masked[None, :], count=k)[0]
        acc, scores = _masked_accuracy(problem, masked)
        return (masked, scores), (acc, masked)

    start = (jnp.zeros(dim, bool), first_scores)
    _, (accuracies, masks) = lax.scan(step, start, jnp.arange(1, dim + 1))
    return RoarCurve(jnp.concatenate([first_accuracy[None], accuracies]),
                     jnp.concatenate([jnp.zeros((1, dim), bool), masks]))


@jax.jit
def ground_truth_curve(problem: SyntheticProblem) -> RoarCurve:
    """The ROAR curve of the true order: informative features first (by position)."""
    return _curve_from_scores(problem, problem.informative.astype(jnp.float32))
