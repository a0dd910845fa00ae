"""ERASER comprehensiveness and sufficiency (AOPC over top-k% bins), batched in JAX.

DeYoung et al. (2020) measure how much a classifier's confidence in its
prediction drops when the highest-scored tokens are removed
(comprehensiveness) and when *only* them are kept (sufficiency), averaged over
bins of k% (the "area over the perturbation curve", AOPC). Every perturbed input
of every bin is built by replacing token ids inside one jitted computation and
scored by the model in a single batched call (or a few, see
``variants_per_call``) — never by decoding and re-tokenizing text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.tree_util import Partial
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from smat.data.batching import length_sorted_batches, padded_length
from smat.evaluation._common import check_batch_seq, masked_mean, top_k_mask

__all__ = [
    "DEFAULT_BINS",
    "FaithfulnessResult",
    "batched_comprehensiveness_sufficiency",
    "comprehensiveness_sufficiency",
    "num_tokens_per_bin",
]

DEFAULT_BINS: tuple[float, ...] = (0.01, 0.05, 0.10, 0.20, 0.50)
"""ERASER's AOPC bins: fractions of each example's maskable tokens (DeYoung et al., 2020)."""


class FaithfulnessResult(NamedTuple):
    """Comprehensiveness and sufficiency of one explainer on one batch.

    Attributes:
        comprehensiveness: ``(batch,)`` AOPC comprehensiveness per example
            (higher is more faithful).
        sufficiency: ``(batch,)`` AOPC sufficiency per example (lower is better).
        comprehensiveness_per_bin: ``(bins, batch)`` value at each bin.
        sufficiency_per_bin: ``(bins, batch)`` value at each bin.
        num_selected: ``(bins, batch)`` int32, tokens removed (comprehensiveness)
            or kept (sufficiency) at each bin.
        full_probability: ``(batch,)`` probability of ``target`` on the full input.
        target: ``(batch,)`` int32, class whose probability is tracked.
        valid: ``(batch,)`` bool, examples with at least one maskable token
            (others have nothing to remove; their values are 0.0).
        mean_comprehensiveness: scalar mean over valid examples.
        mean_sufficiency: scalar mean over valid examples.
    """

    comprehensiveness: Float[Array, " batch"]
    sufficiency: Float[Array, " batch"]
    comprehensiveness_per_bin: Float[Array, "bins batch"]
    sufficiency_per_bin: Float[Array, "bins batch"]
    num_selected: Int[Array, "bins batch"]
    full_probability: Float[Array, " batch"]
    target: Int[Array, " batch"]
    valid: Bool[Array, " batch"]
    mean_comprehensiveness: Float[Array, ""]
    mean_sufficiency: Float[Array, ""]


def _as_fraction(q: float) -> Fraction:
    return Fraction(q).limit_denominator(1_000_000)


def num_tokens_per_bin(
    num_maskable: Int[ArrayLike, " batch"], *, bins: Sequence[float] = DEFAULT_BINS
) -> Int[Array, "bins batch"]:
    """Number of top tokens selected at each bin: :math:`k = \\max(1, \\lceil q\\,n \\rceil)`.

    ``q`` is the bin fraction and ``n`` the example's number of maskable tokens
    (non-special, non-padded). The ceiling makes every bin select at least one
    token, as ERASER does; it is computed exactly in integer arithmetic from
    ``q`` as a fraction (so ``0.1 * 30`` gives 3, not 4). ``k`` never exceeds
    ``n``, and is 0 when ``n = 0``.

    Args:
        num_maskable: ``(batch,)`` int, maskable tokens per example.
        bins: fractions in (0, 1].

    Returns:
        ``(bins, batch)`` int32.

    Raises:
        ValueError: if a bin lies outside (0, 1] or ``bins`` is empty.

    Example:
        >>> num_tokens_per_bin(jnp.array([30, 7, 0]), bins=(0.1, 0.5)).tolist()
        [[3, 1, 0], [15, 4, 0]]
    """
    bins = _check_bins(bins)
    n = jnp.asarray(num_maskable, jnp.int32)
    rows = []
    for q in bins:
        f = _as_fraction(q)
        k = (f.numerator * n + (f.denominator - 1)) // f.denominator  # ceil(q * n), exact
        rows.append(jnp.minimum(jnp.maximum(k, 1), n))
    return jnp.stack(rows)  # (K, B)


def _check_bins(bins: Sequence[float]) -> tuple[float, ...]:
    bins = tuple(float(q) for q in bins)
    if not bins:
        raise ValueError("bins must contain at least one fraction, e.g. (0.01, 0.05, 0.1, 0.2, "
                         "0.5).")
    bad = [q for q in bins if not 0.0 < q <= 1.0]
    if bad:
        raise ValueError(f"bins are fractions of the maskable tokens and must lie in (0, 1]; got "
                         f"{bad} in {bins}.")
    return bins


@functools.partial(
    jax.jit, static_argnames=("bins", "mask_attention", "variants_per_call", "default_target"))
def _faithfulness(predict_proba, input_ids, scores, attention_mask, special_tokens_mask,
                  token_type_ids, replacement_id, target, *, bins, mask_attention,
                  variants_per_call, default_target):
    batch, seq = input_ids.shape
    maskable = jnp.logical_and(attention_mask.astype(bool), ~special_tokens_mask.astype(bool))
    n = jnp.sum(maskable, axis=1)  # (B,)
    k = num_tokens_per_bin(n, bins=bins)  # (K, B)
    selected = jax.vmap(lambda kk: top_k_mask(scores, maskable, kk))(k)  # (K, B, T)
    removed_comp = selected
    removed_suff = jnp.logical_and(maskable[None], ~selected)  # everything but the top-k
    removed = jnp.concatenate(
        [jnp.zeros((1, batch, seq), bool), removed_comp, removed_suff])  # (V, B, T), V = 1+2K
    ids = jnp.where(removed, jnp.asarray(replacement_id, input_ids.dtype), input_ids[None])
    att = jnp.broadcast_to(attention_mask[None], removed.shape)
    if mask_attention:
        att = jnp.where(removed, jnp.zeros((), att.dtype), att)
    tt = jnp.broadcast_to(token_type_ids[None], removed.shape)
    num_variants = removed.shape[0]

    per_call = num_variants if variants_per_call is None else min(variants_per_call,
                                                                  num_variants)
    num_calls = -(-num_variants // per_call)
    pad = num_calls * per_call - num_variants

    def chunked(x):  # (V, B, T) -> (calls, per_call * B, T); padding repeats variant 0
        x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (pad, batch, seq))]) if pad else x
        return x.reshape(num_calls, per_call * batch, seq)

    def call(args):
        probs = predict_proba(*args)
        if probs.ndim != 2 or probs.shape[0] != args[0].shape[0]:
            raise ValueError(f"predict_proba must return probabilities of shape (batch, "
                             f"classes) = ({args[0].shape[0]}, C); got {probs.shape}.")
        return probs

    xs = (chunked(ids), chunked(att), chunked(tt))
    if num_calls == 1:
        probs = call(tuple(x[0] for x in xs))[None]
    else:
        probs = lax.map(call, xs)  # (calls, per_call * B, C)
    probs = probs.reshape(num_calls * per_call, batch, -1)[:num_variants]  # (V, B, C)

    if default_target:
        target = jnp.argmax(probs[0], axis=-1)
    target = jnp.asarray(target, jnp.int32)
    p = jnp.take_along_axis(probs, jnp.broadcast_to(target[None, :, None],
                                                    (num_variants, batch, 1)), axis=-1)[..., 0]
    num_bins = len(bins)
    full = p[0]  # (B,)
    valid = n > 0
    comp_bins = jnp.where(valid[None], full[None] - p[1:1 + num_bins], 0.0)  # (K, B)
    suff_bins = jnp.where(valid[None], full[None] - p[1 + num_bins:], 0.0)  # (K, B)
    comp = jnp.mean(comp_bins, axis=0)
    suff = jnp.mean(suff_bins, axis=0)
    return FaithfulnessResult(
        comprehensiveness=comp, sufficiency=suff, comprehensiveness_per_bin=comp_bins,
        sufficiency_per_bin=suff_bins, num_selected=k, full_probability=full, target=target,
        valid=valid, mean_comprehensiveness=masked_mean(comp, valid),
        mean_sufficiency=masked_mean(suff, valid))


def comprehensiveness_sufficiency(
    predict_proba: Callable[..., Float[Array, "batch classes"]],
    input_ids: Int[ArrayLike, "batch seq"],
    scores: Float[ArrayLike, "batch seq"],
    *,
    attention_mask: Int[ArrayLike, "batch seq"],
    special_tokens_mask: Bool[ArrayLike, "batch seq"],
    replacement_id: int | Int[ArrayLike, ""],
    token_type_ids: Int[ArrayLike, "batch seq"] | None = None,
    target: Int[ArrayLike, " batch"] | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
    mask_attention: bool = False,
    variants_per_call: int | None = None,
) -> FaithfulnessResult:
    """ERASER comprehensiveness and sufficiency of token scores, in one jitted computation.

    For each bin fraction :math:`q \\in K` let :math:`r_{q}` be the
    :math:`k = \\max(1, \\lceil q n \\rceil)` highest-scored maskable tokens of an
    example (:func:`num_tokens_per_bin`; ties broken by position). With
    :math:`p(y|\\cdot)` the probability of the target class,

    .. math::
        \\mathrm{comp} = \\frac{1}{|K|} \\sum_{q \\in K} p(y|x) - p(y|x \\setminus r_q),
        \\qquad
        \\mathrm{suff} = \\frac{1}{|K|} \\sum_{q \\in K} p(y|x) - p(y|r_q)

    (DeYoung et al., 2020, Eqs. 1-3 with AOPC over bins; Oxford thesis,
    Definitions 2.1-2.2). Removing a token replaces its id by
    ``replacement_id`` (the tokenizer's [MASK] or PAD id) at the same position;
    special tokens ([CLS], [SEP]) and padding are never removed and always kept,
    and ``n`` counts only the maskable (non-special, non-padded) tokens.

    All ``1 + 2|K|`` input variants (full, each comprehensiveness bin, each
    sufficiency bin) are built by ``jnp.where`` on the ids and passed to
    ``predict_proba`` as one flattened batch of ``(1 + 2|K|) * batch`` rows, or
    in ``lax.map`` chunks of ``variants_per_call`` variants to bound memory.

    Note:
        ERASER *deletes* tokens (the text gets shorter). Here tokens are
        replaced in place because smat never re-tokenizes: for sufficiency every
        maskable token outside the top-k becomes ``replacement_id``, so the
        model sees the kept tokens at their original positions among
        [MASK]/PAD tokens. With ``mask_attention=True`` the replaced positions
        also get ``attention_mask = 0`` — closest to deletion for models whose
        attention masks padding (positions are still not shifted).

    Args:
        predict_proba: pure function ``(input_ids, attention_mask,
            token_type_ids) -> probs (rows, C)`` of the model being explained.
            A plain function is traced once per function object; wrap it as
            ``jax.tree_util.Partial(fn, params)`` to pass parameters as traced
            arguments (no recompilation when they change).
        input_ids: ``(batch, seq)`` int token ids.
        scores: ``(batch, seq)`` float saliency (higher = more important);
            scores of special / padded tokens are ignored.
        attention_mask: ``(batch, seq)`` int/bool, 1 for real tokens.
        special_tokens_mask: ``(batch, seq)`` bool, True for [CLS]/[SEP]/pad.
        replacement_id: id that replaces removed tokens ([MASK] or PAD id).
        token_type_ids: ``(batch, seq)`` int; zeros when ``None``.
        target: ``(batch,)`` int class to track; ``None`` = the model's
            prediction on the full input (ERASER's choice).
        bins: fractions in (0, 1]; default ERASER's (0.01, 0.05, 0.1, 0.2, 0.5).
        mask_attention: also zero the attention mask of replaced tokens.
        variants_per_call: number of the ``1 + 2|K|`` input variants evaluated
            per model call; ``None`` = all in one call.

    Returns:
        :class:`FaithfulnessResult` with per-example, per-bin and mean values.

    Raises:
        ValueError: mismatched shapes, bins outside (0, 1], a non-positive
            ``variants_per_call``, or ``predict_proba`` output not ``(rows, C)``.
        TypeError: if ``predict_proba`` is not callable or ``input_ids`` is not integer.

    Example:
        >>> w = jnp.array([0.0, 0.0, 2.0, -1.0, 0.5])  # per-token-id logit of class 1
        >>> def predict_proba(ids, mask, tt):
        ...     z = jnp.sum(w[ids] * mask, axis=1)
        ...     return jnp.stack([1 - jax.nn.sigmoid(z), jax.nn.sigmoid(z)], axis=1)
        >>> ids = jnp.array([[0, 2, 4, 3, 1]])  # [CLS] tok2 tok4 tok3 [SEP]
        >>> special = jnp.array([[True, False, False, False, True]])
        >>> r = comprehensiveness_sufficiency(
        ...     predict_proba, ids, w[ids], attention_mask=jnp.ones((1, 5)),
        ...     special_tokens_mask=special, replacement_id=0, bins=(0.3,))
        >>> int(r.num_selected[0, 0]), round(float(r.comprehensiveness[0]), 4)
        (1, 0.44)
    """
    if not callable(predict_proba):
        raise TypeError(f"predict_proba must be callable; got {type(predict_proba).__name__}.")
    check_batch_seq(input_ids=input_ids, scores=scores, attention_mask=attention_mask,
                    special_tokens_mask=special_tokens_mask)
    ids = jnp.asarray(input_ids)
    if not jnp.issubdtype(ids.dtype, jnp.integer):
        raise TypeError(f"input_ids must be integer token ids; got dtype {ids.dtype}.")
    if token_type_ids is None:
        token_type_ids = jnp.zeros_like(ids)
    check_batch_seq(input_ids=ids, token_type_ids=token_type_ids)
    if variants_per_call is not None and variants_per_call < 1:
        raise ValueError(f"variants_per_call must be a positive int or None; got "
                         f"{variants_per_call}.")
    if target is not None and jnp.shape(target) != ids.shape[:1]:
        raise ValueError(f"target must have shape (batch,) = {ids.shape[:1]}; got "
                         f"{jnp.shape(target)}.")
    if not isinstance(predict_proba, Partial):
        predict_proba = Partial(predict_proba)
    return _faithfulness(
        predict_proba, ids, jnp.asarray(scores, jnp.result_type(float)),
        jnp.asarray(attention_mask), jnp.asarray(special_tokens_mask),
        jnp.asarray(token_type_ids), replacement_id,
        jnp.zeros(ids.shape[:1], jnp.int32) if target is None else target,
        bins=_check_bins(bins), mask_attention=mask_attention,
        variants_per_call=variants_per_call, default_target=target is None)


def batched_comprehensiveness_sufficiency(
    predict_proba: Callable[..., Float[Array, "batch classes"]],
    input_ids: Int[ArrayLike, "n seq"],
    scores: Float[ArrayLike, "n seq"],
    *,
    attention_mask: Int[ArrayLike, "n seq"],
    special_tokens_mask: Bool[ArrayLike, "n seq"],
    replacement_id: int,
    token_type_ids: Int[ArrayLike, "n seq"] | None = None,
    target: Int[ArrayLike, " n"] | None = None,
    bins: Sequence[float] = DEFAULT_BINS,
    mask_attention: bool = False,
    batch_size: int = 64,
    length_multiple: int = 16,
) -> FaithfulnessResult:
    """:func:`comprehensiveness_sufficiency` of a whole data set, in length-sorted batches.

    Rows are grouped by real length (:func:`smat.data.length_sorted_batches`) and each
    batch is cut to its longest row rounded up to ``length_multiple``
    (:func:`smat.data.padded_length`), so the model does not run on columns that are
    padding in every row of the batch. Only padding is cut, so every value equals that of
    one unbatched call up to float rounding; on data padded to a fixed length with varied
    real lengths most of the padding work is saved. Each batch is one jitted call
    (``batch_size`` rows, at most ``ceil(T / length_multiple)`` compiled shapes).

    The arguments ``predict_proba``, ``input_ids``, ``scores``, ``attention_mask``,
    ``special_tokens_mask``, ``replacement_id``, ``token_type_ids``, ``target``, ``bins``
    and ``mask_attention`` are as for :func:`comprehensiveness_sufficiency`, over all N rows.

    Args:
        batch_size: rows per jitted call (fewer when N is smaller).
        length_multiple: batches are cut to a multiple of this many columns.

    Returns:
        :class:`FaithfulnessResult` over the N rows, in their input order (numpy arrays).
    """
    ids = np.asarray(input_ids)
    check_batch_seq(input_ids=ids, scores=scores, attention_mask=attention_mask,
                    special_tokens_mask=special_tokens_mask)
    columns = {"input_ids": ids, "scores": np.asarray(scores),
               "attention_mask": np.asarray(attention_mask),
               "special_tokens_mask": np.asarray(special_tokens_mask),
               "token_type_ids": (np.zeros_like(ids) if token_type_ids is None
                                  else np.asarray(token_type_ids))}
    parts, order = [], []
    for rows, count in length_sorted_batches(columns["attention_mask"],
                                             batch_size=min(batch_size, len(ids))):
        length = padded_length(columns["attention_mask"][rows], length_multiple)
        cut = {name: value[rows, :length] for name, value in columns.items()}
        parts.append((count, comprehensiveness_sufficiency(
            predict_proba, cut.pop("input_ids"), cut.pop("scores"), **cut,
            replacement_id=replacement_id, bins=bins, mask_attention=mask_attention,
            target=None if target is None else np.asarray(target)[rows])))
        order.append(rows[:count])
    inverse = np.argsort(np.concatenate(order))

    def joined(field: str) -> np.ndarray:  # concatenated over batches, back in input order
        values = np.concatenate([np.asarray(getattr(r, field))[..., :count]
                                 for count, r in parts], axis=-1)
        return values[..., inverse]

    per_row = {field: joined(field) for field in FaithfulnessResult._fields
               if not field.startswith("mean_")}
    valid = per_row["valid"]
    return FaithfulnessResult(
        **per_row,
        mean_comprehensiveness=np.asarray(masked_mean(per_row["comprehensiveness"], valid)),
        mean_sufficiency=np.asarray(masked_mean(per_row["sufficiency"], valid)))
