r"""Surrogate-model explainers over token features, Captum 0.9 semantics: Lime and KernelShap.

A coalition :math:`z \in \{0, 1\}^T` keeps the tokens with :math:`z_t = 1` and replaces the
others' attribution point by the baseline; the model's target output on each coalition is
regressed on :math:`z`, per example, and the coefficients are the token attributions
(written to every dimension of the token, as Captum does; reduce with ``"mean"``).

- :func:`lime` (Ribeiro et al., 2016): coalitions with every token kept with probability
  1/2 (Captum's default sampler), weighted by :math:`\exp(-d^2 / (2 w^2))` with :math:`d =
  1 - \cos(x, \tilde x)` the cosine distance between the flattened original and perturbed
  inputs (each norm clamped at 1e-8, as torch does) and :math:`w` the kernel width, 1 by
  default: Captum's default similarity (``get_exp_kernel_similarity_function("cosine",
  1.0)``). It is fitted by weighted least squares with an intercept (Captum's
  ``SkLearnLinearRegression`` surrogate; Captum's own default is a Lasso).
- :func:`kernel_shap` (Lundberg & Lee, 2017): coalition sizes k drawn with probability
  :math:`\propto (M-1)/(k(M-k))`, the kept tokens uniformly given k (Captum's sampler,
  which makes the Shapley kernel weights uniform), fitted under the constraints that
  Captum imposes with a weight of 1e6 on the full and the empty coalition, solved here
  exactly: intercept = f(empty), coefficients summing to f(full) - f(empty). A drawn full
  or empty coalition (Captum weighs it 1e6 too) adds nothing to that fit. With every
  coalition and the Shapley kernel as weights, the coefficients are the Shapley values.

Coalitions come from a JAX key or are given (as the parity tests give Captum the same ones);
the model runs on them in a ``lax.scan`` over chunks of ``chunk_size`` coalitions, and the
fit is closed form inside the same jitted computation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines._common import (
    Attribution,
    baseline_like,
    check_inputs,
    check_reduction,
    resolve_target,
    target_outputs,
)
from smat.explainers.base import reduce_tokens

__all__ = ["kernel_shap", "kernel_shap_coalitions", "lime", "lime_coalitions",
           "shapley_kernel_weights"]


def _check_samples(n_samples: int, minimum: int) -> None:
    if not isinstance(n_samples, int) or n_samples < minimum:
        raise ValueError(f"n_samples must be an int >= {minimum}; got {n_samples!r}.")


def lime_coalitions(key: jax.Array, n: int, m: int) -> jax.Array:
    """``(n, m)`` coalitions keeping each of m features with probability 1/2 (Captum's
    default Lime sampler)."""
    return jax.random.bernoulli(key, 0.5, (n, m))


def kernel_shap_coalitions(key: jax.Array, n: int, m: int) -> jax.Array:
    """``(n, m)`` coalitions of Captum's KernelShap sampler: k kept features with
    probability proportional to (m-1) / (k (m-k)), k = 1..m-1, which ones uniform."""
    size_key, order_key = jax.random.split(key)
    k = jnp.arange(1, m)
    sizes = jax.random.categorical(size_key, jnp.log((m - 1) / (k * (m - k))),
                                   shape=(n,)) + 1  # (n,) in 1..m-1
    ranks = jnp.argsort(jnp.argsort(-jax.random.normal(order_key, (n, m)), -1), -1)
    return ranks < sizes[:, None]  # the `size` largest normal draws are kept


def _coalitions(samples: ArrayLike, n_samples: int, x: jax.Array) -> jax.Array:
    samples = jnp.asarray(samples)
    if samples.shape != (n_samples, *x.shape[:2]):
        raise ValueError(f"samples must be 0/1 coalitions of shape (n_samples, B, T) = "
                         f"{(n_samples, *x.shape[:2])}; got {samples.shape}.")
    return samples.astype(x.dtype)


def _evaluate_coalitions(forward, x, mask, samples, *, baseline, target, chunk_size):
    """The baseline ``(B, T, E)``, the target ``(B,)`` and the ``(N, B)`` target outputs on
    the coalitions ``samples (N, B, T)``."""
    baseline = baseline_like(baseline, x)
    args = (mask,)
    target = resolve_target(forward, x, args, target)
    return baseline, target, _coalition_outputs(forward, x, args, samples=samples,
                                                baseline=baseline, target=target,
                                                chunk_size=chunk_size)


def _coalition_outputs(forward, x, args, *, samples, baseline, target, chunk_size):
    """``(N, B)`` target outputs on the coalitions ``samples (N, B, T)``."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}.")
    n = samples.shape[0]
    n_chunks = math.ceil(n / chunk_size)
    per_chunk = math.ceil(n / n_chunks)
    padded = jnp.concatenate([samples, jnp.ones((n_chunks * per_chunk - n, *samples.shape[1:]),
                                                samples.dtype)])

    def chunk(_, coalitions):  # (S, B, T)
        inputs = baseline[None] + coalitions[..., None] * (x - baseline)[None]
        return None, jax.vmap(lambda p: target_outputs(forward, p, args, target))(inputs)

    _, outputs = jax.lax.scan(chunk, None, padded.reshape(n_chunks, per_chunk,
                                                          *samples.shape[1:]))
    return outputs.reshape(-1, x.shape[0])[:n]


def _weighted_fit(z: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    """Coefficients ``(T,)`` of least squares of y on [1, z] with weights w (one example)."""
    design = jnp.concatenate([jnp.ones((z.shape[0], 1), z.dtype), z], axis=1)
    root = jnp.sqrt(w)[:, None]
    solution, *_ = jnp.linalg.lstsq(design * root, y * root[:, 0])
    return solution[1:]


def _attribution(coefficients, x, mask, reduction):
    attr = jnp.broadcast_to(coefficients[..., None], x.shape)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)


def lime(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    key: jax.Array | None = None,
    n_samples: int = 50,
    samples: ArrayLike | None = None,
    baseline: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    kernel_width: float = 1.0,
    chunk_size: int = 16,
    reduction: str = "mean",
) -> Attribution:
    """Lime over tokens (Captum ``Lime`` with a linear-regression surrogate).

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      key: JAX PRNG key of the coalitions (each token kept with probability 1/2).
      n_samples: coalitions per example (>= 2).
      samples: instead of `key`, the coalitions ``(n_samples, B, T)`` (1 = kept).
      baseline: what a removed token becomes (broadcastable to ``x``); ``None`` = zeros.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      kernel_width: width w of the similarity kernel exp(-d^2 / (2 w^2)) over the cosine
        distance d (> 0; Captum's default 1).
      chunk_size: coalitions evaluated at once.
      reduction: token reduction (default ``"mean"``: the coefficient).

    Returns:
      :class:`~baselines.Attribution`: the surrogate's coefficients per token.

    Raises:
      ValueError / TypeError: bad n_samples, key / samples, kernel_width, baseline, shapes,
        target, chunk_size or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    _check_samples(n_samples, 2)
    if not kernel_width > 0:
        raise ValueError(f"kernel_width must be > 0; got {kernel_width!r}.")
    if (key is None) == (samples is None):
        raise ValueError("give exactly one of key (to draw coalitions) and samples.")
    if samples is None:
        samples = jnp.swapaxes(jax.vmap(lambda k: lime_coalitions(k, n_samples, x.shape[1]))(
            jax.random.split(key, x.shape[0])), 0, 1)
    z = _coalitions(samples, n_samples, x)
    baseline, target, y = _evaluate_coalitions(f, x, mask, z, baseline=baseline,
                                               target=target, chunk_size=chunk_size)
    perturbed = baseline[None] + z[..., None] * (x - baseline)[None]  # (N, B, T, E)
    flat, flat_x = perturbed.reshape(*z.shape[:2], -1), x.reshape(x.shape[0], -1)
    # torch's cosine similarity: each norm clamped at 1e-8 (an all-removed input has 0).
    norms = (jnp.maximum(jnp.linalg.norm(flat, axis=-1), 1e-8)
             * jnp.maximum(jnp.linalg.norm(flat_x, axis=-1), 1e-8)[None])
    cosine = jnp.sum(flat * flat_x[None], -1) / norms
    weights = jnp.exp(-((1 - cosine) ** 2) / (2 * kernel_width ** 2))  # (N, B)
    coefficients = jax.vmap(_weighted_fit, in_axes=(1, 1, 1))(z, y, weights)  # (B, T)
    return _attribution(coefficients, x, mask, reduction)


def shapley_kernel_weights(coalitions: ArrayLike) -> jax.Array:
    r"""The Shapley kernel :math:`(M-1) / \big(\binom{M}{k} k (M-k)\big)` of coalitions
    ``(..., M)`` with k kept features (infinite for k = 0 or M, which are constraints)."""
    coalitions = jnp.asarray(coalitions)
    m = coalitions.shape[-1]
    k = jnp.sum(coalitions, axis=-1).astype(jnp.float32)
    log_binom = (jax.scipy.special.gammaln(jnp.float32(m + 1)) - jax.scipy.special.gammaln(k + 1)
                 - jax.scipy.special.gammaln(m - k + 1))
    return (m - 1) / (jnp.exp(log_binom) * k * (m - k))


def _constrained_fit(z, y, w, full, empty):
    """Least squares of y - empty on z, weights w, with coefficients summing to
    full - empty: the last coefficient is eliminated (one example)."""
    gap = full - empty
    design = z[:, :-1] - z[:, -1:]
    response = y - empty - z[:, -1] * gap
    root = jnp.sqrt(w)
    head, *_ = jnp.linalg.lstsq(design * root[:, None], response * root)
    return jnp.concatenate([head, (gap - jnp.sum(head))[None]])


def kernel_shap(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    key: jax.Array | None = None,
    n_samples: int = 25,
    samples: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    baseline: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    chunk_size: int = 16,
    reduction: str = "mean",
) -> Attribution:
    """KernelShap over tokens (Captum ``KernelShap``).

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      key: JAX PRNG key of the coalitions (Captum's sampler, see the module).
      n_samples: coalitions per example including the full and the empty one, which
        Captum spends on the constraints (>= 3).
      samples: instead of `key`, the ``(n_samples - 2, B, T)`` sampled coalitions.
      weights: ``(n_samples - 2, B)`` regression weights (default 1: the sampler already
        follows the Shapley kernel); :func:`shapley_kernel_weights` for enumerated ones.
      baseline: what a removed token becomes (broadcastable to ``x``); ``None`` = zeros.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      chunk_size: coalitions evaluated at once.
      reduction: token reduction (default ``"mean"``: the Shapley value estimate).

    Returns:
      :class:`~baselines.Attribution`: per token, the constrained surrogate's coefficient.

    Raises:
      ValueError / TypeError: bad n_samples, key / samples, weights, baseline, shapes,
        target, chunk_size or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    _check_samples(n_samples, 3)
    if (key is None) == (samples is None):
        raise ValueError("give exactly one of key (to draw coalitions) and samples.")
    batch, m = x.shape[:2]
    drawn = n_samples - 2
    if m < 2:
        raise ValueError(f"KernelShap needs at least 2 tokens (features); got {m}.")
    if samples is None:
        samples = jnp.swapaxes(jax.vmap(lambda k: kernel_shap_coalitions(k, drawn, m))(
            jax.random.split(key, batch)), 0, 1)
    z = _coalitions(samples, drawn, x)
    weights = jnp.ones(z.shape[:2], x.dtype) if weights is None else jnp.asarray(weights,
                                                                               x.dtype)
    if weights.shape != z.shape[:2]:
        raise ValueError(f"weights must have shape (n_samples - 2, B) = {z.shape[:2]}; got "
                         f"{weights.shape}.")
    baseline, target, y = _evaluate_coalitions(f, x, mask, z, baseline=baseline,
                                               target=target, chunk_size=chunk_size)
    full = target_outputs(f, x, (mask,), target)
    empty = target_outputs(f, baseline, (mask,), target)
    coefficients = jax.vmap(_constrained_fit, in_axes=(1, 1, 1, 0, 0))(z, y, weights, full,
                                                                        empty)
    return _attribution(coefficients, x, mask, reduction)
