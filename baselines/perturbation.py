r"""Perturbation explainers with Captum 0.9 semantics, as pure JAX functions.

Token features: every explainer here removes whole tokens, i.e. replaces all ``E``
dimensions of a token's attribution point ``x[b, t]`` by the baseline, and measures the
drop of the target output. Like Captum, the attribution of a feature is written to every
element of it, so the ``(B, T, E)`` attributions are constant over ``E`` and the token
score is their mean (reduction ``"mean"``).

- :func:`feature_ablation`: one token at a time (Captum ``FeatureAblation`` with a
  feature mask numbering the tokens).
- :func:`occlusion`: windows of ``window`` consecutive tokens every ``stride`` tokens,
  each token's score averaged over the windows that cover it (Captum ``Occlusion`` with
  ``sliding_window_shapes=(window, E)``, ``strides=(stride, E)``; a last window that
  would run past the end is cut there, as Captum's padding does).

All perturbations of a batch run in one computation: a ``lax.scan`` over chunks of at
most ``chunk_size`` perturbations, each chunk ``vmap``-ed, so memory grows with
``chunk_size`` (Captum's ``perturbations_per_eval``), not with the number of tokens.
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
    target_outputs,
)
from smat.explainers.base import reduce_tokens

__all__ = ["feature_ablation", "occlusion", "occlusion_windows"]


def occlusion_windows(length: int, window: int, stride: int) -> np.ndarray:
    """``(W, length)`` 0/1 masks of Captum's sliding windows along the token axis.

    Window k starts at ``k * stride``; there are ``ceil((length - window) / stride) + 1``
    of them, and the last one is cut at ``length``, so every token is covered.

    Raises:
      ValueError: ``window`` or ``stride`` not in ``1..length``, or ``stride > window``
        (tokens would be skipped; Captum refuses it too).
    """
    for name, value in (("window", window), ("stride", stride)):
        if not isinstance(value, int | np.integer) or not 1 <= value <= length:
            raise ValueError(f"{name} must be an int in 1..{length} (the number of tokens); "
                             f"got {value!r}.")
    if stride > window and window < length:
        raise ValueError(f"stride ({stride}) cannot exceed window ({window}): tokens "
                         "between windows would never be occluded.")
    count = math.ceil((length - window) / stride) + 1
    masks = np.zeros((count, length), np.float32)
    for k in range(count):
        masks[k, k * stride:k * stride + window] = 1.0
    return masks


def _ablation_attributions(forward, x, args, *, windows, baseline, target, chunk_size,
                           average):
    """``(B, T, E)``: per token, the target-output drop when its windows are removed."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}.")
    baseline = baseline_like(baseline, x)
    target = resolve_target(forward, x, args, target)
    reference = target_outputs(forward, x, args, target)  # (B,)
    n_chunks = math.ceil(len(windows) / chunk_size)
    per_chunk = math.ceil(len(windows) / n_chunks)
    # Padding windows remove nothing: their drop is exactly 0 and they add no coverage.
    padded = np.zeros((n_chunks * per_chunk, windows.shape[1]), np.float32)
    padded[:len(windows)] = windows
    chunks = jnp.asarray(padded.reshape(n_chunks, per_chunk, -1), x.dtype)

    def chunk(total, masks):  # masks (S, T)
        keep = (1 - masks)[:, None, :, None]  # (S, 1, T, 1)
        removed = x[None] * keep + baseline[None] * (1 - keep)  # (S, B, T, E)
        outputs = jax.vmap(lambda p: target_outputs(forward, p, args, target))(removed)
        drop = reference[None] - outputs  # (S, B)
        return total + jnp.einsum("sb,st->bt", drop, masks), None

    with jax.named_scope("ablation"):
        total, _ = jax.lax.scan(chunk, jnp.zeros(x.shape[:2], x.dtype), chunks)
    if average:
        total = total / jnp.asarray(windows.sum(0), x.dtype)[None]
    return jnp.broadcast_to(total[..., None], x.shape)


def feature_ablation(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    baseline: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    chunk_size: int = 16,
    reduction: str = "mean",
) -> Attribution:
    r"""Feature ablation over tokens: :math:`a_{bt} = f(x)_c - f(x_{t \to x'})_c`.

    Matches Captum 0.9 ``FeatureAblation`` with ``feature_mask`` numbering the tokens
    (every dimension of token t is feature t).

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point (e.g. word embeddings).
      mask: ``(B, T)`` bool/int, nonzero at real tokens (passed to ``f``; reduction masks
        pads).
      baseline: what a removed token becomes, any array broadcastable to ``x`` (e.g. the
        [MASK] embedding ``(E,)``); ``None`` = zeros (Captum's default).
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      chunk_size: perturbations evaluated at once (Captum's ``perturbations_per_eval``).
      reduction: token reduction (default ``"mean"``: the token's value).

    Returns:
      :class:`~baselines.Attribution` with ``(B, T, E)`` attributions (constant over E).

    Raises:
      ValueError / TypeError: bad shapes, baseline, target, chunk_size or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    attr = _ablation_attributions(f, x, (mask,), windows=np.eye(x.shape[1], dtype=np.float32),
                                  baseline=baseline, target=target, chunk_size=chunk_size,
                                  average=False)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)


def occlusion(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    window: int = 3,
    stride: int = 1,
    baseline: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    chunk_size: int = 16,
    reduction: str = "mean",
) -> Attribution:
    r"""Occlusion over windows of tokens (Zeiler & Fergus, 2014).

    .. math:: a_{bt} = \frac{1}{|K_t|} \sum_{k \in K_t} f(x)_c - f(x_{w_k \to x'})_c

    with :math:`K_t` the windows (:func:`occlusion_windows`) that cover token t. Matches
    Captum 0.9 ``Occlusion`` with ``sliding_window_shapes=(window, E)`` and
    ``strides=(stride, E)``.

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      window: tokens per window (1..T).
      stride: tokens between window starts (1..window).
      baseline: what occluded tokens become (broadcastable to ``x``); ``None`` = zeros.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      chunk_size: windows evaluated at once.
      reduction: token reduction (default ``"mean"``).

    Returns:
      :class:`~baselines.Attribution` with ``(B, T, E)`` attributions (constant over E).

    Raises:
      ValueError / TypeError: bad window, stride, shapes, baseline, target, chunk_size
        or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    windows = occlusion_windows(x.shape[1], window, stride)
    attr = _ablation_attributions(f, x, (mask,), windows=windows, baseline=baseline,
                                  target=target, chunk_size=chunk_size, average=True)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)
