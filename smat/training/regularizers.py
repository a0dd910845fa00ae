r"""Representation regularizers that raise agreement between saliency methods.

Jukić et al. (2022, §3.4) add one of two penalties to the task loss of a teacher, both
computed on the last layer's hidden states :math:`H = (h_1, \dots, h_T)` of each example,
over its real tokens only:

.. math::

  \mathrm{ATM}(h_i, H) = \cos\Big(h_i, \frac1T \sum_j h_j\Big), \qquad
  \mathrm{conicity}(H) = \frac1T \sum_i \mathrm{ATM}(h_i, H)
  \qquad \text{(Eqs. 1-2; Mohankumar et al., 2020)}

.. math::

  \mathrm{tying}(H, E) = \frac1T \sum_i \lVert h_i - e_i \rVert_2^2
  \qquad \text{(Eq. 3; Tutek and Šnajder, 2020)}

with :math:`e_i = \mathrm{embed}(x_i)` the embedded token i. The paper takes the
regularizer from recurrent models, whose input is the word embedding; for a transformer
smat ties to the encoder's input, the embedding block's output (word + position + type
embeddings and LayerNorm), by default (``TeacherTrainConfig.tying_target``; the raw word
embeddings are the other choice). The authors' code was not available to check which one
their DistilBERT runs used. Conicity near 1 means the hidden
states lie in a narrow cone; tying keeps each state close to its own token. The teacher
loss adds ``conicity_weight * conicity + tying_weight * tying`` (batch means), and the
training loop logs both at every evaluation whatever the weights (conicity is a useful
diagnostic of an unregularized model too).

:func:`select_weight` is the paper's rule for the weights (appendix A.2): the strongest
weight of a grid whose validation F1 stays within 3 points of the unregularized model's.

References:
  Jukić et al, `Easy to Decide, Hard to Agree: Reducing Disagreements Between Saliency
  Methods <https://arxiv.org/abs/2211.08369>`_, 2022, **Eqs. 1-3**, appendix A.2.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float

__all__ = ["conicity", "select_weight", "tying"]


def _floating(x: ArrayLike) -> jax.Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.float32)


def _real_tokens(mask: ArrayLike, like: jax.Array, name: str) -> jax.Array:
    mask = jnp.asarray(mask)
    if mask.shape != like.shape[:2]:
        raise ValueError(f"{name}: mask must be (batch, seq) = {like.shape[:2]}, got "
                         f"{mask.shape}")
    return (mask != 0).astype(like.dtype)


def conicity(hidden: Float[Array, "batch seq dim"] | ArrayLike,
             mask: ArrayLike, *, eps: float = 1e-8) -> Float[Array, " batch"]:
    """Mean cosine similarity of each real token's hidden state to their mean (Eq. 2).

    Args:
      hidden: ``(B, T, D)`` hidden states.
      mask: ``(B, T)`` bool/int, nonzero at real tokens (padding is ignored entirely).
      eps: added to the norms, so a zero vector gives cosine 0 instead of NaN.

    Returns:
      ``(B,)`` conicity per example, in [-1, 1] (1: all states point one way).

    Raises:
      ValueError: `hidden` not 3-D or a mask of another shape.
    """
    hidden = _floating(hidden)
    if hidden.ndim != 3:
        raise ValueError(f"conicity: hidden must be (batch, seq, dim), got {hidden.shape}")
    real = _real_tokens(mask, hidden, "conicity")  # (B, T)
    count = jnp.maximum(real.sum(-1), 1)  # (B,)
    mean = jnp.einsum("bt,btd->bd", real, hidden) / count[:, None]  # (B, D)
    cosine = jnp.einsum("btd,bd->bt", hidden, mean) / (
        (jnp.linalg.norm(hidden, axis=-1) + eps) * (jnp.linalg.norm(mean, axis=-1) + eps)[:, None])
    return jnp.sum(cosine * real, axis=-1) / count


def tying(hidden: Float[Array, "batch seq dim"] | ArrayLike,
          embeddings: Float[Array, "batch seq dim"] | ArrayLike,
          mask: ArrayLike) -> Float[Array, " batch"]:
    """Mean squared L2 distance of each real token's hidden state to its embedding (Eq. 3).

    Args:
      hidden: ``(B, T, D)`` last-layer hidden states.
      embeddings: ``(B, T, D)`` input word embeddings of the same tokens.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.

    Returns:
      ``(B,)`` tying per example (0 when the states equal the embeddings).

    Raises:
      ValueError: shapes that differ (naming both sizes: tying needs the hidden size to
        equal the embedding size) or a mask of another shape.
    """
    hidden, embeddings = _floating(hidden), _floating(embeddings)
    if hidden.shape != embeddings.shape or hidden.ndim != 3:
        raise ValueError(f"tying compares each hidden state with its input embedding: hidden "
                         f"{hidden.shape} and embeddings {embeddings.shape} must be one "
                         "(batch, seq, dim) shape (hidden size = embedding size)")
    real = _real_tokens(mask, hidden, "tying")
    distance = jnp.sum(jnp.square(hidden - embeddings), axis=-1)  # (B, T)
    return jnp.sum(distance * real, axis=-1) / jnp.maximum(real.sum(-1), 1)


def select_weight(validation_f1: Mapping[float, float], *, unregularized: float,
                  tolerance: float = 3.0) -> float:
    """The strongest regularization weight whose validation F1 stays within `tolerance`
    points of the unregularized model's (Jukić et al., appendix A.2).

    Args:
      validation_f1: weight -> validation F1 (in points, e.g. 87.5) of the model trained
        with it.
      unregularized: the unregularized model's validation F1, in the same units.
      tolerance: allowed drop (the paper: 3 F1 points).

    Returns:
      The largest qualifying weight, or 0.0 when none qualifies.

    Raises:
      ValueError: an empty grid, a negative weight or a negative tolerance.
    """
    if not validation_f1:
        raise ValueError("select_weight needs at least one (weight, validation F1) pair")
    if min(validation_f1) < 0 or tolerance < 0:
        raise ValueError(f"weights and tolerance must be >= 0; got weights "
                         f"{sorted(validation_f1)} and tolerance {tolerance}")
    fine = [w for w, f1 in validation_f1.items() if f1 >= unregularized - tolerance]
    return float(max(fine)) if fine else 0.0
