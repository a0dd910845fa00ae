r"""Gradient explainers with Captum 0.9 semantics, as pure JAX functions.

Each core takes any JAX function ``f(x, mask) -> outputs (B, C)`` — a smat model
bound by :mod:`baselines.model_adapters` or a user's own Flax model — the point
``x (B, T, E)`` at which to attribute (e.g. word embeddings) and the token mask,
and returns an :class:`Attribution`: the per-dimension attributions (what Captum
returns), their explicit token reduction to a :class:`~smat.explainers.Saliency`,
the reduction's name and (IG only) the convergence delta.

``target`` indexes the raw output (logit) of each example; ``None`` means the
predicted class :math:`\arg\max_c f(x)_c` (the single output for C = 1).

Note:
  Captum requires an explicit ``target`` for multi-output models; here ``None``
  selects the predicted class instead. Everything else (absolute value in
  Saliency, quadrature nodes and weights, scaling by ``x - baseline``, the delta)
  follows Captum 0.9 (``captum/attr/_core``), checked by the parity tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines._common import (
    Attribution,
    baseline_like,
    check_inputs,
    check_reduction,
    resolve_target,
    target_gradient,
    target_outputs,
)
from smat.explainers.base import reduce_tokens

__all__ = [
    "METHODS",
    "Attribution",
    "input_x_gradient",
    "integrated_gradients",
    "quadrature",
    "saliency",
]

METHODS = (
    "riemann_left",
    "riemann_right",
    "riemann_middle",
    "riemann_trapezoid",
    "gausslegendre",
)
"""Quadrature methods of :func:`integrated_gradients` (Captum's names)."""

# ------------------------------------------------------------------ quadrature


def _torch_linspace_f32(start: float, end: float, n: int) -> np.ndarray:
    """``torch.linspace(start, end, n)`` (float32, CPU) reproduced bit for bit.

    PyTorch's CPU kernel computes ``start + step * i`` for the first half and
    ``end - step * (n - 1 - i)`` for the second, in float32 with a fused
    multiply-add; float64 arithmetic on float32 operands (exact product) emulates it.
    """
    s, e = np.float32(start), np.float32(end)
    step = np.float64(np.float32((e - s) / np.float32(n - 1)))
    i = np.arange(n)
    first = (np.float64(s) + step * i).astype(np.float32)
    second = (np.float64(e) - step * (n - 1 - i)).astype(np.float32)
    return np.where(i < n // 2, first, second)


def quadrature(method: str, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Captum 0.9's integration nodes (alphas) and weights (step sizes) on [0, 1].

    .. math::

      \int_0^1 g(\alpha)\,d\alpha \approx \sum_k w_k\, g(\alpha_k)

    ``riemann_*``: :math:`w_k = 1/n` (halved at both ends for ``trapezoid``) and nodes
    from ``torch.linspace`` in float32 (left: ``[0, 1 - 1/n]``, right: ``[1/n, 1]``,
    middle: ``[1/(2n), 1 - 1/(2n)]``, trapezoid: ``[0, 1]``); ``gausslegendre``:
    numpy's Gauss-Legendre rule mapped from [-1, 1] to [0, 1].

    Args:
      method: one of :data:`METHODS`.
      n_steps: number of nodes (> 1 for Riemann, > 0 for Gauss-Legendre).

    Note:
      Captum's trapezoid rule uses weights :math:`1/n` (not :math:`1/(n-1)`) with
      nodes ``linspace(0, 1, n)``, so its weights sum to :math:`1 - 1/n`; this is
      reproduced as is, for parity.

    Returns:
      ``(alphas, weights)``, each a float64 numpy array of shape ``(n_steps,)``
      equal to Captum's ``approximation_parameters(method)`` lists.

    Raises:
      ValueError: unknown ``method`` or too few steps.
    """
    if method not in METHODS:
        raise ValueError(f"Unknown integration method {method!r}; valid choices are {METHODS}.")
    minimum = 1 if method == "gausslegendre" else 2
    if not isinstance(n_steps, int | np.integer) or n_steps < minimum:
        raise ValueError(f"n_steps must be an int >= {minimum} for {method!r}; got {n_steps!r}.")
    n = int(n_steps)
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n)
        return 0.5 * (1 + nodes), 0.5 * weights
    weights = np.full((n,), 1 / n)
    kind = method.split("_")[-1]
    if kind == "trapezoid":
        weights[0] /= 2
        weights[-1] /= 2
        start, end = 0.0, 1.0
    elif kind == "left":
        start, end = 0.0, 1 - 1 / n
    elif kind == "middle":
        start, end = 1 / (2 * n), 1 - 1 / (2 * n)
    else:
        start, end = 1 / n, 1.0
    return _torch_linspace_f32(start, end, n).astype(np.float64), weights


# ------------------------------------------------------------------ internal cores
# ``forward(x, *args) -> (B, C)``; the Captum-like facades call these directly.


def _saliency_attributions(forward, x, args, *, target, abs):
    grads = target_gradient(forward, x, args, resolve_target(forward, x, args, target))
    return jnp.abs(grads) if abs else grads


def _input_x_gradient_attributions(forward, x, args, *, target):
    return x * target_gradient(forward, x, args, resolve_target(forward, x, args, target))


def _steps_per_chunk(n_steps: int, chunk_size: int) -> tuple[int, int]:
    """Split ``n_steps`` into equal chunks of at most ``chunk_size`` (minimal padding)."""
    n_chunks = math.ceil(n_steps / chunk_size)
    return n_chunks, math.ceil(n_steps / n_chunks)


def _integrated_gradients_attributions(
    forward, x, args, *, baseline, target, n_steps, method, chunk_size, multiply_by_inputs,
    return_convergence_delta,
):
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}.")
    alphas, weights = quadrature(method, n_steps)
    baseline = baseline_like(baseline, x)
    target = resolve_target(forward, x, args, target)

    n_chunks, per_chunk = _steps_per_chunk(n_steps, chunk_size)
    pad = n_chunks * per_chunk - n_steps  # padded steps get weight 0
    alphas = np.pad(alphas, (0, pad)).reshape(n_chunks, per_chunk)
    weights = np.pad(weights, (0, pad)).reshape(n_chunks, per_chunk)
    diff = x - baseline

    def chunk(total, alpha_weight):
        alpha, weight = alpha_weight  # (S,), (S,)
        alpha = alpha.reshape((-1,) + (1,) * x.ndim)  # (S, 1, ..., 1)
        points = baseline[None] + alpha * diff[None]  # (S, B, T, E)
        grads = jax.vmap(lambda p: target_gradient(forward, p, args, target))(points)
        return total + jnp.tensordot(weight, grads, axes=1), None  # (B, T, E)

    with jax.named_scope("integrated_gradients"):
        total, _ = jax.lax.scan(
            chunk, jnp.zeros_like(x), (jnp.asarray(alphas, x.dtype), jnp.asarray(weights, x.dtype))
        )  # (B, T, E): sum_k w_k grad f(x'_k)
    attributions = total * diff if multiply_by_inputs else total
    delta = None
    if return_convergence_delta:
        gap = target_outputs(forward, x, args, target) - target_outputs(
            forward, baseline, args, target
        )  # (B,)
        delta = jnp.sum(attributions.reshape(x.shape[0], -1), axis=-1) - gap
    return attributions, delta


# ------------------------------------------------------------------ public cores


def saliency(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    target: Int[Array, " batch"] | int | None = None,
    abs: bool = True,
    reduction: str = "l2",
) -> Attribution:
    r"""Saliency (Simonyan et al, 2014): gradient of the target output w.r.t. ``x``.

    .. math:: a_{bte} = \Big|\frac{\partial f(x, m)_{b, c_b}}{\partial x_{bte}}\Big|

    (signed without ``abs``). Matches Captum 0.9 ``Saliency``.

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point (e.g. word embeddings).
      mask: ``(B, T)`` bool/int, nonzero at real tokens (passed to ``f``; reduction masks pads).
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      abs: take the absolute value (Captum's default).
      reduction: token reduction name (default ``"l2"``: the SMaT "Gradient L2").

    Returns:
      :class:`Attribution` with ``(B, T, E)`` attributions and the reduced saliency.

    Raises:
      ValueError / TypeError: bad shapes, target or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    attr = _saliency_attributions(f, x, (mask,), target=target, abs=abs)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)


def input_x_gradient(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    target: Int[Array, " batch"] | int | None = None,
    reduction: str = "sum",
) -> Attribution:
    r"""Input x Gradient (Denil et al, 2014): :math:`a = x \odot \partial f_{c}/\partial x`.

    Matches Captum 0.9 ``InputXGradient``.

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      reduction: token reduction name (default ``"sum"``, signed).

    Returns:
      :class:`Attribution` with ``(B, T, E)`` attributions and the reduced saliency.

    Raises:
      ValueError / TypeError: bad shapes, target or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    attr = _input_x_gradient_attributions(f, x, (mask,), target=target)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)


def integrated_gradients(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    baseline: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    n_steps: int = 50,
    method: str = "gausslegendre",
    chunk_size: int = 32,
    multiply_by_inputs: bool = True,
    return_convergence_delta: bool = False,
    reduction: str = "sum",
) -> Attribution:
    r"""Integrated Gradients (Sundararajan et al, 2017) with Captum 0.9's quadrature.

    .. math::

      a = (x - x') \odot \sum_{k=1}^{n} w_k\,
          \nabla_x f\big(x' + \alpha_k (x - x'), m\big)_{c},
      \qquad \delta = \sum a - \big(f(x)_c - f(x')_c\big)

    with nodes/weights :math:`(\alpha_k, w_k)` from :func:`quadrature`. All steps run
    in one computation: a ``lax.scan`` over chunks of at most ``chunk_size`` steps,
    each chunk ``vmap``-ed, so memory grows with ``chunk_size``, not ``n_steps``.

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      baseline: :math:`x'`, any array broadcastable to ``x`` (e.g. a PAD embedding
        ``(E,)``); ``None`` = zeros.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class at ``x``.
      n_steps: number of quadrature nodes.
      method: one of :data:`METHODS`.
      chunk_size: maximum steps evaluated at once (steps are split evenly; padding
        steps have weight 0).
      multiply_by_inputs: multiply the integrated gradient by ``x - x'`` (Captum's
        "global" attribution); ``False`` gives the "local" variant.
      return_convergence_delta: also compute :math:`\delta` (two extra forwards).
      reduction: token reduction name (default ``"sum"``, signed).

    Returns:
      :class:`Attribution`; ``delta`` is ``(B,)`` when requested, else ``None``.

    Raises:
      ValueError / TypeError: bad shapes, baseline, target, method, n_steps,
        chunk_size or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    attr, delta = _integrated_gradients_attributions(
        f, x, (mask,), baseline=baseline, target=target, n_steps=n_steps, method=method,
        chunk_size=chunk_size, multiply_by_inputs=multiply_by_inputs,
        return_convergence_delta=return_convergence_delta,
    )
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), delta, reduction)
