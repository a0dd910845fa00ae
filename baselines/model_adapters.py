"""Bind smat text classifiers to the gradient explainers' ``f(x, mask)`` interface.

Gradient explainers attribute at one of two points (design §3):

- ``"word_embeddings"`` (default): ``x`` are the word embeddings ``(B, T, E)``,
  fed back through ``inputs_embeds`` (position / type embeddings and LayerNorm are
  part of ``f``);
- ``"embedding_output"``: ``x`` is the embedding block's output ``(B, T, D)`` (after
  LayerNorm and, for ELECTRA, the projection), fed through ``embedding_output`` —
  the point the original SMaT code used.

Only these adapters need ``smat.models`` (imported lazily); the pure cores take a user's
own ``f``. ``baselines`` is smat's static-explainer package, installed with smat and
returning its :class:`smat.explainers.Saliency`, not a library of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

__all__ = ["POINTS", "AttributionInputs", "attribution_inputs", "patch_attention_inputs",
           "patch_attribution_inputs", "token_baseline"]

POINTS = ("word_embeddings", "embedding_output")
"""Attribution points of :func:`attribution_inputs`."""

Point = Literal["word_embeddings", "embedding_output"]


class AttributionInputs(NamedTuple):
    """What the gradient explainers need: ``f``, the point ``x`` and the mask.

    Attributes:
      f: ``f(x, mask) -> logits (B, C)`` (a pure function of ``x``; params closed over).
      x: ``(B, T, E)`` word embeddings or ``(B, T, D)`` embedding output.
      mask: ``(B, T)`` bool, True at real tokens.
    """

    f: Callable[[jax.Array, jax.Array], jax.Array]
    x: Float[Array, "batch seq dim"]
    mask: Bool[Array, "batch seq"]


def _check_point(point: str) -> None:
    if point not in POINTS:
        raise ValueError(f"Unknown attribution point {point!r}; valid choices are {POINTS}.")


def _embed(graphdef, params, input_ids, mask, token_type_ids, point) -> jax.Array:
    from smat.models import functional

    out = functional.apply(
        graphdef, params, input_ids=input_ids, attention_mask=mask,
        token_type_ids=token_type_ids, attention="none",
    )
    encoder = out.encoder
    return encoder.inputs_embeds if point == "word_embeddings" else encoder.embedding_output


def attribution_inputs(
    graphdef: Any,
    params: Any,
    *,
    input_ids: ArrayLike,
    attention_mask: ArrayLike,
    token_type_ids: ArrayLike | None = None,
    point: Point = "word_embeddings",
) -> AttributionInputs:
    """Build ``f``, ``x`` and ``mask`` for a ``smat.models`` classifier.

    Args:
      graphdef: from ``smat.models.functional.split(model)``.
      params: the matching ``nnx.State`` (may be traced).
      input_ids: ``(B, T)`` int token ids.
      attention_mask: ``(B, T)`` bool/int, nonzero at real tokens.
      token_type_ids: ``(B, T)`` int segment ids, or ``None`` (zeros).
      point: ``"word_embeddings"`` or ``"embedding_output"``.

    Returns:
      :class:`AttributionInputs`; ``f`` runs the model in eval mode without attention
      outputs and returns its logits ``(B, C)``; it also takes ``k * B`` rows, the batch
      stacked k times (the segment ids repeat), as :func:`baselines.deeplift` needs.

    Raises:
      ValueError: unknown ``point`` (shape errors come from the model).

    Example:
      >>> f, x, mask = attribution_inputs(gd, params, input_ids=ids,
      ...                                 attention_mask=m)  # doctest: +SKIP
      >>> baselines.integrated_gradients(f, x, mask, n_steps=50)  # doctest: +SKIP
    """
    from smat.models import functional

    _check_point(point)
    mask = jnp.asarray(attention_mask).astype(bool)
    x = _embed(graphdef, params, input_ids, mask, token_type_ids, point)
    feed = "inputs_embeds" if point == "word_embeddings" else "embedding_output"

    segments = None if token_type_ids is None else jnp.asarray(token_type_ids)

    def f(z: jax.Array, m: jax.Array) -> jax.Array:
        types = segments
        if types is not None and z.shape[0] != types.shape[0]:
            # k copies of the batch stacked on axis 0 (DeepLift's [x; x'] rows)
            if z.shape[0] % types.shape[0]:
                raise ValueError(f"f takes the batch's {types.shape[0]} rows or a multiple "
                                 f"of them (their segment ids repeat); got {z.shape[0]}")
            types = jnp.tile(types, (z.shape[0] // types.shape[0], 1))
        out = functional.apply(
            graphdef, params, attention_mask=m, token_type_ids=types,
            attention="none", **{feed: z},
        )
        return out.logits

    return AttributionInputs(f, x, mask)


def patch_attribution_inputs(
    graphdef: Any,
    params: Any,
    *,
    pixel_values: ArrayLike,
    patch_mask: ArrayLike | None = None,
) -> AttributionInputs:
    """Build ``f``, ``x`` and ``mask`` for a ``smat.models`` ViT classifier: the attribution
    point is the patch embeddings (the patch projection's output, before [CLS] and the
    position embeddings are added), so every explainer gives one score per patch.

    Args:
      graphdef / params: a ViT ``SequenceClassifier`` (``smat.models.functional.split``).
      pixel_values: ``(B, C, H, W)`` images (HF's channel-first layout).
      patch_mask: ``(B, N)`` bool, True at the patches the model sees (default: all); the
        model's [CLS] token is always seen.

    Returns:
      :class:`AttributionInputs` with ``x`` ``(B, N, D)`` and ``mask`` ``(B, N)``; ``f``
      feeds ``x`` back through ``inputs_embeds`` and returns the logits ``(B, C)``.

    Raises:
      ValueError: a mask whose shape is not ``(B, N)`` (shape errors of the images come
        from the model).
    """
    from flax import nnx

    from smat.models import functional

    x = nnx.merge(graphdef, params).encoder.patchify(jnp.asarray(pixel_values))  # (B, N, D)
    mask = (jnp.ones(x.shape[:2], bool) if patch_mask is None
            else jnp.asarray(patch_mask).astype(bool))
    if mask.shape != x.shape[:2]:
        raise ValueError(f"patch_mask must have shape {x.shape[:2]} (batch, patches), got "
                         f"{mask.shape}")

    def f(z: jax.Array, m: jax.Array) -> jax.Array:
        seen = jnp.concatenate([jnp.ones((m.shape[0], 1), bool), m.astype(bool)], axis=1)
        return functional.apply(graphdef, params, inputs_embeds=z, attention_mask=seen,
                                attention="none").logits

    return AttributionInputs(f, x, mask)


def patch_attention_inputs(
    graphdef: Any,
    params: Any,
    *,
    pixel_values: ArrayLike,
    query_pooling: Literal["mean", "cls"] = "mean",
) -> tuple[Float[Array, "layers batch heads patches"], Bool[Array, "batch patches"]]:
    """A ViT classifier's query-pooled attention rows over its patches, for the attention
    explainers (static or learned): ``(pooled (L, B, H, N), mask (B, N))`` with the [CLS]
    key left out, so each explainer gives one score per patch.

    Args:
      graphdef / params: a ViT ``SequenceClassifier`` (``smat.models.functional.split``).
      pixel_values: ``(B, C, H, W)`` images.
      query_pooling: how the query rows are pooled ("mean" over all tokens, or the [CLS]
        row).
    """
    from smat.models import functional

    out = functional.apply(graphdef, params, pixel_values=jnp.asarray(pixel_values),
                           attention="pooled", query_pooling=query_pooling)
    pooled = out.encoder.pooled_attention_logits[..., 1:]  # drop the [CLS] key
    return pooled, jnp.ones(pooled.shape[1:2] + pooled.shape[3:], bool)


def token_baseline(
    graphdef: Any,
    params: Any,
    *,
    input_ids: ArrayLike,
    attention_mask: ArrayLike,
    token_id: int,
    token_type_ids: ArrayLike | None = None,
    keep: ArrayLike | None = None,
    point: Point = "word_embeddings",
) -> Float[Array, "batch seq dim"]:
    """IG baseline made of a reference token (PAD or [MASK]) at the attribution point.

    Every position not in ``keep`` is replaced by ``token_id``; the baseline is the
    attribution-point value of those ids (at ``"word_embeddings"`` with ``keep=None``
    it is just the token's embedding at every position).

    Args:
      graphdef: from ``smat.models.functional.split(model)``.
      params: the matching ``nnx.State``.
      input_ids: ``(B, T)`` int token ids.
      attention_mask: ``(B, T)`` bool/int, nonzero at real tokens.
      token_id: the reference token (e.g. ``tokenizer.pad_token_id`` or ``mask_token_id``).
      token_type_ids: ``(B, T)`` int segment ids, or ``None``.
      keep: optional ``(B, T)`` bool; True keeps the original token (e.g. the
        ``special_tokens_mask`` to keep [CLS]/[SEP], as in Captum's BERT tutorial).
      point: ``"word_embeddings"`` or ``"embedding_output"``.

    Returns:
      ``(B, T, E)`` (or ``(B, T, D)``) baseline for :func:`baselines.integrated_gradients`.

    Raises:
      ValueError: unknown ``point`` or ``keep`` of the wrong shape.
    """
    _check_point(point)
    input_ids = jnp.asarray(input_ids)
    mask = jnp.asarray(attention_mask).astype(bool)
    if keep is None:
        keep = jnp.zeros(input_ids.shape, bool)
    keep = jnp.asarray(keep).astype(bool)
    if keep.shape != input_ids.shape:
        raise ValueError(
            f"keep must have the shape of input_ids {input_ids.shape}; got {keep.shape}."
        )
    ids = jnp.where(keep, input_ids, jnp.asarray(token_id, input_ids.dtype))  # (B, T)
    return _embed(graphdef, params, ids, mask, token_type_ids, point)
