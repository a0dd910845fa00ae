"""Normalizers for head coefficients: ``lambda = NORMALIZE(phi)`` in the SMaT explainer.

All normalizers act on the last axis and accept any leading batch axes. They are
looked up by name through one explicit mapping (:data:`NORMALIZERS`,
:func:`get_normalizer`).

References:
  Martins & Astudillo, `From Softmax to Sparsemax
  <https://arxiv.org/abs/1602.02068>`_, 2016, **Eq. 2**.
  Peters et al, `Sparse Sequence-to-Sequence Models
  <https://arxiv.org/abs/1905.05702>`_, 2019, **Alg. 2** (exact 1.5-entmax).
  Fernandes et al, Learning to Scaffold, 2022, **Eq. 11** (NORMALIZE).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Float

__all__ = [
    "NORMALIZERS",
    "entmax15",
    "get_normalizer",
    "identity",
    "softmax",
    "sparsemax",
]


def _over_last_axis(fn: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    """Apply a 1-D function to every vector along the last axis of ``x``."""
    if x.ndim == 0:
        raise ValueError("normalizers need at least one axis; got a scalar.")
    flat = x.reshape((-1, x.shape[-1]))  # (N, n)
    return jax.vmap(fn)(flat).reshape(x.shape)


def sparsemax(x: Float[Array, "... n"] | ArrayLike) -> Float[Array, "... n"]:
    r"""Sparsemax: Euclidean projection onto the probability simplex (last axis).

    .. math::

      \operatorname{sparsemax}(z) = \underset{p \in \Delta^{n-1}}{\operatorname{argmin}}
      \; \|p - z\|_2^2

    The projection is ``optax.projections.projection_simplex`` (sort-based); its JVP is the
    closed form of Martins & Astudillo (2016, Eq. 14), written here so that
    differentiation never runs optax's own rule, which mixes int and float arrays (JAX's
    strict dtype promotion rejects that; the tests run under it).

    Args:
      x: ``(..., n)`` real vector(s).

    Returns:
      ``(..., n)`` nonnegative, summing to 1 along the last axis; often sparse.

    Example:
      >>> import jax.numpy as jnp
      >>> sparsemax(jnp.array([1.0, 0.0, -1.0])).tolist()
      [1.0, 0.0, 0.0]
    """
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):  # optax's `values / scale` made it float
        x = x.astype(jnp.result_type(float))
    return _over_last_axis(_sparsemax_1d, x)


@jax.custom_jvp
def _sparsemax_1d(x: jax.Array) -> jax.Array:
    # optax divides by an int array inside; promotion rules are a tracing-time setting.
    with jax.numpy_dtype_promotion("standard"):
        return optax.projections.projection_simplex(x)


@_sparsemax_1d.defjvp
def _sparsemax_1d_jvp(primals, tangents):
    """J = diag(s) - s s^T / |S| with s the support indicator (Martins & Astudillo, Eq. 14)."""
    (x,), (dx,) = primals, tangents
    y = _sparsemax_1d(x)
    support = (y > 0).astype(dx.dtype)
    return y, support * (dx - jnp.sum(support * dx) / jnp.sum(support))


@jax.custom_jvp
def _entmax15_1d(x: jax.Array) -> jax.Array:
    z = (x - jnp.max(x)) / 2  # entmax is shift-invariant; the shift keeps sums small
    n = z.shape[0]
    z_sorted = jnp.sort(z)[::-1]  # (n,), descending
    k = jnp.arange(1, n + 1, dtype=z.dtype)

    def threshold(count, mean, ss):  # tau if the support were the top `count` entries
        return mean - jnp.sqrt(jnp.maximum((1 - ss) / count, 0.0))

    mean = jnp.cumsum(z_sorted) / k
    ss = k * (jnp.cumsum(z_sorted * z_sorted) / k - mean * mean)
    support = jnp.sum(threshold(k, mean, ss) <= z_sorted)  # k*, always >= 1
    # The cumulative variance above cancels digits in float32; it only picks k*. The
    # threshold of that support is recomputed with a two-pass variance.
    count = support.astype(z.dtype)
    top = k <= count
    mean_star = jnp.sum(jnp.where(top, z_sorted, 0.0)) / count
    ss_star = jnp.sum(jnp.where(top, jnp.square(z_sorted - mean_star), 0.0))
    tau_star = threshold(count, mean_star, ss_star)
    return jnp.square(jnp.maximum(z - tau_star, 0.0))


@_entmax15_1d.defjvp
def _entmax15_1d_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = _entmax15_1d(x)
    g = jnp.sqrt(y)  # (z - tau)_+
    dy = g * dx
    dy = dy - g * (jnp.sum(dy) / jnp.sum(g))
    return y, dy


def entmax15(x: Float[Array, "... n"] | ArrayLike) -> Float[Array, "... n"]:
    r"""Exact 1.5-entmax along the last axis (sort-based, custom JVP).

    .. math::

      \operatorname{entmax}_{1.5}(z) = \big[\tfrac{z}{2} - \tau \mathbf 1\big]_+^2,
      \quad \tau \text{ such that the output sums to } 1.

    The threshold is found exactly by sorting (Peters et al, 2019, Alg. 2). The JVP
    uses the closed-form Jacobian :math:`\operatorname{diag}(g) - g g^\top / \mathbf 1^\top g`
    with :math:`g = \sqrt{y}`.

    Args:
      x: ``(..., n)`` real vector(s).

    Returns:
      ``(..., n)`` nonnegative, summing to 1 along the last axis.

    Note:
      No maintained JAX entmax package exists on PyPI (``entmax`` is PyTorch only),
      so this is an own implementation tested against a bisection reference.
    """
    return _over_last_axis(_entmax15_1d, jnp.asarray(x))


def softmax(x: Float[Array, "... n"] | ArrayLike) -> Float[Array, "... n"]:
    """Softmax along the last axis (dense convex combination).

    Args:
      x: ``(..., n)`` real vector(s).

    Returns:
      ``(..., n)`` positive, summing to 1 along the last axis.
    """
    return jax.nn.softmax(jnp.asarray(x), axis=-1)


def identity(x: Float[Array, "... n"] | ArrayLike) -> Float[Array, "... n"]:
    """Identity: the head coefficients are used as given (not a convex combination).

    Args:
      x: ``(..., n)`` real vector(s).

    Returns:
      ``x`` unchanged, as an array.
    """
    return jnp.asarray(x)


NORMALIZERS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "sparsemax": sparsemax,
    "entmax15": entmax15,
    "softmax": softmax,
    "identity": identity,
}


def get_normalizer(name: str) -> Callable[[jax.Array], jax.Array]:
    """Look a normalizer up by name.

    Args:
      name: one of ``"sparsemax"``, ``"entmax15"``, ``"softmax"``, ``"identity"``.

    Returns:
      The normalizer function ``(..., n) -> (..., n)``.

    Raises:
      ValueError: if ``name`` is unknown (the message lists the valid names).
    """
    try:
        return NORMALIZERS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown normalizer {name!r}; valid choices are {sorted(NORMALIZERS)}."
        ) from None
