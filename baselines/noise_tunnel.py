r"""NoiseTunnel (SmoothGrad, SmoothGrad², VarGrad) around a gradient explainer, Captum 0.9
semantics, as a pure JAX function.

Each of ``nt_samples`` noisy copies :math:`x + \epsilon_s`, :math:`\epsilon_s \sim
\mathcal{N}(0, \sigma^2)` (``stdevs`` = :math:`\sigma`, absolute as in Captum), is explained
with the same target, and the attributions are combined:

.. math::

  \text{smoothgrad} = \tfrac{1}{S}\sum_s a(x + \epsilon_s), \quad
  \text{smoothgrad\_sq} = \tfrac{1}{S}\sum_s a(x + \epsilon_s)^2, \quad
  \text{vargrad} = \text{smoothgrad\_sq} - \text{smoothgrad}^2

(Smilkov et al., 2017; Adebayo et al., 2018). The samples run in a ``lax.scan``, one at a
time, so memory is that of one explanation. The noise comes from a JAX key.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines.gradients import (
    Attribution,
    _check_inputs,
    _check_reduction,
    _input_x_gradient_attributions,
    _integrated_gradients_attributions,
    _resolve_target,
    _saliency_attributions,
)
from smat.explainers.base import reduce_tokens

__all__ = ["NT_TYPES", "SMOOTHED", "noise_tunnel"]

NT_TYPES = ("smoothgrad", "smoothgrad_sq", "vargrad")
"""Captum's NoiseTunnel combinations."""

SMOOTHED = ("saliency", "input_x_gradient", "integrated_gradients")
"""The gradient explainers :func:`noise_tunnel` wraps."""


def _attributions(method: str, forward, x, args, target, options):
    if method == "saliency":
        return _saliency_attributions(forward, x, args, target=target,
                                      abs=options.get("abs", True))
    if method == "input_x_gradient":
        return _input_x_gradient_attributions(forward, x, args, target=target)
    return _integrated_gradients_attributions(
        forward, x, args, target=target, baseline=options.get("baseline"),
        n_steps=options.get("n_steps", 50), method=options.get("method", "gausslegendre"),
        chunk_size=options.get("chunk_size", 32), multiply_by_inputs=True,
        return_convergence_delta=False)[0]


def noise_tunnel(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    key: jax.Array | None = None,
    noise: Float[Array, "samples batch seq dim"] | None = None,
    method: str = "saliency",
    nt_type: str = "smoothgrad",
    nt_samples: int = 5,
    stdevs: float = 1.0,
    target: Int[Array, " batch"] | int | None = None,
    reduction: str = "l2",
    **options,
) -> Attribution:
    r"""A gradient explainer averaged over noisy copies of ``x`` (Captum ``NoiseTunnel``).

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      key: JAX PRNG key of the noise: ``stdevs * normal(key, (nt_samples, B, T, E))``.
      noise: the standard-normal draws themselves, ``(nt_samples, B, T, E)``, instead of
        `key` (e.g. drawn per data-set row, so a row's noise does not depend on its batch).
      method: the wrapped explainer, one of :data:`SMOOTHED`.
      nt_type: one of :data:`NT_TYPES`.
      nt_samples: noisy copies (>= 1).
      stdevs: standard deviation of the Gaussian noise (>= 0; 0 gives the plain method).
      target: output index per example ``(B,)`` or scalar; ``None`` = the predicted class
        at the clean ``x``, used for every noisy copy.
      reduction: token reduction name.
      **options: the wrapped method's options (``abs`` for saliency; ``baseline``,
        ``n_steps``, ``method``, ``chunk_size`` for integrated gradients).

    Returns:
      :class:`~baselines.Attribution` with the combined ``(B, T, E)`` attributions.

    Raises:
      ValueError / TypeError: a bad method, nt_type, nt_samples, stdevs, key / noise,
      shape, target or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    _check_inputs(x, mask)
    _check_reduction(reduction)
    if method not in SMOOTHED:
        raise ValueError(f"method must be one of {SMOOTHED}; got {method!r}.")
    if nt_type not in NT_TYPES:
        raise ValueError(f"nt_type must be one of {NT_TYPES}; got {nt_type!r}.")
    if not isinstance(nt_samples, int) or nt_samples < 1:
        raise ValueError(f"nt_samples must be an int >= 1; got {nt_samples!r}.")
    if not stdevs >= 0:
        raise ValueError(f"stdevs must be >= 0; got {stdevs!r}.")
    if (key is None) == (noise is None):
        raise ValueError("give exactly one of key (to draw the noise) and noise.")
    if noise is None:
        noise = jax.random.normal(key, (nt_samples, *x.shape), x.dtype)
    elif noise.shape != (nt_samples, *x.shape):
        raise ValueError(f"noise must have shape (nt_samples, B, T, E) = "
                         f"{(nt_samples, *x.shape)}; got {noise.shape}.")
    args = (mask,)
    target = _resolve_target(f, x, args, target)

    def sample(totals, draw):
        attr = _attributions(method, f, x + stdevs * draw, args, target, options)
        return (totals[0] + attr, totals[1] + attr * attr), None

    with jax.named_scope("noise_tunnel"):
        (total, total_sq), _ = jax.lax.scan(
            sample, (jnp.zeros_like(x), jnp.zeros_like(x)), jnp.asarray(noise, x.dtype))
    mean, mean_sq = total / nt_samples, total_sq / nt_samples
    attr = {"smoothgrad": mean, "smoothgrad_sq": mean_sq,
            "vargrad": mean_sq - mean * mean}[nt_type]
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)
