"""Explainer protocol: the ``Saliency`` result, ``to_distribution`` and token reductions.

An explainer maps a batch to a :class:`Saliency` — one score per input position
(token or image patch) plus the mask of real positions (design §2). Static
explainers are plain functions; learned explainers are ``init``/``apply`` pairs
over a parameter pytree (see :class:`AbstractLearnedExplainer`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

__all__ = [
    "REDUCTIONS",
    "AbstractLearnedExplainer",
    "Saliency",
    "reduce_tokens",
    "to_distribution",
]


class Saliency(NamedTuple):
    """Per-position saliency scores of a batch.

    Attributes:
      scores: ``(B, T)`` float32 scores; larger means more salient. Scores at padded
        positions carry no meaning (smat's explainers set them to 0); always combine
        them with ``mask`` (e.g. through :func:`to_distribution`).
      mask: ``(B, T)`` bool, True at real positions.
    """

    scores: Float[Array, "batch seq"]
    mask: Bool[Array, "batch seq"]


def _check_scores_mask(scores: jax.Array, mask: jax.Array, *, where: str) -> None:
    if scores.ndim != 2:
        raise ValueError(f"{where}: scores must have shape (B, T); got shape {scores.shape}.")
    if mask.shape != scores.shape:
        raise ValueError(
            f"{where}: mask shape {mask.shape} must equal scores shape {scores.shape} (B, T)."
        )


def to_distribution(
    saliency: Saliency, *, temperature: float | ArrayLike = 1.0
) -> Float[Array, "batch seq"]:
    r"""Masked softmax of the scores onto the probability simplex over real positions.

    .. math::

      p_{bt} = \frac{m_{bt}\,\exp(s_{bt} / \tau)}{\sum_{t'} m_{bt'}\,\exp(s_{bt'} / \tau)}

    This is the outer SOFTMAX of the SMaT attention explainer (Fernandes et al, 2022,
    **Eq. 11**) and the projection used for gradient explainers (their App. A).
    Padded positions get probability exactly 0; a row without any real position
    is all zeros (not NaN). Gradients are finite everywhere.

    Args:
      saliency: :class:`Saliency` with ``scores (B, T)`` and ``mask (B, T)``.
      temperature: positive scalar :math:`\tau` (keyword-only).

    Returns:
      ``(B, T)`` float32 distribution; each row with a real position sums to 1.

    Raises:
      ValueError: if scores are not 2-D, the mask shape differs, or a Python-number
        temperature is not positive.

    Example:
      >>> import jax.numpy as jnp
      >>> s = Saliency(jnp.array([[0.0, 0.0, 5.0]]), jnp.array([[True, True, False]]))
      >>> to_distribution(s).tolist()
      [[0.5, 0.5, 0.0]]
    """
    scores = jnp.asarray(saliency.scores, dtype=jnp.float32)
    mask = jnp.asarray(saliency.mask, dtype=bool)
    _check_scores_mask(scores, mask, where="to_distribution")
    if isinstance(temperature, int | float) and not temperature > 0:
        raise ValueError(f"to_distribution: temperature must be > 0; got {temperature!r}.")
    z = jnp.where(mask, scores / temperature, -jnp.inf)  # (B, T)
    z_max = jnp.max(z, axis=-1, keepdims=True)  # (B, 1)
    z_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(z_max), z_max, 0.0))
    e = jnp.where(mask, jnp.exp(z - z_max), 0.0)  # (B, T)
    total = jnp.sum(e, axis=-1, keepdims=True)  # (B, 1)
    return e / jnp.where(total > 0, total, 1.0)


# ---------------------------------------------------------------- token reductions


def _l2(x: jax.Array) -> jax.Array:
    sq = jnp.sum(x * x, axis=-1)
    positive = sq > 0
    # Double-where keeps the gradient finite at exactly-zero attributions.
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


REDUCTIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "l2": _l2,
    "sum": lambda x: jnp.sum(x, axis=-1),
    "abs_sum": lambda x: jnp.abs(jnp.sum(x, axis=-1)),
    "l1": lambda x: jnp.sum(jnp.abs(x), axis=-1),
    "mean": lambda x: jnp.mean(x, axis=-1),
}
"""Token reductions ``(B, T, D) -> (B, T)`` by name.

``l2``: :math:`\\|a_{bt}\\|_2` (the SMaT "Gradient L2");
``sum``: :math:`\\sum_d a_{btd}` (signed; Input x Gradient and IG);
``abs_sum``: :math:`|\\sum_d a_{btd}|`;
``l1``: :math:`\\sum_d |a_{btd}|`;
``mean``: :math:`\\frac{1}{D}\\sum_d a_{btd}` (signed; the token's value when the
attributions are constant over D, as in feature ablation and occlusion).
"""


def reduce_tokens(
    attributions: Float[Array, "batch seq dim"],
    mask: Bool[Array, "batch seq"] | ArrayLike,
    *,
    reduction: str,
) -> Saliency:
    """Reduce per-dimension attributions ``(B, T, D)`` to per-token scores.

    Args:
      attributions: ``(B, T, D)`` attributions (e.g. gradients w.r.t. embeddings).
      mask: ``(B, T)`` bool or int, nonzero at real tokens.
      reduction: one of ``REDUCTIONS`` (``"l2"``, ``"sum"``, ``"abs_sum"``, ``"l1"``,
        ``"mean"``).

    Returns:
      :class:`Saliency` with float32 scores, 0 at padded positions.

    Raises:
      ValueError: unknown ``reduction`` or shapes that do not match ``(B, T, D)`` / ``(B, T)``.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"Unknown reduction {reduction!r}; valid choices are {sorted(REDUCTIONS)}."
        )
    attributions = jnp.asarray(attributions)
    mask = jnp.asarray(mask).astype(bool)
    if attributions.ndim != 3 or attributions.shape[:2] != mask.shape:
        raise ValueError(
            f"reduce_tokens expects attributions (B, T, D) and mask (B, T); got "
            f"{attributions.shape} and {mask.shape}."
        )
    scores = REDUCTIONS[reduction](attributions).astype(jnp.float32)  # (B, T)
    return Saliency(jnp.where(mask, scores, 0.0), mask)


# ---------------------------------------------------------------- protocol


class AbstractLearnedExplainer(abc.ABC):
    """Interface of a learned explainer: ``init`` parameters, ``apply`` them to a batch.

    Implementations bind a frozen config and delegate to pure module-level
    functions, so ``apply`` can be jitted and differentiated w.r.t. ``params``
    (the SMaT outer step differentiates through it, design §5).
    """

    @abc.abstractmethod
    def init(self, rng: jax.Array) -> Any:
        """Return the initial parameter pytree."""

    @abc.abstractmethod
    def apply(self, params: Any, *inputs: Any) -> Saliency:
        """Explain a batch: return a :class:`Saliency` of shape ``(B, T)``."""
