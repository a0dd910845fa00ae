"""Private helpers shared by the metric modules: input checks and token rankings."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int


def check_batch_seq(**arrays: ArrayLike) -> tuple[int, int]:
    """Check that every named array is 2-D ``(batch, seq)`` with one common shape.

    Runs at trace time (shapes are static), so it is free under ``jit``.

    Returns:
        ``(batch, seq)``.

    Raises:
        ValueError: naming the first array whose shape differs.
    """
    shape = None
    first = None
    for name, value in arrays.items():
        s = jnp.shape(value)
        if len(s) != 2:
            raise ValueError(f"{name} must have shape (batch, seq); got shape {s}.")
        if shape is None:
            shape, first = s, name
        elif s != shape:
            raise ValueError(f"{name} has shape {s} but {first} has shape {shape}; all inputs "
                             "must share the (batch, seq) shape.")
    if shape is None:
        raise TypeError("check_batch_seq needs at least one named array.")
    return shape


def descending_rank(
    scores: Float[Array, "batch seq"], mask: Bool[Array, "batch seq"]
) -> Int[Array, "batch seq"]:
    """0-based rank of each token by descending score within its row.

    Valid tokens (``mask``) come first, ordered by score, highest first; ties
    are broken by position (earlier token ranks higher), so the order is
    deterministic. Invalid tokens get ranks after all valid ones. ``-0.0`` and
    ``0.0`` tie.
    """
    invalid = jnp.logical_not(mask).astype(jnp.int32)
    neg = 0.0 - jnp.asarray(scores)  # 0.0 - x maps -0.0 and 0.0 to the same key
    pos = lax.broadcasted_iota(jnp.int32, neg.shape, neg.ndim - 1)
    _, _, order = lax.sort((invalid, neg, pos), dimension=-1, num_keys=3)
    return jnp.argsort(order, axis=-1).astype(jnp.int32)  # inverse permutation


def top_k_mask(
    scores: Float[Array, "batch seq"],
    mask: Bool[Array, "batch seq"],
    k: Int[Array, " batch"],
) -> Bool[Array, "batch seq"]:
    """Boolean mask of the ``k[b]`` highest-scoring valid tokens of each row.

    Ties are broken by position (see :func:`descending_rank`); if ``k[b]``
    exceeds the number of valid tokens, all valid tokens are selected.
    """
    rank = descending_rank(scores, mask)
    return jnp.logical_and(mask, rank < jnp.asarray(k)[:, None])


def masked_mean(values: Float[Array, " n"], valid: Bool[Array, " n"]) -> Float[Array, ""]:
    """Mean of ``values`` over ``valid`` entries; 0.0 when none is valid (never NaN)."""
    count = jnp.sum(valid)
    total = jnp.sum(jnp.where(valid, values, 0.0))
    return jnp.where(count > 0, total / jnp.maximum(count, 1).astype(total.dtype), 0.0)


def instance_map(fn, xs, *, batch_size: int | None):
    """Apply a per-instance function over the leading axis.

    ``batch_size=None`` vectorises everything at once (``vmap``); an integer
    bounds memory by running ``vmap`` over chunks of that many instances inside
    a ``lax.map`` loop.
    """
    if batch_size is None:
        return jax.vmap(fn)(*xs)
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive int or None; got {batch_size}.")
    return lax.map(lambda args: fn(*args), xs, batch_size=batch_size)


class PerInstance(NamedTuple):
    """Per-instance metric values with a validity mask (excluded instances are counted).

    Attributes:
        values: ``(batch,)`` float; 0.0 where ``valid`` is False (never NaN).
        valid: ``(batch,)`` bool; False for instances where the metric is undefined.
    """

    values: Float[Array, " batch"]
    valid: Bool[Array, " batch"]

    def mean(self) -> Float[Array, ""]:
        """Mean over valid instances (0.0 when none is valid)."""
        return masked_mean(self.values, self.valid)

    def num_excluded(self) -> Int[Array, ""]:
        """Number of instances left out of :meth:`mean`."""
        return jnp.sum(jnp.logical_not(self.valid))
