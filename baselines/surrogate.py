r"""Surrogate-model explainers over token features, Captum 0.9 semantics: Lime and KernelShap.

A coalition :math:`z \in \{0, 1\}^T` keeps the tokens with :math:`z_t = 1` and replaces the
others' attribution point by the baseline; the model's target output on each coalition is
regressed on :math:`z`, per example, and the coefficients are the token attributions
(written to every dimension of the token, as Captum does; reduce with ``"mean"``).
Padding is no feature: the coalitions range over each example's tokens (``mask``), padding
keeps its input and gets 0, so an example's attributions are Captum's on the example alone,
however wide its batch is padded.

- :func:`lime` (Ribeiro et al., 2016): coalitions with every token kept with probability
  1/2 (Captum's default sampler), weighted by :math:`\exp(-d^2 / (2 w^2))` with :math:`d =
  1 - \cos(x, \tilde x)` the cosine distance between the flattened original and perturbed
  tokens (each norm clamped at 1e-8, as torch does) and :math:`w` the kernel width, 1 by
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
    default Lime sampler). Feature t draws from ``fold_in(key, t)``, so a row's draws do not
    depend on how many padding columns follow it."""
    return jax.vmap(lambda t: jax.random.bernoulli(jax.random.fold_in(key, t), 0.5, (n,)),
                    out_axes=1)(jnp.arange(m))


def kernel_shap_coalitions(key: jax.Array, n: int, m: int,
                           features: ArrayLike | None = None) -> jax.Array:
    """``(n, m)`` coalitions of Captum's KernelShap sampler over the M columns marked by
    `features` (``(m,)`` bool, default all): k kept features with probability proportional
    to (M-1) / (k (M-k)), k = 1..M-1, which ones uniform; unmarked columns are 0. Size
    candidate k and column t draw from ``fold_in`` of the key with k and t, so a row's
    draws do not depend on how many padding columns follow it."""
    features = jnp.ones(m, bool) if features is None else jnp.asarray(features, bool)
    count = jnp.sum(features)
    size_key, order_key = jax.random.split(key)
    k = jnp.arange(1, m)
    logits = jnp.where(k < count, jnp.log((count - 1) / (k * jnp.maximum(count - k, 1))),
                       -jnp.inf)
    gumbel = jax.vmap(lambda j: jax.random.gumbel(jax.random.fold_in(size_key, j), (n,)),
                      out_axes=1)(k)  # (n, m-1): a categorical draw by the Gumbel-max trick
    sizes = jnp.argmax(logits[None] + gumbel, axis=-1) + 1  # (n,) in 1..M-1 (1 where M < 2)
    order = jax.vmap(lambda t: jax.random.normal(jax.random.fold_in(order_key, t), (n,)),
                     out_axes=1)(jnp.arange(m))
    order = jnp.where(features[None], order, -jnp.inf)
    ranks = jnp.argsort(jnp.argsort(-order, -1), -1)
    return ranks < sizes[:, None]  # the `size` largest normal draws are kept


def _coalitions(samples: ArrayLike, n_samples: int, x: jax.Array,
                features: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The coalitions ``(N, B, T)`` as the model sees them (padding kept) and as the fit
    sees them (padding 0, a column the least-squares solution leaves at 0)."""
    samples = jnp.asarray(samples)
    if samples.shape != (n_samples, *x.shape[:2]):
        raise ValueError(f"samples must be 0/1 coalitions of shape (n_samples, B, T) = "
                         f"{(n_samples, *x.shape[:2])}; got {samples.shape}.")
    z = samples.astype(x.dtype)
    return jnp.where(features[None], z, 1.0), jnp.where(features[None], z, 0.0)


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
    attr = jnp.broadcast_to(jnp.where(mask.astype(bool), coefficients, 0.0)[..., None], x.shape)
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
      samples: instead of `key`, the coalitions ``(n_samples, B, T)`` (1 = kept; columns
        outside the mask are ignored).
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
    features = mask.astype(bool)
    z, z_fit = _coalitions(samples, n_samples, x, features)
    baseline, target, y = _evaluate_coalitions(f, x, mask, z, baseline=baseline,
                                               target=target, chunk_size=chunk_size)
    # the distance is the example's alone: its tokens, not the padding of its batch
    tokens = features[..., None].astype(x.dtype)
    perturbed = (baseline[None] + z[..., None] * (x - baseline)[None]) * tokens[None]
    flat, flat_x = perturbed.reshape(*z.shape[:2], -1), (x * tokens).reshape(x.shape[0], -1)
    # torch's cosine similarity: each norm clamped at 1e-8 (an all-removed input has 0).
    norms = (jnp.maximum(jnp.linalg.norm(flat, axis=-1), 1e-8)
             * jnp.maximum(jnp.linalg.norm(flat_x, axis=-1), 1e-8)[None])
    cosine = jnp.sum(flat * flat_x[None], -1) / norms
    weights = jnp.exp(-((1 - cosine) ** 2) / (2 * kernel_width ** 2))  # (N, B)
    coefficients = jax.vmap(_weighted_fit, in_axes=(1, 1, 1))(z_fit, y, weights)  # (B, T)
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


def _constrained_fit(z, y, w, full, empty, features):
    """Least squares of y - empty on z, weights w, with the coefficients of the features
    summing to full - empty: the last feature's coefficient is eliminated (one example;
    z is 0 outside the features)."""
    gap = full - empty
    columns = jnp.arange(z.shape[1])
    last = jnp.max(jnp.where(features, columns, 0))
    others = features & (columns != last)
    design = jnp.where(others, z - z[:, last, None], 0.0)
    response = y - empty - z[:, last] * gap
    root = jnp.sqrt(w)
    solution, *_ = jnp.linalg.lstsq(design * root[:, None], response * root)
    solution = jnp.where(others, solution, 0.0)
    return solution.at[last].set(gap - jnp.sum(solution))


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
      samples: instead of `key`, the ``(n_samples - 2, B, T)`` sampled coalitions (columns
        outside the mask are ignored).
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
        raise ValueError(f"KernelShap needs inputs at least 2 tokens wide; got {m}.")
    features = mask.astype(bool)
    if samples is None:
        samples = jnp.swapaxes(jax.vmap(lambda k, row: kernel_shap_coalitions(k, drawn, m, row))(
            jax.random.split(key, batch), features), 0, 1)
    z, z_fit = _coalitions(samples, drawn, x, features)
    weights = jnp.ones(z.shape[:2], x.dtype) if weights is None else jnp.asarray(weights,
                                                                               x.dtype)
    if weights.shape != z.shape[:2]:
        raise ValueError(f"weights must have shape (n_samples - 2, B) = {z.shape[:2]}; got "
                         f"{weights.shape}.")
    baseline, target, y = _evaluate_coalitions(f, x, mask, z, baseline=baseline,
                                               target=target, chunk_size=chunk_size)
    full = target_outputs(f, x, (mask,), target)
    empty = target_outputs(f, baseline, (mask,), target)
    coefficients = jax.vmap(_constrained_fit, in_axes=(1, 1, 1, 0, 0, 0))(
        z_fit, y, weights, full, empty, features)
    return _attribution(coefficients, x, mask, reduction)
