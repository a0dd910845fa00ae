"""Plausibility: agreement of saliency with human rationales or synthetic ground truth.

Soft metrics (per-example ROC-AUC, average precision) compare the scores with a
binary rationale mask; hard metrics (token F1, IOU F1) first select the top-k
tokens (DeYoung et al., 2020, §4); GTOverlap and MeanRank (Oxford thesis,
§2.2.3.1) score explanations against known ground-truth features.

Every function takes ``(batch, n)`` arrays over *units* — sub-word tokens, or
words after :func:`word_level_scores` (a word's score is the sum of its
sub-word scores, design §6) — plus a ``mask`` of the units to consider. All are
batched and jitted; pairwise metrics are exact O(n^2) per example, chunked over
examples by ``batch_size``. Examples where a metric is undefined are excluded
and counted (:class:`~smat.evaluation.PerInstance` ``valid``), never NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from smat.data.rationales import word_scores
from smat.evaluation._common import (
    PerInstance,
    check_batch_seq,
    instance_map,
    masked_mean,
    top_k_mask,
)
from smat.evaluation.statistics import mean_with_ci

__all__ = [
    "F1Result",
    "MeanRankResult",
    "average_precision",
    "ground_truth_metrics",
    "ground_truth_overlap",
    "iou_f1",
    "mean_rank",
    "roc_auc",
    "token_f1",
    "word_level_scores",
]


class F1Result(NamedTuple):
    """Precision / recall / F1 from per-example counts (tokens or spans).

    Attributes:
        true_positives: ``(batch,)`` matched predicted units (tokens or spans).
        num_predicted: ``(batch,)`` predicted units.
        num_gold: ``(batch,)`` gold units.
        f1: ``(batch,)`` per-example F1 (0.0 when precision + recall = 0).
        micro_f1: scalar F1 of the summed counts over the batch (ERASER "micro").
        macro_f1: scalar mean of per-example F1 over examples with gold units.
        precision: scalar micro precision.
        recall: scalar micro recall.
    """

    true_positives: Int[Array, " batch"]
    num_predicted: Int[Array, " batch"]
    num_gold: Int[Array, " batch"]
    f1: Float[Array, " batch"]
    micro_f1: Float[Array, ""]
    macro_f1: Float[Array, ""]
    precision: Float[Array, ""]
    recall: Float[Array, ""]


class MeanRankResult(NamedTuple):
    """Result of :func:`mean_rank`.

    Attributes:
        rank: ``(batch,)`` int, smallest ``r`` whose top-``r`` contains all gold units.
        fraction: ``(batch,)`` ``rank / n`` (MeanRankPercentage's per-example term).
        valid: ``(batch,)`` bool, examples with at least one gold unit.
        mean_rank: scalar mean of ``rank`` over valid examples.
        mean_fraction: scalar mean of ``fraction`` over valid examples.
    """

    rank: Int[Array, " batch"]
    fraction: Float[Array, " batch"]
    valid: Bool[Array, " batch"]
    mean_rank: Float[Array, ""]
    mean_fraction: Float[Array, ""]


def _prepare(scores, gold, mask):
    check_batch_seq(scores=scores, gold=gold, mask=mask)
    m = jnp.asarray(mask).astype(bool)
    g = jnp.logical_and(jnp.asarray(gold).astype(bool), m)
    return jnp.asarray(scores, jnp.result_type(float)), g, m


def _auc_1(s, g, m):
    pos = g
    neg = jnp.logical_and(m, ~g)
    pair = jnp.logical_and(pos[:, None], neg[None, :])  # (n, n): positive i, negative j
    wins = jnp.where(s[:, None] > s[None, :], 1.0, jnp.where(s[:, None] == s[None, :], 0.5, 0.0))
    total = jnp.sum(pos) * jnp.sum(neg)
    won = jnp.sum(jnp.where(pair, wins, 0.0))
    return won / jnp.maximum(total, 1).astype(won.dtype)


def _ap_1(s, g, m):
    at_least = jnp.logical_and(m[None, :], s[None, :] >= s[:, None])  # (n, n): j ranked >= i
    count = jnp.sum(at_least, axis=1)  # predicted positives at threshold s_i
    hits = jnp.sum(jnp.logical_and(at_least, g[None, :]), axis=1)  # true positives there
    precision = hits / jnp.maximum(count, 1)
    return (jnp.sum(jnp.where(g, precision, 0.0)) /
            jnp.maximum(jnp.sum(g), 1).astype(precision.dtype))


@functools.partial(jax.jit, static_argnames=("batch_size",))
def roc_auc(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
    *,
    batch_size: int | None = 128,
) -> PerInstance:
    """Per-example ROC-AUC of scores against a binary rationale mask.

    .. math:: \\mathrm{AUC} = \\frac{1}{|P||N|} \\sum_{i \\in P} \\sum_{j \\in N}
              \\left([s_i > s_j] + \\tfrac12 [s_i = s_j]\\right)

    (the Mann-Whitney form, equal to ``sklearn.metrics.roc_auc_score`` with
    ties). The SMaT paper reports its average over examples (Fernandes et al.,
    2022, Tables 2, 4 and 6). Examples whose valid units are all positive or
    all negative have no AUC: ``valid=False``, counted by
    ``PerInstance.num_excluded()``.

    Args:
        scores: ``(batch, n)`` float saliency.
        gold: ``(batch, n)`` bool rationale mask (only ``mask``-ed units count).
        mask: ``(batch, n)`` bool, units to evaluate (non-padded, non-special).
        batch_size: examples per vectorised chunk; ``None`` = all at once.

    Returns:
        :class:`~smat.evaluation.PerInstance`; ``.mean()`` is the averaged AUC.

    Raises:
        ValueError: if the shapes are not one common ``(batch, n)``.

    Example:
        >>> r = roc_auc(jnp.array([[0.9, 0.1, 0.5, 0.5]]),
        ...             jnp.array([[True, False, True, False]]), jnp.ones((1, 4), bool))
        >>> float(r.values[0])
        0.875
    """
    s, g, m = _prepare(scores, gold, mask)
    num_pos = jnp.sum(g, axis=1)
    valid = jnp.logical_and(num_pos > 0, num_pos < jnp.sum(m, axis=1))
    values = instance_map(_auc_1, (s, g, m), batch_size=batch_size)
    return PerInstance(values=jnp.where(valid, values, 0.0), valid=valid)


@functools.partial(jax.jit, static_argnames=("batch_size",))
def average_precision(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
    *,
    batch_size: int | None = 128,
) -> PerInstance:
    """Per-example average precision (area under the step precision-recall curve).

    .. math:: \\mathrm{AP} = \\sum_t (R_t - R_{t-1})\\, P_t
              = \\frac{1}{|P|} \\sum_{i \\in P} \\mathrm{Prec}(s \\ge s_i)

    over the distinct score thresholds, as ``sklearn.metrics.average_precision_score``
    (no interpolation; tied scores enter at one threshold).

    Note:
        ERASER's AUPRC integrates the precision-recall curve with the trapezoid
        rule (``sklearn.metrics.auc``), which is optimistic; this is the step
        definition requested by design §6.

    Args:
        scores: ``(batch, n)`` float saliency.
        gold: ``(batch, n)`` bool rationale mask.
        mask: ``(batch, n)`` bool, units to evaluate.
        batch_size: examples per vectorised chunk; ``None`` = all at once.

    Returns:
        :class:`~smat.evaluation.PerInstance`; examples without a positive unit
        are excluded (``valid=False``).

    Raises:
        ValueError: if the shapes are not one common ``(batch, n)``.

    Example:
        >>> r = average_precision(jnp.array([[0.9, 0.8, 0.1]]),
        ...                       jnp.array([[True, False, True]]), jnp.ones((1, 3), bool))
        >>> round(float(r.values[0]), 4)
        0.8333
    """
    s, g, m = _prepare(scores, gold, mask)
    valid = jnp.sum(g, axis=1) > 0
    values = instance_map(_ap_1, (s, g, m), batch_size=batch_size)
    return PerInstance(values=jnp.where(valid, values, 0.0), valid=valid)


def _f1(tp, num_pred, num_gold):
    tp = tp.astype(jnp.float32)
    precision = tp / jnp.maximum(num_pred, 1).astype(tp.dtype)
    recall = tp / jnp.maximum(num_gold, 1).astype(tp.dtype)
    total = precision + recall
    return precision, recall, jnp.where(total > 0, 2 * precision * recall /
                                        jnp.where(total > 0, total, 1.0), 0.0)


def _f1_result(tp, num_pred, num_gold):
    tp, num_pred, num_gold = (x.astype(jnp.int32) for x in (tp, num_pred, num_gold))
    _, _, f1 = _f1(tp, num_pred, num_gold)
    precision, recall, micro = _f1(jnp.sum(tp), jnp.sum(num_pred), jnp.sum(num_gold))
    return F1Result(true_positives=tp, num_predicted=num_pred, num_gold=num_gold, f1=f1,
                    micro_f1=micro, macro_f1=masked_mean(f1, num_gold > 0),
                    precision=precision, recall=recall)


def _top_k(scores, mask, k):
    k = jnp.broadcast_to(jnp.asarray(k, jnp.int32), scores.shape[:1])
    return top_k_mask(scores, mask, jnp.maximum(k, 0))


@jax.jit
def token_f1(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
    *,
    k: int | Int[ArrayLike, " batch"],
) -> F1Result:
    """Token-level precision / recall / F1 of the top-k units against the rationale.

    The predicted rationale of an example is its ``k`` highest-scored valid
    units (all of them if fewer; ties by position). Per example
    :math:`P = |\\hat r \\cap r| / |\\hat r|`, :math:`R = |\\hat r \\cap r| / |r|`,
    :math:`F_1 = 2PR / (P + R)` (DeYoung et al., 2020, §4 "token-level F1").
    ERASER derives hard rationales from soft scores with ``k`` set to the
    average human rationale length of the data set; pass that, or a per-example
    ``k`` (e.g. each example's gold length).

    Args:
        scores: ``(batch, n)`` float saliency.
        gold: ``(batch, n)`` bool rationale mask.
        mask: ``(batch, n)`` bool, units to evaluate.
        k: top units to select, an int or a ``(batch,)`` int array (>= 0).

    Returns:
        :class:`F1Result`: per-example counts and F1; micro (summed counts) and
        macro (mean over examples with a gold unit) F1.

    Raises:
        ValueError: if the shapes are not one common ``(batch, n)``.

    Example:
        >>> r = token_f1(jnp.array([[0.9, 0.8, 0.1, 0.0]]),
        ...              jnp.array([[True, False, True, False]]), jnp.ones((1, 4), bool), k=2)
        >>> float(r.f1[0])
        0.5
    """
    s, g, m = _prepare(scores, gold, mask)
    pred = _top_k(s, m, k)
    return _f1_result(jnp.sum(jnp.logical_and(pred, g), axis=1), jnp.sum(pred, axis=1),
                      jnp.sum(g, axis=1))


def _spans_1(x):
    # Maximal runs of True in a (n,) bool vector as [start, end) pairs padded to n entries.
    n = x.shape[0]
    prev = jnp.concatenate([jnp.zeros((1,), bool), x[:-1]])
    nxt = jnp.concatenate([x[1:], jnp.zeros((1,), bool)])
    starts = jnp.nonzero(jnp.logical_and(x, ~prev), size=n, fill_value=0)[0]
    ends = jnp.nonzero(jnp.logical_and(x, ~nxt), size=n, fill_value=0)[0] + 1
    count = jnp.sum(jnp.logical_and(x, ~prev))
    return starts, ends, jnp.arange(n) < count


def _iou_counts_1(pred, gold, threshold):
    ps, pe, pv = _spans_1(pred)
    gs, ge, gv = _spans_1(gold)
    inter = jnp.maximum(0, jnp.minimum(pe[:, None], ge[None, :]) -
                        jnp.maximum(ps[:, None], gs[None, :]))  # (n_pred, n_gold)
    union = (pe - ps)[:, None] + (ge - gs)[None, :] - inter
    iou = jnp.where(jnp.logical_and(pv[:, None], gv[None, :]), inter / jnp.maximum(union, 1), 0.0)
    best = jnp.max(iou, axis=1)  # (n_pred,)
    tp = jnp.sum(jnp.logical_and(pv, best >= threshold))
    return tp, jnp.sum(pv), jnp.sum(gv)


@functools.partial(jax.jit, static_argnames=("threshold", "batch_size"))
def iou_f1(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
    *,
    k: int | Int[ArrayLike, " batch"],
    threshold: float = 0.5,
    batch_size: int | None = 128,
) -> F1Result:
    """ERASER IOU F1: span-level F1 where a predicted span matches at IOU >= threshold.

    Spans are the maximal runs of consecutive selected units: predicted spans
    from the top-k mask (as :func:`token_f1`), gold spans from ``gold``. A
    predicted span :math:`p` is a true positive when
    :math:`\\max_{g} |p \\cap g| / |p \\cup g| \\ge` ``threshold`` over the
    gold spans; precision = TP / #predicted spans, recall = TP / #gold spans
    (DeYoung et al., 2020, §4 "IOU F1", threshold 0.5; this follows the
    released scorer's partial-match count).

    Args:
        scores: ``(batch, n)`` float saliency.
        gold: ``(batch, n)`` bool rationale mask; its runs are the gold spans.
        mask: ``(batch, n)`` bool, units to evaluate (units outside the mask
            never belong to a span and therefore split spans).
        k: top units to select, an int or a ``(batch,)`` int array (>= 0).
        threshold: IOU needed for a match, in (0, 1].
        batch_size: examples per vectorised chunk; ``None`` = all at once.

    Returns:
        :class:`F1Result` over span counts.

    Raises:
        ValueError: mismatched shapes or ``threshold`` outside (0, 1].

    Example:
        >>> r = iou_f1(jnp.array([[0.9, 0.8, 0.7, 0.0, 0.0]]),
        ...            jnp.array([[True, True, False, False, False]]), jnp.ones((1, 5), bool),
        ...            k=3)
        >>> float(r.micro_f1)  # IOU of [0, 3) with [0, 2) is 2/3
        1.0
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1]; got {threshold}.")
    s, g, m = _prepare(scores, gold, mask)
    pred = _top_k(s, m, k)
    tp, num_pred, num_gold = instance_map(
        lambda p, gg: _iou_counts_1(p, gg, threshold), (pred, g), batch_size=batch_size)
    return _f1_result(tp, num_pred, num_gold)


@jax.jit
def ground_truth_overlap(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
) -> PerInstance:
    """GTOverlap: whether the top-:math:`\\|L_i\\|_0` units are exactly the ground truth.

    .. math:: \\mathrm{GTOverlap}(A, L) = \\frac{1}{|A|} \\sum_i
              \\mathbb{I}[\\mathrm{topk}(A_i, \\|L_i\\|_0) = \\mathrm{topk}(L_i, \\|L_i\\|_0)]

    (Oxford thesis, §2.2.3.1). Ties are resolved pessimistically: an example
    counts only if every ground-truth unit scores *strictly* above every other
    valid unit, so a constant explanation never gets credit.

    Args:
        scores: ``(batch, n)`` float attributions :math:`A`.
        gold: ``(batch, n)`` bool ground truth :math:`L`.
        mask: ``(batch, n)`` bool, units to evaluate.

    Returns:
        :class:`~smat.evaluation.PerInstance` of 0.0 / 1.0; examples without a
        ground-truth unit are excluded.

    Raises:
        ValueError: if the shapes are not one common ``(batch, n)``.

    Example:
        >>> r = ground_truth_overlap(jnp.array([[0.1, 0.9, 0.2], [0.5, 0.5, 0.1]]),
        ...                          jnp.array([[False, True, False], [True, False, False]]),
        ...                          jnp.ones((2, 3), bool))
        >>> r.values.tolist()
        [1.0, 0.0]
    """
    s, g, m = _prepare(scores, gold, mask)
    big = jnp.asarray(jnp.inf, s.dtype)
    lowest_gold = jnp.min(jnp.where(g, s, big), axis=1)
    highest_other = jnp.max(jnp.where(jnp.logical_and(m, ~g), s, -big), axis=1)
    valid = jnp.any(g, axis=1)
    hit = jnp.logical_and(valid, lowest_gold > highest_other)
    return PerInstance(values=hit.astype(s.dtype), valid=valid)


@jax.jit
def mean_rank(
    scores: Float[ArrayLike, "batch n"],
    gold: Bool[ArrayLike, "batch n"],
    mask: Bool[ArrayLike, "batch n"],
) -> MeanRankResult:
    """MeanRank and MeanRankPercentage: ranking depth needed to recover the ground truth.

    .. math:: r_i = \\min r \\ \\mathrm{s.t.}\\ \\mathrm{topk}(L_i, \\|L_i\\|_0)
              \\subseteq \\mathrm{topk}(A_i, r), \\qquad
              \\mathrm{MeanRankPercentage} = \\frac{1}{|A|}\\sum_i r_i / |x_i|

    (Oxford thesis, §2.2.3.1; :math:`|x_i|` = number of valid units). Ties are
    resolved pessimistically: :math:`r_i` counts every valid unit scoring at
    least the lowest-scored ground-truth unit.

    Args:
        scores: ``(batch, n)`` float attributions.
        gold: ``(batch, n)`` bool ground truth.
        mask: ``(batch, n)`` bool, units to evaluate.

    Returns:
        :class:`MeanRankResult`; examples without a ground-truth unit are
        excluded from the means (rank 0 there).

    Raises:
        ValueError: if the shapes are not one common ``(batch, n)``.

    Example:
        >>> r = mean_rank(jnp.array([[0.1, 0.9, 0.2, 0.3]]),
        ...               jnp.array([[False, False, True, False]]), jnp.ones((1, 4), bool))
        >>> int(r.rank[0]), float(r.fraction[0])
        (3, 0.75)
    """
    s, g, m = _prepare(scores, gold, mask)
    big = jnp.asarray(jnp.inf, s.dtype)
    lowest_gold = jnp.min(jnp.where(g, s, big), axis=1)  # (B,)
    valid = jnp.any(g, axis=1)
    rank = jnp.sum(jnp.logical_and(m, s >= lowest_gold[:, None]), axis=1)
    rank = jnp.where(valid, rank, 0).astype(jnp.int32)
    fraction = rank / jnp.maximum(jnp.sum(m, axis=1), 1)
    return MeanRankResult(rank=rank, fraction=fraction.astype(s.dtype), valid=valid,
                          mean_rank=masked_mean(rank.astype(s.dtype), valid),
                          mean_fraction=masked_mean(fraction.astype(s.dtype), valid))


def ground_truth_metrics(scores: Mapping[str, ArrayLike], gold: Bool[ArrayLike, "batch n"],
                         mask: Bool[ArrayLike, "batch n"]) -> dict[str, dict[str, Any]]:
    """:func:`ground_truth_overlap` and :func:`mean_rank` (count and fraction of the
    units) of several explanations of the same rows, each as its mean with a bootstrap 95%
    CI over the rows that have a ground truth (:func:`~smat.evaluation.mean_with_ci`):
    the table of a known-feature task (Oxford thesis, §2.2.3.1) in one call.

    Args:
        scores: explainer name -> ``(batch, n)`` attributions of the same rows.
        gold: ``(batch, n)`` bool ground truth.
        mask: ``(batch, n)`` bool, units to evaluate.

    Returns:
        ``{name: {"overlap", "mean_rank", "mean_rank_fraction": {mean, low, high},
        "num_valid"}}``.

    Raises:
        ValueError: as :func:`ground_truth_overlap`.
    """
    report = {}
    for name, values in scores.items():
        overlap = ground_truth_overlap(values, gold, mask)
        rank = mean_rank(values, gold, mask)
        valid = np.asarray(overlap.valid)
        report[name] = {"overlap": mean_with_ci(np.asarray(overlap.values)[valid]),
                        "mean_rank": mean_with_ci(np.asarray(rank.rank, np.float64)[valid]),
                        "mean_rank_fraction": mean_with_ci(np.asarray(rank.fraction)[valid]),
                        "num_valid": int(valid.sum())}
    return report


def word_level_scores(
    scores: Float[ArrayLike, "batch seq"],
    word_ids: Int[ArrayLike, "batch seq"],
    *,
    num_words: int,
) -> tuple[Float[Array, "batch words"], Bool[Array, "batch words"]]:
    """Word scores as the sum of their sub-word token scores (design §6).

    .. math:: w_{b,j} = \\sum_{t:\\ \\mathrm{word\\_ids}_{b,t} = j} s_{b,t}

    Args:
        scores: ``(batch, seq)`` token scores.
        word_ids: ``(batch, seq)`` int, index of each token's word, ``-1`` for
            special and padding tokens (and for any token to ignore).
        num_words: static number of word slots ``W``; word ids must be ``< W``
            (checked when ``word_ids`` is concrete; under an outer ``jit``
            larger ids are ignored).

    Returns:
        ``(word_scores, word_mask)``: ``(batch, W)`` summed scores and a bool
        mask of the word slots that have at least one token.

    Raises:
        ValueError: mismatched shapes, ``num_words < 1`` or a word id ``>= num_words``.

    Example:
        >>> w, m = word_level_scores(jnp.array([[0.0, 1.0, 2.0, 3.0, 0.0]]),
        ...                          jnp.array([[-1, 0, 0, 1, -1]]), num_words=3)
        >>> w.tolist(), m.tolist()
        ([[3.0, 3.0, 0.0]], [[True, True, False]])
    """
    check_batch_seq(scores=scores, word_ids=word_ids)
    if num_words < 1:
        raise ValueError(f"num_words must be >= 1; got {num_words}.")
    if not isinstance(word_ids, jax.core.Tracer):
        largest = int(jnp.max(jnp.asarray(word_ids), initial=-1))
        if largest >= num_words:
            raise ValueError(f"word_ids contains word index {largest} but num_words={num_words}; "
                             f"pass num_words >= {largest + 1}.")
    return _word_level_scores(scores, word_ids, num_words=num_words)


@functools.partial(jax.jit, static_argnames=("num_words",))
def _word_level_scores(scores, word_ids, *, num_words):
    s = jnp.asarray(scores, jnp.result_type(float))
    ids = jnp.asarray(word_ids, jnp.int32)
    # The segment sum is smat.data's; a word slot is present when it has a token.
    present = word_scores(jnp.ones_like(s), ids, num_words=num_words) > 0  # (B, W)
    return word_scores(s, ids, num_words=num_words), present
