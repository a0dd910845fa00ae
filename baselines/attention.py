r"""Static attention explainers: head means, attention rollout, and a random baseline.

The head-mean explainers use the query-pooled attention logits of the SMaT
explainer (Fernandes et al, 2022, **Eq. 11**) with uniform head weights:

.. math::

  s_{bt} = \frac{1}{|\mathcal H|} \sum_{(l, h) \in \mathcal H} s^{l,h}_{bt},

over all heads of all layers or over the last layer's heads (the paper's static
explainers (4) and (5), §5). ``to_distribution`` of the result is the static
explanation; it equals the learned explainer at its uniform initialisation.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from smat.explainers.base import Saliency

__all__ = [
    "all_layers_attention",
    "attention_rollout",
    "last_layer_attention",
    "mean_attention",
    "random_saliency",
]


def _mask(mask: ArrayLike, *, batch: int, seq: int, where: str) -> jax.Array:
    mask = jnp.asarray(mask).astype(bool)
    if mask.shape != (batch, seq):
        raise ValueError(
            f"{where}: mask must have shape (B, T) = {(batch, seq)}; got {mask.shape}."
        )
    return mask


def mean_attention(
    pooled: Float[Array, "layers batch heads seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
    *,
    layer: int | None = None,
) -> Saliency:
    """Mean of pooled attention rows over heads (of all layers, or of one layer).

    Args:
      pooled: ``(L, B, H, T)`` query-pooled attention logits
        (``EncoderOutput.pooled_attention_logits`` or
        :func:`smat.explainers.pool_attention`); values at padded keys are ignored.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      layer: ``None`` for all layers, or a layer index (``-1`` = last).

    Returns:
      :class:`~smat.explainers.Saliency`, scores 0 at padded positions.

    Raises:
      ValueError: ``pooled`` not 4-D, mask shape mismatch or ``layer`` out of range.
    """
    pooled = jnp.asarray(pooled, dtype=jnp.float32)
    if pooled.ndim != 4:
        raise ValueError(f"mean_attention expects pooled (L, B, H, T); got {pooled.shape}.")
    num_layers, batch, _, seq = pooled.shape
    mask = _mask(mask, batch=batch, seq=seq, where="mean_attention")
    if layer is not None:
        if not -num_layers <= layer < num_layers:
            raise ValueError(
                f"layer={layer} is out of range for {num_layers} layers; use None or an int in "
                f"[{-num_layers}, {num_layers - 1}]."
            )
        pooled = pooled[layer][None]  # (1, B, H, T)
    rows = jnp.where(mask[None, :, None, :], pooled, 0.0)  # (L, B, H, T)
    scores = jnp.mean(rows, axis=(0, 2))  # (B, T)
    return Saliency(jnp.where(mask, scores, 0.0), mask)


def all_layers_attention(
    pooled: Float[Array, "layers batch heads seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
) -> Saliency:
    """Static explainer (4) of the paper: mean over all heads of all layers.

    Args:
      pooled: ``(L, B, H, T)`` query-pooled attention logits.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.

    Returns:
      :class:`~smat.explainers.Saliency` (see :func:`mean_attention`).
    """
    return mean_attention(pooled, mask, layer=None)


def last_layer_attention(
    pooled: Float[Array, "layers batch heads seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
) -> Saliency:
    """Static explainer (5) of the paper: mean over the heads of the last layer.

    Args:
      pooled: ``(L, B, H, T)`` query-pooled attention logits.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.

    Returns:
      :class:`~smat.explainers.Saliency` (see :func:`mean_attention`).
    """
    return mean_attention(pooled, mask, layer=-1)


def attention_rollout(
    attention: Float[Array, "layers batch heads seq seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
    *,
    kind: Literal["logits", "probs"] = "logits",
    query: Literal["cls", "mean"] = "cls",
) -> Saliency:
    r"""Attention rollout (Abnar & Zuidema, 2020, Eq. of §3 "attention rollout").

    Exact variant implemented here:

    1. per layer, attention probabilities over keys with padded keys removed
       (``kind="logits"``: masked softmax of the logits; ``"probs"``: given
       probabilities with padded-key columns zeroed and rows renormalised);
    2. :math:`\bar A_l = \operatorname{mean}_h A_{l,h}` (mean over heads);
    3. :math:`\hat A_l = (\bar A_l + I) / \text{rowsum}` (residual; equals
       :math:`0.5 \bar A_l + 0.5 I` because rows of :math:`\bar A_l` sum to 1);
    4. :math:`R = \hat A_L \hat A_{L-1} \cdots \hat A_1` (``lax.scan`` over layers);
    5. scores = row 0 of :math:`R` (``query="cls"``) or the mean of :math:`R`'s rows
       over real queries (``query="mean"``); 0 at padded positions.

    Args:
      attention: ``(L, B, H, T, T)`` attention logits (before the padding bias, as in
        ``EncoderOutput.attention_logits``) or probabilities.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      kind: ``"logits"`` or ``"probs"``.
      query: ``"cls"`` or ``"mean"``.

    Returns:
      :class:`~smat.explainers.Saliency`; the scores of each row are nonnegative and
      sum to 1 over real tokens.

    Raises:
      ValueError: bad shapes, ``kind`` or ``query``.
    """
    if kind not in ("logits", "probs"):
        raise ValueError(f"kind={kind!r} is invalid; valid choices are ['logits', 'probs'].")
    if query not in ("cls", "mean"):
        raise ValueError(f"query={query!r} is invalid; valid choices are ['cls', 'mean'].")
    attention = jnp.asarray(attention, dtype=jnp.float32)
    if attention.ndim != 5 or attention.shape[3] != attention.shape[4]:
        raise ValueError(f"attention_rollout expects (L, B, H, T, T); got {attention.shape}.")
    _, batch, _, seq, _ = attention.shape
    mask = _mask(mask, batch=batch, seq=seq, where="attention_rollout")
    keys = mask[None, :, None, None, :]  # (1, B, 1, 1, T)
    if kind == "logits":
        probs = jax.nn.softmax(jnp.where(keys, attention, -jnp.inf), axis=-1)
    else:
        probs = jnp.where(keys, attention, 0.0)
        total = jnp.sum(probs, axis=-1, keepdims=True)
        probs = probs / jnp.where(total > 0, total, 1.0)
    eye = jnp.eye(seq, dtype=jnp.float32)
    mixed = jnp.mean(probs, axis=2) + eye[None, None]  # (L, B, T, T)
    mixed = mixed / jnp.sum(mixed, axis=-1, keepdims=True)

    def layer_step(rollout, layer_attention):  # (B, T, T) each
        return jnp.einsum("bij,bjk->bik", layer_attention, rollout), None

    with jax.named_scope("attention_rollout"):
        start = jnp.broadcast_to(eye, (batch, seq, seq))
        rollout, _ = jax.lax.scan(layer_step, start, mixed)  # (B, T, T)
    if query == "cls":
        scores = rollout[:, 0, :]  # (B, T)
    else:
        count = jnp.maximum(jnp.sum(mask, -1, keepdims=True), 1).astype(jnp.float32)
        weights = mask.astype(jnp.float32) / count
        scores = jnp.einsum("bi,bik->bk", weights, rollout)  # (B, T)
    return Saliency(jnp.where(mask, scores, 0.0), mask)


def random_saliency(key: jax.Array, mask: Bool[Array, "batch seq"] | ArrayLike) -> Saliency:
    """Seeded random baseline: i.i.d. uniform [0, 1) scores at real positions.

    Args:
      key: a JAX PRNG key (same key, same scores).
      mask: ``(B, T)`` bool/int, nonzero at real tokens.

    Returns:
      :class:`~smat.explainers.Saliency`, scores 0 at padded positions.

    Raises:
      ValueError: if ``mask`` is not 2-D.
    """
    mask = jnp.asarray(mask).astype(bool)
    if mask.ndim != 2:
        raise ValueError(f"random_saliency expects mask (B, T); got shape {mask.shape}.")
    scores = jax.random.uniform(key, mask.shape, dtype=jnp.float32)
    return Saliency(jnp.where(mask, scores, 0.0), mask)
