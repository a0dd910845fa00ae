r"""GradientShap (expected gradients) with Captum 0.9 semantics, as a pure JAX function.

For each of ``n_samples`` draws s per example: a baseline :math:`x'_s` from the given
distribution, a point :math:`\alpha_s \sim U(0, 1)` on the segment from it, and Gaussian
input noise :math:`\epsilon_s \sim \mathcal{N}(0, \sigma^2)`:

.. math::

  a = \frac{1}{S} \sum_s \nabla_x f\big(x'_s + \alpha_s (\tilde x_s - x'_s)\big)_c
      \odot (\tilde x_s - x'_s), \qquad \tilde x_s = x + \epsilon_s

(Lundberg & Lee, 2017; Erion et al., 2021), Captum's ``GradientShap`` (a NoiseTunnel of
``InputBaselineXGradient`` drawing baselines from the distribution). The draws come from a
JAX key, or are given (as the parity tests give Captum's numpy draws). The samples run in
a ``lax.scan``, so memory is that of one gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines._common import (
    Attribution,
    check_inputs,
    check_reduction,
    resolve_target,
    target_gradient,
)
from smat.explainers.base import reduce_tokens

__all__ = ["gradient_shap"]


def gradient_shap(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    baselines: ArrayLike | None = None,
    key: jax.Array | None = None,
    n_samples: int = 5,
    stdevs: float = 0.0,
    target: Int[Array, " batch"] | int | None = None,
    draws: tuple[ArrayLike, ArrayLike, ArrayLike] | None = None,
    reduction: str = "sum",
) -> Attribution:
    """GradientShap attributions of the target output (Captum ``GradientShap``).

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      baselines: the baseline distribution, ``(R, T, E)`` (or one baseline broadcastable
        to ``(T, E)``); ``None`` = one zero baseline.
      key: JAX PRNG key of the draws.
      n_samples: draws per example (>= 1).
      stdevs: standard deviation of the input noise (>= 0).
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      draws: instead of `key`, the draws themselves: baseline indices ``(S, B)`` int,
        alphas ``(S, B)`` in [0, 1] and standard-normal noise ``(S, B, T, E)``.
      reduction: token reduction name (default ``"sum"``, signed).

    Returns:
      :class:`~baselines.Attribution` with ``(B, T, E)`` attributions.

    Raises:
      ValueError / TypeError: bad n_samples, stdevs, baselines, key / draws, shapes,
      target or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    if not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"n_samples must be an int >= 1; got {n_samples!r}.")
    if not stdevs >= 0:
        raise ValueError(f"stdevs must be >= 0; got {stdevs!r}.")
    batch, sample_shape = x.shape[0], x.shape[1:]
    if baselines is None:
        baselines = jnp.zeros((1, *sample_shape), x.dtype)
    baselines = jnp.asarray(baselines, x.dtype)
    if baselines.ndim < x.ndim:
        try:
            baselines = jnp.broadcast_to(baselines, sample_shape)[None]
        except ValueError:
            raise ValueError(f"baselines of shape {baselines.shape} do not broadcast to one "
                             f"input {sample_shape}.") from None
    if baselines.shape[1:] != sample_shape:
        raise ValueError(f"baselines must be (R, *{sample_shape}) or broadcast to "
                         f"{sample_shape}; got {baselines.shape}.")
    if (key is None) == (draws is None):
        raise ValueError("give exactly one of key (to draw) and draws.")
    if draws is None:
        index_key, alpha_key, noise_key = jax.random.split(key, 3)
        draws = (jax.random.randint(index_key, (n_samples, batch), 0, baselines.shape[0]),
                 jax.random.uniform(alpha_key, (n_samples, batch), x.dtype),
                 jax.random.normal(noise_key, (n_samples, *x.shape), x.dtype))
    indices, alphas, noise = (jnp.asarray(d) for d in draws)
    if (indices.shape, alphas.shape, noise.shape) != ((n_samples, batch),) * 2 + (
            (n_samples, *x.shape),):
        raise ValueError(f"draws must be indices and alphas ({n_samples}, {batch}) and noise "
                         f"{(n_samples, *x.shape)}; got {indices.shape}, {alphas.shape}, "
                         f"{noise.shape}.")
    args = (mask,)
    target = resolve_target(f, x, args, target)

    def sample(total, draw):
        index, alpha, eps = draw
        noisy = x + stdevs * eps
        start = baselines[index]  # (B, T, E)
        point = start + alpha.astype(x.dtype)[:, None, None] * (noisy - start)
        return total + target_gradient(f, point, args, target) * (noisy - start), None

    with jax.named_scope("gradient_shap"):
        total, _ = jax.lax.scan(sample, jnp.zeros_like(x),
                                (indices, alphas, noise.astype(x.dtype)))
    attr = total / n_samples
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)
