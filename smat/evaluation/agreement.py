"""Agreement between saliency explainers (Jukić et al., 2022; Lu et al., 2022).

Per instance, the token scores of two explainers are compared over the
non-padded tokens with Pearson's r, Kendall's tau-b and Spearman's rho.
Instances with fewer than 3 valid tokens (Jukić et al. filter these, App. A,
footnote 3) or with constant scores under either explainer have no defined
correlation: they are *excluded and counted* through a validity mask, and every
aggregate is a mean over valid instances only — never NaN.

All per-instance functions are batched and jitted; the rank correlations use an
exact O(T^2) pairwise computation per instance (ties handled exactly), chunked
over instances with ``batch_size`` to bound memory.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from smat.evaluation._common import (
    PerInstance,
    check_batch_seq,
    instance_map,
    masked_mean,
    top_k_mask,
)

__all__ = [
    "AGREEMENT_METRICS",
    "MIN_TOKENS",
    "AgreementMatrix",
    "SeedAggregate",
    "Validity",
    "aggregate_over_seeds",
    "agreement_matrix",
    "correlation_validity",
    "kendall_tau_b",
    "pearson_r",
    "plot_agreement_matrix",
    "spearman_rho",
    "top_k_overlap",
]

MIN_TOKENS = 3
"""Instances with fewer valid tokens than this are excluded (Jukić et al., 2022)."""


class Validity(NamedTuple):
    """Why instances are excluded from a correlation (see :func:`correlation_validity`).

    Attributes:
        valid: ``(batch,)`` bool, neither too short nor constant.
        too_short: ``(batch,)`` bool, fewer than 3 valid tokens.
        constant: ``(batch,)`` bool, long enough but constant scores under ``a`` or ``b``.
    """

    valid: Bool[Array, " batch"]
    too_short: Bool[Array, " batch"]
    constant: Bool[Array, " batch"]


class SeedAggregate(NamedTuple):
    """Agreement aggregated over instances, then over seeds.

    Attributes:
        mean: scalar, mean over seeds that have at least one valid instance.
        per_seed: ``(seeds,)`` mean over each seed's valid instances (0.0 if none).
        num_valid: ``(seeds,)`` int, valid instances per seed.
        num_excluded: ``(seeds,)`` int, excluded instances per seed.
    """

    mean: Float[Array, ""]
    per_seed: Float[Array, " seeds"]
    num_valid: Int[Array, " seeds"]
    num_excluded: Int[Array, " seeds"]


class AgreementMatrix(NamedTuple):
    """Pairwise agreement across explainers (host-side NumPy result).

    Attributes:
        names: explainer names, in the row/column order.
        values: ``(E, E)`` float64, symmetric, 1.0 on the diagonal; entry
            ``(i, j)`` is the seed-mean of the instance-mean agreement of ``i``
            and ``j``.
        per_seed: ``(E, E, seeds)`` float64 instance means per seed.
        num_valid: ``(E, E)`` int64, valid instances summed over seeds (the
            diagonal holds the number of instances, seeds x batch).
        num_excluded: ``(E, E)`` int64, excluded instances summed over seeds.
        metric: the metric name.
    """

    names: tuple[str, ...]
    values: np.ndarray
    per_seed: np.ndarray
    num_valid: np.ndarray
    num_excluded: np.ndarray
    metric: str

    def mean_over_pairs(self) -> float:
        """Mean of the off-diagonal upper triangle (Jukić et al., 2022, Table 2)."""
        rows, cols = np.triu_indices(len(self.names), k=1)
        if rows.size == 0:
            raise ValueError("mean_over_pairs needs at least two explainers; got "
                             f"{list(self.names)}.")
        return float(np.mean(self.values[rows, cols]))


def _validity_1(a, b, m):
    n = jnp.sum(m)
    big = jnp.asarray(jnp.inf, a.dtype)

    def constant(x):
        return jnp.max(jnp.where(m, x, -big)) == jnp.min(jnp.where(m, x, big))

    too_short = n < MIN_TOKENS
    const = jnp.logical_and(~too_short, jnp.logical_or(constant(a), constant(b)))
    return jnp.logical_and(~too_short, ~const), too_short, const


def _pearson_1(a, b, m):
    w = m.astype(a.dtype)
    n = jnp.maximum(jnp.sum(w), 1.0)
    ac = (a - jnp.sum(w * a) / n) * w
    bc = (b - jnp.sum(w * b) / n) * w
    denom = jnp.sqrt(jnp.sum(ac * ac) * jnp.sum(bc * bc))
    r = jnp.sum(ac * bc) / jnp.where(denom > 0, denom, 1.0)
    return jnp.clip(r, -1.0, 1.0)


def _average_ranks_1(x, m):
    # 1-based average ranks among valid tokens: 1 + #{less} + (#{equal} - 1) / 2.
    pair = jnp.logical_and(m[:, None], m[None, :])  # (T, T)
    less = jnp.sum(jnp.logical_and(pair, x[None, :] < x[:, None]), axis=1)
    equal = jnp.sum(jnp.logical_and(pair, x[None, :] == x[:, None]), axis=1)
    return 1.0 + less.astype(x.dtype) + 0.5 * (equal.astype(x.dtype) - 1.0)


def _kendall_1(a, b, m):
    pair = jnp.logical_and(m[:, None], m[None, :])  # (T, T), diagonal included
    sa = jnp.sign(a[:, None] - a[None, :]).astype(jnp.int32)  # (T, T)
    sb = jnp.sign(b[:, None] - b[None, :]).astype(jnp.int32)
    n = jnp.sum(m).astype(jnp.int32)
    # Every unordered pair appears twice in the full matrix; the diagonal ties itself.
    s = jnp.sum(jnp.where(pair, sa * sb, 0)) // 2
    ties_a = (jnp.sum(jnp.logical_and(pair, sa == 0)) - n) // 2
    ties_b = (jnp.sum(jnp.logical_and(pair, sb == 0)) - n) // 2
    n0 = n * (n - 1) // 2
    denom = jnp.sqrt((n0 - ties_a).astype(a.dtype) * (n0 - ties_b).astype(a.dtype))
    tau = s.astype(a.dtype) / jnp.where(denom > 0, denom, 1.0)
    return jnp.clip(tau, -1.0, 1.0)


def _spearman_1(a, b, m):
    return _pearson_1(_average_ranks_1(a, m), _average_ranks_1(b, m), m)


def _prepare(a, b, mask):
    check_batch_seq(a=a, b=b, mask=mask)
    dtype = jnp.result_type(float)
    return jnp.asarray(a, dtype), jnp.asarray(b, dtype), jnp.asarray(mask).astype(bool)


def _correlation(fn, a, b, mask, batch_size):
    a, b, m = _prepare(a, b, mask)
    valid, _, _ = jax.vmap(_validity_1)(a, b, m)
    values = instance_map(fn, (a, b, m), batch_size=batch_size)
    return PerInstance(values=jnp.where(valid, values, 0.0), valid=valid)


@jax.jit
def correlation_validity(
    a: Float[ArrayLike, "batch seq"],
    b: Float[ArrayLike, "batch seq"],
    mask: Bool[ArrayLike, "batch seq"],
) -> Validity:
    """Which instances have a defined correlation, and why the others do not.

    An instance is excluded when it has fewer than 3 valid tokens
    (``too_short``) or, otherwise, when ``a`` or ``b`` is constant over its valid
    tokens (``constant``; exact equality of max and min).

    Args:
        a: ``(batch, seq)`` scores of the first explainer.
        b: ``(batch, seq)`` scores of the second explainer.
        mask: ``(batch, seq)`` bool/int, 1 for tokens to compare (non-padded).

    Returns:
        :class:`Validity` of ``(batch,)`` bool arrays; ``too_short.sum()`` and
        ``constant.sum()`` are the exclusion counts.

    Raises:
        ValueError: if the shapes are not one common ``(batch, seq)``.
    """
    a, b, m = _prepare(a, b, mask)
    return Validity(*jax.vmap(_validity_1)(a, b, m))


@functools.partial(jax.jit, static_argnames=("batch_size",))
def pearson_r(
    a: Float[ArrayLike, "batch seq"],
    b: Float[ArrayLike, "batch seq"],
    mask: Bool[ArrayLike, "batch seq"],
    *,
    batch_size: int | None = None,
) -> PerInstance:
    """Per-instance Pearson correlation over the valid tokens.

    .. math:: r = \\frac{\\sum_t (a_t - \\bar a)(b_t - \\bar b)}
              {\\sqrt{\\sum_t (a_t - \\bar a)^2 \\sum_t (b_t - \\bar b)^2}}

    over tokens with ``mask`` set (Jukić et al., 2022, §3 — their recommended
    agreement measure).

    Args:
        a: ``(batch, seq)`` scores of the first explainer.
        b: ``(batch, seq)`` scores of the second explainer.
        mask: ``(batch, seq)`` bool/int, 1 for tokens to compare.
        batch_size: instances per vectorised chunk; ``None`` = all at once.

    Returns:
        :class:`PerInstance`; excluded instances (see
        :func:`correlation_validity`) have ``valid=False`` and value 0.0.

    Raises:
        ValueError: if the shapes are not one common ``(batch, seq)``.

    Example:
        >>> c = pearson_r(jnp.array([[1.0, 2.0, 3.0]]), jnp.array([[2.0, 4.0, 7.0]]),
        ...               jnp.ones((1, 3), bool))
        >>> round(float(c.values[0]), 4), bool(c.valid[0])
        (0.9934, True)
    """
    return _correlation(_pearson_1, a, b, mask, batch_size)


@functools.partial(jax.jit, static_argnames=("batch_size",))
def kendall_tau_b(
    a: Float[ArrayLike, "batch seq"],
    b: Float[ArrayLike, "batch seq"],
    mask: Bool[ArrayLike, "batch seq"],
    *,
    batch_size: int | None = 128,
) -> PerInstance:
    """Per-instance Kendall tau-b over the valid tokens, ties handled exactly.

    .. math:: \\tau_b = \\frac{n_c - n_d}{\\sqrt{(n_0 - n_1)(n_0 - n_2)}}

    with :math:`n_c, n_d` the concordant / discordant pairs,
    :math:`n_0 = n(n-1)/2` and :math:`n_1, n_2` the pairs tied in ``a`` / ``b``
    (Kendall, 1945; the variant of ``scipy.stats.kendalltau``'s default). Jukić
    et al. (2022) compare it with Pearson's r. Computed from the full pairwise
    sign matrices, O(T^2) memory per instance.

    Args:
        a: ``(batch, seq)`` scores of the first explainer.
        b: ``(batch, seq)`` scores of the second explainer.
        mask: ``(batch, seq)`` bool/int, 1 for tokens to compare.
        batch_size: instances per vectorised chunk (bounds the ``(chunk, T, T)``
            intermediates); ``None`` = all at once.

    Returns:
        :class:`PerInstance` (excluded instances: ``valid=False``, value 0.0).

    Raises:
        ValueError: if the shapes are not one common ``(batch, seq)``.

    Example:
        >>> c = kendall_tau_b(jnp.array([[1.0, 2.0, 3.0, 4.0]]),
        ...                   jnp.array([[1.0, 3.0, 2.0, 4.0]]), jnp.ones((1, 4), bool))
        >>> round(float(c.values[0]), 4)
        0.6667
    """
    return _correlation(_kendall_1, a, b, mask, batch_size)


@functools.partial(jax.jit, static_argnames=("batch_size",))
def spearman_rho(
    a: Float[ArrayLike, "batch seq"],
    b: Float[ArrayLike, "batch seq"],
    mask: Bool[ArrayLike, "batch seq"],
    *,
    batch_size: int | None = 128,
) -> PerInstance:
    """Per-instance Spearman rank correlation over the valid tokens.

    Pearson's r of the average ranks (ties share the mean of the ranks they
    span), as ``scipy.stats.spearmanr``. Ranks are computed by O(T^2) pairwise
    comparison per instance.

    Args:
        a: ``(batch, seq)`` scores of the first explainer.
        b: ``(batch, seq)`` scores of the second explainer.
        mask: ``(batch, seq)`` bool/int, 1 for tokens to compare.
        batch_size: instances per vectorised chunk; ``None`` = all at once.

    Returns:
        :class:`PerInstance` (excluded instances: ``valid=False``, value 0.0).

    Raises:
        ValueError: if the shapes are not one common ``(batch, seq)``.

    Example:
        >>> c = spearman_rho(jnp.array([[1.0, 2.0, 3.0]]), jnp.array([[1.0, 8.0, 27.0]]),
        ...                  jnp.ones((1, 3), bool))
        >>> float(c.values[0])
        1.0
    """
    return _correlation(_spearman_1, a, b, mask, batch_size)


@jax.jit
def top_k_overlap(
    a: Float[ArrayLike, "batch seq"],
    b: Float[ArrayLike, "batch seq"],
    mask: Bool[ArrayLike, "batch seq"],
    *,
    k: int | Int[ArrayLike, ""],
) -> PerInstance:
    """Per-instance overlap rate of two explainers' top-k tokens (Lu et al., 2022, Table 1).

    .. math:: \\mathrm{overlap} = |\\mathrm{top}_{k'}(a) \\cap \\mathrm{top}_{k'}(b)| / k'

    with :math:`k' = \\min(k, n)` and :math:`n` the instance's valid tokens
    (Lu et al. report it in percent; this returns a fraction). Ties in the
    scores are broken by position (earlier token first).

    Args:
        a: ``(batch, seq)`` scores of the first explainer.
        b: ``(batch, seq)`` scores of the second explainer.
        mask: ``(batch, seq)`` bool/int, 1 for candidate tokens.
        k: number of top tokens (Lu et al. use 40 words), >= 1.

    Returns:
        :class:`PerInstance` of overlap rates in [0, 1]; instances without valid
        tokens have ``valid=False`` and value 0.0.

    Raises:
        ValueError: if the shapes are not one common ``(batch, seq)``.

    Example:
        >>> o = top_k_overlap(jnp.array([[3.0, 2.0, 1.0, 0.0]]),
        ...                   jnp.array([[3.0, 0.0, 2.0, 1.0]]), jnp.ones((1, 4), bool), k=2)
        >>> float(o.values[0])
        0.5
    """
    a, b, m = _prepare(a, b, mask)
    n = jnp.sum(m, axis=1)  # (B,)
    k_eff = jnp.minimum(jnp.maximum(jnp.asarray(k, jnp.int32), 1), n)  # (B,)
    both = jnp.logical_and(top_k_mask(a, m, k_eff), top_k_mask(b, m, k_eff))
    valid = n > 0
    rate = jnp.sum(both, axis=1) / jnp.maximum(k_eff, 1)
    return PerInstance(values=jnp.where(valid, rate, 0.0).astype(a.dtype), valid=valid)


@jax.jit
def aggregate_over_seeds(
    values: Float[ArrayLike, "seeds batch"], valid: Bool[ArrayLike, "seeds batch"]
) -> SeedAggregate:
    """Mean over valid instances within each seed, then mean over seeds.

    Seeds without any valid instance are left out of the seed mean (their
    ``per_seed`` entry is 0.0 and ``num_valid`` is 0); if no seed has a valid
    instance, ``mean`` is 0.0 — check ``num_valid``.

    Args:
        values: ``(seeds, batch)`` per-instance agreement, or ``(batch,)`` for one seed.
        valid: same shape, bool.

    Returns:
        :class:`SeedAggregate`.

    Raises:
        ValueError: if the shapes differ or are not 1-D/2-D.

    Example:
        >>> agg = aggregate_over_seeds(jnp.array([[1.0, 0.0], [0.5, 0.5]]),
        ...                            jnp.array([[True, False], [True, True]]))
        >>> float(agg.mean)
        0.75
    """
    v = jnp.asarray(values, jnp.result_type(float))
    ok = jnp.asarray(valid).astype(bool)
    if v.shape != ok.shape or v.ndim not in (1, 2):
        raise ValueError(f"values and valid must share a (seeds, batch) or (batch,) shape; got "
                         f"{v.shape} and {ok.shape}.")
    if v.ndim == 1:
        v, ok = v[None], ok[None]
    per_seed = jax.vmap(masked_mean)(v, ok)  # (S,)
    num_valid = jnp.sum(ok, axis=1).astype(jnp.int32)
    mean = masked_mean(per_seed, num_valid > 0)
    return SeedAggregate(mean=mean, per_seed=per_seed, num_valid=num_valid,
                         num_excluded=(ok.shape[1] - num_valid).astype(jnp.int32))


AGREEMENT_METRICS = {
    "pearson": _pearson_1,
    "kendall": _kendall_1,
    "spearman": _spearman_1,
}
"""Per-instance correlation functions by name, as used by :func:`agreement_matrix`."""


@functools.partial(jax.jit, static_argnames=("metric", "batch_size"))
def _pairwise(stack, mask, left, right, *, metric, batch_size):
    # stack (E, S, B, T); mask (S, B, T); left/right (P,) explainer indices.
    fn = AGREEMENT_METRICS[metric]
    seeds, batch, seq = mask.shape
    flat_mask = mask.reshape(seeds * batch, seq)

    def one_pair(idx):
        a = stack[idx[0]].reshape(seeds * batch, seq)
        b = stack[idx[1]].reshape(seeds * batch, seq)
        valid, _, _ = jax.vmap(_validity_1)(a, b, flat_mask)
        values = instance_map(fn, (a, b, flat_mask), batch_size=batch_size)
        agg = aggregate_over_seeds(jnp.where(valid, values, 0.0).reshape(seeds, batch),
                                   valid.reshape(seeds, batch))
        return agg

    return jax.lax.map(one_pair, jnp.stack([left, right], axis=1))


def agreement_matrix(
    scores: Mapping[str, ArrayLike],
    mask: ArrayLike,
    *,
    metric: str = "pearson",
    batch_size: int | None = 128,
) -> AgreementMatrix:
    """Pairwise agreement matrix across explainers, aggregated over instances then seeds.

    For every pair of explainers, the per-instance correlation (``metric``) is
    averaged over valid instances within each seed and then over seeds
    (:func:`aggregate_over_seeds`); all pairs are computed in one jitted call.

    Args:
        scores: name -> scores of shape ``(batch, seq)`` or ``(seeds, batch, seq)``
            (seeds: e.g. explainers of independently trained models on the same
            inputs); all of one shape.
        mask: ``(batch, seq)`` (shared by all seeds) or ``(seeds, batch, seq)``,
            1 for non-padded tokens.
        metric: one of ``"pearson"``, ``"kendall"`` (tau-b), ``"spearman"``.
        batch_size: instances per vectorised chunk (see :func:`kendall_tau_b`).

    Returns:
        :class:`AgreementMatrix` (NumPy values; call ``.mean_over_pairs()``).

    Raises:
        ValueError: unknown ``metric``, fewer than two explainers, or mismatched shapes.

    Example:
        >>> x = jnp.array([[1.0, 2.0, 3.0, 4.0]])
        >>> m = agreement_matrix({"a": x, "b": 2 * x, "c": -x}, jnp.ones((1, 4), bool))
        >>> m.values.round(3).tolist()
        [[1.0, 1.0, -1.0], [1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]]
    """
    if metric not in AGREEMENT_METRICS:
        raise ValueError(f"Unknown agreement metric {metric!r}; choose one of "
                         f"{sorted(AGREEMENT_METRICS)}.")
    names = tuple(scores)
    if len(names) < 2:
        raise ValueError(f"agreement_matrix needs at least two explainers; got {list(names)}.")
    arrays = [jnp.asarray(scores[n], jnp.result_type(float)) for n in names]
    shape = arrays[0].shape
    for name, arr in zip(names, arrays, strict=True):
        if arr.shape != shape or arr.ndim not in (2, 3):
            raise ValueError(f"scores[{name!r}] has shape {arr.shape}; expected (batch, seq) or "
                             f"(seeds, batch, seq) matching scores[{names[0]!r}] {shape}.")
    stack = jnp.stack(arrays)  # (E, S?, B, T)
    if stack.ndim == 3:
        stack = stack[:, None]  # (E, 1, B, T)
    seeds = stack.shape[1]
    m = jnp.asarray(mask).astype(bool)
    if m.shape == stack.shape[2:]:
        m = jnp.broadcast_to(m[None], stack.shape[1:])
    if m.shape != stack.shape[1:]:
        raise ValueError(f"mask has shape {m.shape}; expected {stack.shape[2:]} or "
                         f"{stack.shape[1:]} to match the scores.")
    pairs = list(itertools.combinations(range(len(names)), 2))
    left = jnp.asarray([p[0] for p in pairs], jnp.int32)
    right = jnp.asarray([p[1] for p in pairs], jnp.int32)
    agg = _pairwise(stack, m, left, right, metric=metric, batch_size=batch_size)
    e = len(names)
    values = np.eye(e)
    per_seed = np.ones((e, e, seeds))
    num_valid = np.zeros((e, e), np.int64)
    num_excluded = np.zeros((e, e), np.int64)
    num_valid[np.diag_indices(e)] = m.shape[0] * m.shape[1]  # every instance, with itself
    for p, (i, j) in enumerate(pairs):
        values[i, j] = values[j, i] = float(agg.mean[p])
        per_seed[i, j] = per_seed[j, i] = np.asarray(agg.per_seed[p])
        num_valid[i, j] = num_valid[j, i] = int(jnp.sum(agg.num_valid[p]))
        num_excluded[i, j] = num_excluded[j, i] = int(jnp.sum(agg.num_excluded[p]))
    return AgreementMatrix(names=names, values=values, per_seed=per_seed, num_valid=num_valid,
                           num_excluded=num_excluded, metric=metric)


def plot_agreement_matrix(
    matrix: AgreementMatrix,
    *,
    path: str | Path | None = None,
    title: str | None = None,
    digits: int = 2,
):
    """Heatmap of an :class:`AgreementMatrix` with the values written in the cells.

    Uses ``matplotlib.figure.Figure`` directly (no pyplot state, no GUI backend;
    saving goes through the Agg canvas).

    Args:
        matrix: result of :func:`agreement_matrix`.
        path: if given, the figure is saved there (format from the suffix).
        title: axes title; defaults to ``"<metric> agreement"``.
        digits: decimals written in the cells.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``matrix.values`` is not square with one row per name.
    """
    from matplotlib.figure import Figure

    values = np.asarray(matrix.values, dtype=np.float64)
    e = len(matrix.names)
    if values.shape != (e, e):
        raise ValueError(f"matrix.values has shape {values.shape}; expected ({e}, {e}) for "
                         f"names {list(matrix.names)}.")
    fig = Figure(figsize=(1.0 + 0.9 * e, 0.8 + 0.8 * e))
    ax = fig.add_subplot()
    image = ax.imshow(values, vmin=-1.0, vmax=1.0, cmap="RdBu_r")
    ax.set_xticks(range(e), labels=list(matrix.names), rotation=45, ha="right")
    ax.set_yticks(range(e), labels=list(matrix.names))
    for i, j in itertools.product(range(e), range(e)):
        ax.text(j, i, f"{values[i, j]:.{digits}f}", ha="center", va="center", fontsize=8)
    ax.set_title(title if title is not None else f"{matrix.metric} agreement")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
