r"""ROAR and Recursive ROAR: the masking op, the area-between-curves metric and its plot.

ROAR (Hooker et al., 2019) masks the tokens an importance measure ranks highest,
*retrains* the model on the masked data and measures how much performance drops;
Recursive ROAR (Madsen et al., 2022, §3.2) recomputes the importance with the model
retrained at the previous masking ratio, keeping already-masked tokens masked, so
that dataset redundancies are masked too. This module holds the pure pieces:

- :func:`roar_mask`: which tokens are masked at a ratio (or count), rank-based with
  deterministic ties, jit-able; :func:`mask_input_ids` replaces them by [MASK];
- :func:`roar_faithfulness`: the summary metric of Madsen et al. (2022), **Eq. 3**,
  per seed, clipped to [-1, 1], undefined (flagged) when the denominator is ~0;
  :func:`summarize_faithfulness` gives its mean and bootstrap CI over seeds;
- :func:`plot_roar`: performance against masking ratio with CI bands.

The drivers that train a model per (explainer, seed, ratio) live in
:mod:`smat.jobs.roar`.

References:
  Madsen et al, `Evaluating the Faithfulness of Importance Measures in NLP by
  Recursively Masking Allegedly Important Tokens and Retraining
  <https://arxiv.org/abs/2110.08412>`_, 2022, Eqs. 1 and 3.
  Hooker et al, `A Benchmark for Interpretability Methods in Deep Neural Networks
  <https://arxiv.org/abs/1806.10758>`_, 2019.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from smat.evaluation._common import check_batch_seq
from smat.evaluation.statistics import bootstrap_ci

__all__ = [
    "FaithfulnessSummary",
    "RoarFaithfulness",
    "check_ratios",
    "mask_input_ids",
    "maskable_tokens",
    "num_to_mask",
    "plot_roar",
    "roar_faithfulness",
    "roar_mask",
    "summarize_faithfulness",
]


def check_ratios(ratios: Sequence[float]) -> tuple[float, ...]:
    """Validate masking ratios: strictly increasing fractions from 0.0 to 1.0 inclusive.

    Eq. 3 needs the unmasked (0%) and fully masked (100%) models, so both ends are
    required.

    Raises:
      ValueError: naming the offending ratios.
    """
    ratios = tuple(float(r) for r in ratios)
    if len(ratios) < 2 or ratios[0] != 0.0 or ratios[-1] != 1.0:
        raise ValueError(f"ratios must start at 0.0 and end at 1.0 (the unmasked and fully "
                         f"masked models of Eq. 3); got {ratios}")
    if any(b <= a for a, b in zip(ratios, ratios[1:], strict=False)):
        raise ValueError(f"ratios must be strictly increasing; got {ratios}")
    return ratios


def parse_ratios(text: str) -> tuple[float, ...]:
    """``"0:100:10"`` (percent start:stop:step, inclusive) or ``"0,20,50,100"`` (percent)
    -> checked fractions (:func:`check_ratios`).

    Raises:
      ValueError: malformed text (the message shows both forms).
    """
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            if step <= 0:
                raise ValueError
            percents = list(range(start, stop + 1, step))
        else:
            percents = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"ratios must be 'start:stop:step' in percent (e.g. 0:100:10) or a "
                         f"comma list (e.g. 0,20,50,100); got {text!r}") from None
    return check_ratios([p / 100 for p in percents])


def maskable_tokens(
    attention_mask: Int[ArrayLike, "batch seq"], special_tokens_mask: Bool[ArrayLike, "batch seq"]
) -> Bool[Array, "batch seq"]:
    """Tokens ROAR may mask: real (non-padded) and not special ([CLS], [SEP], ...)."""
    check_batch_seq(attention_mask=attention_mask, special_tokens_mask=special_tokens_mask)
    return jnp.logical_and(jnp.asarray(attention_mask).astype(bool),
                           jnp.logical_not(jnp.asarray(special_tokens_mask).astype(bool)))


def num_to_mask(
    num_maskable: Int[ArrayLike, " batch"], *, ratio: float | None = None,
    count: int | Int[ArrayLike, " batch"] | None = None,
) -> Int[Array, " batch"]:
    r"""Tokens masked per example: :math:`k = \lfloor r n + \tfrac12 \rfloor` or ``min(count, n)``.

    In ratio mode ``k`` rounds :math:`r n` half up, exactly (``r`` is read as a fraction,
    so 0.3 * 10 is 3, not 4); it is monotone in ``r``, so masks of increasing ratios are
    nested, and gives 0 at ``r = 0`` and ``n`` at ``r = 1``.

    Args:
      num_maskable: ``(batch,)`` maskable tokens ``n`` per example.
      ratio: a Python float in [0, 1] (static); exactly one of ``ratio`` / ``count``.
      count: total tokens to mask per example, scalar or ``(batch,)`` (clipped to ``n``).

    Returns:
      ``(batch,)`` int32.

    Raises:
      ValueError: both or neither of ratio / count, a ratio outside [0, 1] or a negative
        static count.
    """
    n = jnp.asarray(num_maskable, jnp.int32)
    if (ratio is None) == (count is None):
        raise ValueError(f"give exactly one of ratio= or count=; got ratio={ratio!r}, "
                         f"count={count!r}")
    if ratio is not None:
        if not 0.0 <= float(ratio) <= 1.0:
            raise ValueError(f"ratio must be in [0, 1]; got {ratio}")
        f = Fraction(float(ratio)).limit_denominator(1_000_000)
        return (2 * f.numerator * n + f.denominator) // (2 * f.denominator)  # round half up
    if isinstance(count, int) and count < 0:
        raise ValueError(f"count must be >= 0; got {count}")
    return jnp.clip(jnp.asarray(count, jnp.int32), 0, n)


@functools.partial(jax.jit, static_argnames=("ratio",))
def _roar_mask(scores, maskable, masked, count, *, ratio):
    masked = jnp.logical_and(masked, maskable)
    n = jnp.sum(maskable, axis=1)  # (B,)
    k = num_to_mask(n, ratio=ratio) if ratio is not None else num_to_mask(n, count=count)
    pos = lax.broadcasted_iota(jnp.int32, scores.shape, 1)  # (B, T)
    # Sort keys, in order: maskable first, already masked first, higher score first, earlier
    # position first. 0.0 - s maps -0.0 and 0.0 to the same key; NaN scores sort last.
    _, _, _, order = lax.sort(
        (jnp.logical_not(maskable).astype(jnp.int32), jnp.logical_not(masked).astype(jnp.int32),
         0.0 - scores, pos), dimension=1, num_keys=4)
    rank = jnp.argsort(order, axis=1)  # (B, T) inverse permutation
    return jnp.logical_or(masked, jnp.logical_and(maskable, rank < k[:, None]))


def roar_mask(
    scores: Float[ArrayLike, "batch seq"],
    maskable: Bool[ArrayLike, "batch seq"],
    masked: Bool[ArrayLike, "batch seq"] | None = None,
    *,
    ratio: float | None = None,
    count: int | Int[ArrayLike, " batch"] | None = None,
) -> Bool[Array, "batch seq"]:
    r"""The tokens masked at one ROAR step: the top-``k`` maskable tokens of each row.

    Tokens are ranked, within each row, by the keys (in order): already ``masked`` first,
    then higher score, then earlier position (so ties are deterministic). The first
    :math:`k` of the maskable tokens are masked, with :math:`k` from :func:`num_to_mask`
    (a ratio of the row's maskable tokens, or a count). Special and padding tokens
    (``~maskable``) are never masked, and already-masked tokens always stay masked
    (Recursive ROAR, Madsen et al., 2022, §3.2) — if ``k`` is below their number the
    result is just ``masked``.

    With ``masked=None`` (plain ROAR) the masks of increasing ratios are nested for fixed
    scores; Recursive ROAR passes the previous step's mask and the scores of the model
    retrained on it.

    Args:
      scores: ``(batch, seq)`` float importance (higher = more important); values at
        non-maskable or already-masked tokens are ignored.
      maskable: ``(batch, seq)`` bool, see :func:`maskable_tokens`.
      masked: ``(batch, seq)`` bool, tokens masked at the previous step, or ``None``.
      ratio: fraction of each row's maskable tokens, a Python float in [0, 1] (static
        under jit; one compilation per ratio).
      count: total masked tokens per row, scalar or ``(batch,)`` (traced).

    Returns:
      ``(batch, seq)`` bool, True at masked tokens.

    Raises:
      ValueError: mismatched shapes or a bad ratio / count (see :func:`num_to_mask`).

    Example:
      >>> scores = jnp.array([[9.0, 1.0, 3.0, 3.0, 2.0, 0.0]])
      >>> maskable = jnp.array([[False, True, True, True, True, False]])  # [CLS] ... [SEP]
      >>> roar_mask(scores, maskable, ratio=0.5).astype(int).tolist()
      [[0, 0, 1, 1, 0, 0]]
    """
    if masked is None:
        masked = jnp.zeros(jnp.shape(maskable), bool)
    check_batch_seq(scores=scores, maskable=maskable, masked=masked)
    if (ratio is None) == (count is None):
        raise ValueError(f"give exactly one of ratio= or count=; got ratio={ratio!r}, "
                         f"count={count!r}")
    if ratio is not None:
        num_to_mask(jnp.zeros((1,), jnp.int32), ratio=ratio)  # validates the ratio
        ratio = float(ratio)
        count = jnp.zeros((), jnp.int32)
    elif isinstance(count, int) and count < 0:
        raise ValueError(f"count must be >= 0; got {count}")
    return _roar_mask(jnp.asarray(scores, jnp.float32), jnp.asarray(maskable).astype(bool),
                      jnp.asarray(masked).astype(bool), jnp.asarray(count, jnp.int32),
                      ratio=ratio)


def mask_input_ids(
    input_ids: Int[ArrayLike, "batch seq"], masked: Bool[ArrayLike, "batch seq"], *,
    mask_token_id: int,
) -> Int[Array, "batch seq"]:
    """Replace the masked tokens by ``mask_token_id`` ([MASK]); lengths and attention unchanged.

    Madsen et al. (2022, §3.1) mask with [MASK] rather than deleting tokens, so the
    sequence length (an information source unrelated to importance) is kept.
    """
    check_batch_seq(input_ids=input_ids, masked=masked)
    ids = jnp.asarray(input_ids)
    return jnp.where(jnp.asarray(masked).astype(bool), jnp.asarray(mask_token_id, ids.dtype), ids)


class RoarFaithfulness(NamedTuple):
    """Eq. 3 per seed (see :func:`roar_faithfulness`).

    Attributes:
      values: ``(seeds,)`` faithfulness clipped to [-1, 1]; 0.0 where undefined.
      defined: ``(seeds,)`` bool; False where the denominator is <= ``min_denominator``
        (the random baseline never rises above the 100% model, so there is no area to
        normalise by).
      numerator: ``(seeds,)`` area between the random-baseline and explainer curves.
      denominator: ``(seeds,)`` area between the random baseline and the 100% model.
    """

    values: Float[Array, " seeds"]
    defined: Bool[Array, " seeds"]
    numerator: Float[Array, " seeds"]
    denominator: Float[Array, " seeds"]


def _trapezoid(dx, y):
    return jnp.sum(0.5 * dx[None, :] * (y[:, :-1] + y[:, 1:]), axis=1)


def roar_faithfulness(
    performance: Float[ArrayLike, "seeds ratios"],
    baseline: Float[ArrayLike, "seeds ratios"],
    ratios: Sequence[float],
    *,
    min_denominator: float = 1e-3,
) -> RoarFaithfulness:
    r"""Area-between-curves faithfulness of Madsen et al. (2022), **Eq. 3**, per seed.

    With ratios :math:`x_1 = 0 < \dots < x_I = 1`, the explainer's performance
    :math:`p_i` and the random baseline's :math:`b_i` (:math:`b_I`: the fully masked
    model, a lower bound),

    .. math::

      \mathrm{faithfulness} = \frac{\sum_{i=1}^{I-1} \tfrac12 \Delta x_i
          (\Delta p_i + \Delta p_{i+1})}{\sum_{i=1}^{I-1} \tfrac12 \Delta x_i
          (\Delta b_i + \Delta b_{i+1})},
      \quad \Delta x_i = x_{i+1} - x_i,\ \Delta p_i = b_i - p_i,\ \Delta b_i = b_i - b_I.

    Positive when the explainer's curve lies below the random one (faithful), 1 when
    performance falls to the lower bound at once, negative when above random. The
    ratio is clipped to [-1, 1]. When the denominator is at most ``min_denominator``
    (a random baseline that never rises above the lower bound, e.g. a model at chance)
    the metric is undefined: flagged in ``defined`` with value 0.0, never divided.

    Args:
      performance: ``(seeds, ratios)`` explainer performance (higher = better model).
      baseline: ``(seeds, ratios)`` random-baseline performance; its last column is the
        100% model.
      ratios: the :math:`x_i`, strictly increasing from 0.0 to 1.0.
      min_denominator: smallest denominator (in performance x ratio units) treated as
        defined.

    Returns:
      :class:`RoarFaithfulness`.

    Raises:
      ValueError: shapes that differ from ``(seeds, len(ratios))``, bad ratios or a
        negative ``min_denominator``.

    Example:
      >>> r = roar_faithfulness([[0.9, 0.5, 0.5]], [[0.9, 0.7, 0.5]], [0.0, 0.5, 1.0])
      >>> round(float(r.values[0]), 4), bool(r.defined[0])
      (0.5, True)
    """
    ratios = check_ratios(ratios)
    if min_denominator < 0:
        raise ValueError(f"min_denominator must be >= 0; got {min_denominator}")
    p = jnp.asarray(performance, jnp.float32)
    b = jnp.asarray(baseline, jnp.float32)
    for name, value in (("performance", p), ("baseline", b)):
        if value.ndim != 2 or value.shape[1] != len(ratios):
            raise ValueError(f"{name} must have shape (seeds, {len(ratios)}) for ratios "
                             f"{ratios}; got {value.shape}")
    if p.shape != b.shape:
        raise ValueError(f"performance {p.shape} and baseline {b.shape} must have one shape")
    dx = jnp.diff(jnp.asarray(ratios, jnp.float32))  # (I-1,)
    numerator = _trapezoid(dx, b - p)  # (S,)
    denominator = _trapezoid(dx, b - b[:, -1:])  # (S,)
    defined = denominator > min_denominator
    safe = jnp.where(defined, denominator, 1.0)
    values = jnp.where(defined, jnp.clip(numerator / safe, -1.0, 1.0), 0.0)
    return RoarFaithfulness(values, defined, numerator, denominator)


class FaithfulnessSummary(NamedTuple):
    """Mean of Eq. 3 over the seeds where it is defined, with a bootstrap CI.

    Attributes:
      mean: mean over defined seeds (NaN when none is defined).
      low, high: percentile-bootstrap confidence interval of the mean (NaN when none).
      num_defined: seeds that entered the mean.
      num_undefined: seeds left out because the denominator was ~0 (reported, never
        divided by).
    """

    mean: float
    low: float
    high: float
    num_defined: int
    num_undefined: int


def summarize_faithfulness(
    result: RoarFaithfulness, *, confidence: float = 0.95, num_resamples: int = 10_000,
    seed: int = 0,
) -> FaithfulnessSummary:
    """Mean and bootstrap CI (:func:`~smat.evaluation.bootstrap_ci`) over defined seeds.

    Args:
      result: from :func:`roar_faithfulness`.
      confidence: CI coverage in (0, 1).
      num_resamples: bootstrap resamples.
      seed: bootstrap RNG seed.

    Returns:
      :class:`FaithfulnessSummary`; mean / low / high are NaN when no seed is defined.
    """
    defined = np.asarray(result.defined, bool)
    values = np.asarray(result.values, np.float64)[defined]
    if values.size == 0:
        return FaithfulnessSummary(float("nan"), float("nan"), float("nan"), 0,
                                   int(defined.size))
    low, high = bootstrap_ci(values, num_resamples=num_resamples, confidence=confidence,
                             seed=seed)
    return FaithfulnessSummary(float(values.mean()), low, high, int(values.size),
                               int(defined.size - values.size))


def _band(values: np.ndarray, *, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and bootstrap CI per column of a ``(seeds, ratios)`` array."""
    cis = np.array([bootstrap_ci(column, confidence=confidence, num_resamples=2000)
                    for column in values.T])  # (I, 2)
    return values.mean(axis=0), cis[:, 0], cis[:, 1]


def plot_roar(
    curves: Mapping[str, Float[ArrayLike, "seeds ratios"]],
    baseline: Float[ArrayLike, "seeds ratios"],
    ratios: Sequence[float],
    *,
    metric: str = "performance",
    title: str | None = None,
    confidence: float = 0.95,
    path: str | Path | None = None,
):
    """Performance against masking ratio, one curve per explainer, with CI bands.

    Each curve is the mean over seeds with a bootstrap confidence band (over seeds) per
    ratio; the random baseline is drawn dashed and the fully masked model's performance
    as a dotted horizontal lower bound (Madsen et al., 2022, Figure 4). Uses
    ``matplotlib.figure.Figure`` directly (no pyplot state; saved through Agg).

    Args:
      curves: explainer name -> ``(seeds, ratios)`` performance.
      baseline: ``(seeds, ratios)`` random-baseline performance (last column: 100% model).
      ratios: masking ratios in [0, 1] (plotted in %).
      metric: y-axis label.
      title: axes title.
      confidence: CI coverage of the bands.
      path: if given, the figure is saved there (format from the suffix).

    Returns:
      The ``matplotlib.figure.Figure``.

    Raises:
      ValueError: a curve whose shape differs from the baseline's or from
        ``(seeds, len(ratios))``.
    """
    from matplotlib.figure import Figure

    ratios = check_ratios(ratios)
    base = np.asarray(baseline, np.float64)
    if base.ndim != 2 or base.shape[1] != len(ratios):
        raise ValueError(f"baseline must have shape (seeds, {len(ratios)}); got {base.shape}")
    x = 100.0 * np.asarray(ratios)
    fig = Figure(figsize=(6.0, 4.0))
    ax = fig.add_subplot()
    for name, values in curves.items():
        values = np.asarray(values, np.float64)
        if values.shape != base.shape:
            raise ValueError(f"curve {name!r} has shape {values.shape}; expected the "
                             f"baseline's {base.shape}")
        mean, low, high = _band(values, confidence=confidence)
        (line,) = ax.plot(x, mean, marker="o", label=name)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    mean, low, high = _band(base, confidence=confidence)
    ax.plot(x, mean, color="black", linestyle="--", marker="x", label="random")
    ax.fill_between(x, low, high, color="black", alpha=0.1)
    ax.axhline(float(base[:, -1].mean()), color="grey", linestyle=":", label="100% masked")
    ax.set_xlabel("masked tokens [%]")
    ax.set_ylabel(metric)
    ax.set_xticks(x)
    if title is not None:
        ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
