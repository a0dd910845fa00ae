"""Summary statistics and significance tests shared by every evaluation.

One place for the numbers that end up in tables: median and inter-quartile range
(the SMaT paper's ``median [q25:q75]`` layout), percentile bootstrap confidence
intervals, the one-sided Wilcoxon signed-rank test and the Holm-Bonferroni
correction used by Jukić et al. (2022, Table 2) to mark significant agreement
differences.

These functions run on the host: they summarise a handful of per-seed numbers,
so they take array-likes, return NumPy / Python values and use ``scipy.stats``
for the Wilcoxon null distribution. :func:`median_iqr` also works on traced JAX
arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

__all__ = [
    "MedianIQR",
    "WilcoxonResult",
    "bootstrap_ci",
    "bootstrap_over_rows",
    "format_median_iqr",
    "holm_bonferroni",
    "iqr_above_baseline",
    "mean_with_ci",
    "median_iqr",
    "t_test_greater",
    "wilcoxon_greater",
]


class MedianIQR(NamedTuple):
    """Median and quartiles of a sample (linear interpolation, NumPy's default).

    Attributes:
        median: 50th percentile, shape = input shape without ``axis``.
        q25: 25th percentile, same shape.
        q75: 75th percentile, same shape.
    """

    median: jnp.ndarray
    q25: jnp.ndarray
    q75: jnp.ndarray


class WilcoxonResult(NamedTuple):
    """Result of :func:`wilcoxon_greater`.

    Attributes:
        statistic: sum of the ranks of the positive differences (float).
        p_value: one-sided p-value for ``median(x - y) > 0`` (float in [0, 1]).
        num_nonzero: number of non-zero paired differences the test used (int).
    """

    statistic: float
    p_value: float
    num_nonzero: int


def median_iqr(values: ArrayLike, *, axis: int | None = None) -> MedianIQR:
    """Median and inter-quartile range (25th and 75th percentiles).

    Percentiles use linear interpolation between order statistics
    (``numpy.percentile``'s default "linear" method), so results match NumPy.

    Args:
        values: array of any shape; must contain no NaN.
        axis: axis to summarise over; ``None`` summarises the flattened array.

    Returns:
        :class:`MedianIQR` of ``jax.Array`` values with ``axis`` removed.

    Raises:
        ValueError: if ``values`` (or the reduced axis) is empty.

    Example:
        >>> s = median_iqr([1.0, 2.0, 3.0, 4.0])
        >>> float(s.median), float(s.q25), float(s.q75)
        (2.5, 1.75, 3.25)
    """
    x = jnp.asarray(values, dtype=jnp.result_type(float))
    size = x.size if axis is None else x.shape[axis]
    if size == 0:
        raise ValueError(f"median_iqr needs at least one value; got shape {x.shape} "
                         f"(axis={axis}).")
    q = jnp.percentile(x, jnp.asarray([50.0, 25.0, 75.0]), axis=axis)  # (3, ...)
    return MedianIQR(median=q[0], q25=q[1], q75=q[2])


def format_median_iqr(values: ArrayLike, *, digits: int = 2, scale: float = 1.0) -> str:
    """Format a sample as ``median [q25:q75]`` (the SMaT paper's Table 1 layout).

    Args:
        values: 1-D sample (e.g. one simulability value per seed).
        digits: decimals to print.
        scale: multiply values first (``100.0`` prints accuracies as percentages).

    Returns:
        A string such as ``"81.20 [80.10:82.00]"``.

    Raises:
        ValueError: if ``values`` is empty or ``digits`` is negative.

    Example:
        >>> format_median_iqr([0.8, 0.9, 1.0], scale=100.0, digits=1)
        '90.0 [85.0:95.0]'
    """
    if digits < 0:
        raise ValueError(f"digits must be >= 0; got {digits}.")
    s = median_iqr(np.asarray(values, dtype=np.float64) * scale)
    return f"{float(s.median):.{digits}f} [{float(s.q25):.{digits}f}:{float(s.q75):.{digits}f}]"


def iqr_above_baseline(values: ArrayLike, baseline: ArrayLike) -> bool:
    """Whether a sample's IQR lies entirely above a baseline sample's IQR.

    The marking rule of the SMaT paper's Table 1: a cell is marked when its
    25th percentile is strictly greater than the baseline's 75th percentile,
    :math:`q_{25}(x) > q_{75}(b)`.

    Args:
        values: 1-D sample of the cell (e.g. simulability per seed).
        baseline: 1-D sample of the no-explainer baseline.

    Returns:
        ``True`` if the IQRs are disjoint with ``values`` above.

    Raises:
        ValueError: if either sample is empty.

    Example:
        >>> iqr_above_baseline([0.9, 0.91, 0.92], [0.8, 0.85, 0.88])
        True
    """
    return bool(median_iqr(values).q25 > median_iqr(baseline).q75)


def bootstrap_ci(
    values: ArrayLike,
    *,
    statistic: Callable[..., np.ndarray] = np.mean,
    num_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of a statistic of a 1-D sample.

    Draws ``num_resamples`` resamples of size ``n`` with replacement (one
    ``numpy.random.default_rng(seed)`` draw of shape ``(num_resamples, n)``),
    evaluates ``statistic(resamples, axis=-1)`` and returns the
    :math:`(1-c)/2` and :math:`(1+c)/2` percentiles of the bootstrap
    distribution (Efron & Tibshirani, 1993, percentile method).

    Args:
        values: 1-D sample of length ``n >= 1``; no NaN.
        statistic: NumPy reduction accepting ``axis`` (``np.mean``, ``np.median``).
        num_resamples: number of bootstrap resamples (>= 1).
        confidence: coverage ``c`` in (0, 1).
        seed: seed of the resampling RNG (results are deterministic given it).

    Returns:
        ``(low, high)`` floats.

    Raises:
        ValueError: for an empty or non-1-D sample, NaN values, ``confidence``
            outside (0, 1) or ``num_resamples < 1``.

    Example:
        >>> low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0], seed=0)
        >>> bool(low <= 2.5 <= high)
        True
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"bootstrap_ci expects a non-empty 1-D sample; got shape {x.shape}.")
    if np.isnan(x).any():
        raise ValueError("bootstrap_ci got NaN values; remove or count them before summarising.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}.")
    if num_resamples < 1:
        raise ValueError(f"num_resamples must be >= 1; got {num_resamples}.")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(num_resamples, x.size))
    dist = np.asarray(statistic(x[idx], axis=-1), dtype=np.float64)  # (num_resamples,)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(dist, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return float(low), float(high)


def bootstrap_over_rows(agreement: dict[str, ArrayLike], *,
                        pairs: list[tuple[str, str]] | None = None, num_resamples: int = 500,
                        sample_ratio: float = 0.5, confidence: float = 0.95,
                        seed: int = 0) -> dict[str, dict[str, float]]:
    """Intervals of each setting's simulability over the test rows, as the SMaT authors'
    ``bootstrap_eval.py`` draws them: each resample takes ``sample_ratio`` of the N rows
    with replacement, the same rows for every setting, and scores a setting by its
    students' mean accuracy on them (the mean over seeds); the interval is the
    percentile interval of those scores. Each of `pairs` also gets the interval of the
    difference of its two settings' scores on the same resamples.

    Args:
      agreement: setting -> (seeds, N) whether each student agreed with the teacher on
        each test row (the rows in the same order for every setting).
      pairs: (a, b) settings whose difference a - b is bootstrapped (default: every pair
        in the order given).
      num_resamples: bootstrap resamples (the authors': 500).
      sample_ratio: rows per resample, as a share of N (the authors': 0.5).
      confidence: coverage of the intervals.
      seed: seed of the resampling RNG.

    Returns:
      ``{setting: {"mean", "low", "high"}}`` and ``{"a - b": {"mean", "low", "high"}}``
      for each pair.

    Raises:
      ValueError: settings with different numbers of rows, or no rows.
    """
    scores = {name: np.asarray(rows, np.float64) for name, rows in agreement.items()}
    sizes = {rows.shape[-1] for rows in scores.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise ValueError(f"every setting needs agreement on the same test rows; got row "
                         f"counts {sorted(sizes)}")
    n = sizes.pop()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(num_resamples, max(1, int(n * sample_ratio))))
    drawn = {name: rows.reshape(-1, n)[:, idx].mean(axis=(0, 2))  # (num_resamples,)
             for name, rows in scores.items()}
    alpha = 100 * (1 - confidence) / 2

    def interval(values: np.ndarray, mean: float) -> dict[str, float]:
        low, high = np.percentile(values, [alpha, 100 - alpha])
        return {"mean": mean, "low": float(low), "high": float(high)}

    out = {name: interval(drawn[name], float(scores[name].mean())) for name in scores}
    names = list(scores)
    if pairs is None:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    for a, b in pairs:
        out[f"{a} - {b}"] = interval(drawn[a] - drawn[b],
                                     float(scores[a].mean() - scores[b].mean()))
    return out


def mean_with_ci(values: ArrayLike, *, seed: int = 0) -> dict[str, float]:
    """The mean of a 1-D sample with its :func:`bootstrap_ci` 95% interval, as the
    ``{"mean", "low", "high"}`` cell every report and table reads; all three NaN for an
    empty sample (no row was valid), so a report can still be written.

    Raises:
        ValueError: as :func:`bootstrap_ci` (NaN values, a sample that is not 1-D).

    Example:
        >>> cell = mean_with_ci([1.0, 2.0, 3.0, 4.0])
        >>> cell["mean"], bool(cell["low"] <= 2.5 <= cell["high"])
        (2.5, True)
    """
    x = np.asarray(values)  # the mean in the sample's own dtype
    if x.size == 0:
        return {"mean": float("nan"), "low": float("nan"), "high": float("nan")}
    low, high = bootstrap_ci(x, seed=seed)
    return {"mean": float(np.mean(x)), "low": low, "high": high}


def wilcoxon_greater(x: ArrayLike, y: ArrayLike | None = None) -> WilcoxonResult:
    """One-sided Wilcoxon signed-rank test of ``median(x - y) > 0``.

    With paired differences :math:`d_i = x_i - y_i`, zero differences are
    dropped (Wilcoxon's original treatment), the rest are ranked by
    :math:`|d_i|` with average ranks for ties, and the statistic is
    :math:`W^+ = \\sum_{d_i > 0} \\mathrm{rank}(|d_i|)`. The p-value is
    :math:`P(W^+ \\geq w^+)` under the null, computed by ``scipy.stats.wilcoxon``
    (exact distribution for small samples, normal approximation otherwise).
    When every difference is zero there is no evidence either way and the
    result is ``p_value=1.0`` with ``statistic=0.0``. This is the test Jukić et
    al. (2022) use to mark agreement values (Table 2).

    Args:
        x: 1-D sample (e.g. per-seed agreement of the candidate).
        y: 1-D sample of the same length, paired with ``x``; ``None`` tests
            ``median(x) > 0``.

    Returns:
        :class:`WilcoxonResult`.

    Raises:
        ValueError: for non-1-D or empty inputs, mismatched lengths or NaN.

    Example:
        >>> r = wilcoxon_greater([1.0, 2.0, 3.0, 4.0, 5.0], [0.0] * 5)
        >>> r.p_value
        0.03125
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.zeros_like(a) if y is None else np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"wilcoxon_greater expects a non-empty 1-D x; got shape {a.shape}.")
    if b.shape != a.shape:
        raise ValueError(f"x and y must be paired samples of the same shape; got {a.shape} "
                         f"and {b.shape}.")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("wilcoxon_greater got NaN values; drop the pairs before testing.")
    d = a - b
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return WilcoxonResult(statistic=0.0, p_value=1.0, num_nonzero=0)
    from scipy import stats  # imported on use: scipy.stats adds 1.2 s to every command's start

    res = stats.wilcoxon(d, alternative="greater", zero_method="wilcox")
    return WilcoxonResult(statistic=float(res.statistic), p_value=float(res.pvalue),
                          num_nonzero=nonzero)


def t_test_greater(x: ArrayLike, y: ArrayLike, *, paired: bool) -> float:
    """One-sided p-value of a t-test that the mean of `x` exceeds that of `y`.

    For comparisons of training settings over a handful of trained models (seeds): rank
    tests cannot reach significance there (a Wilcoxon test over 5 pairs never goes below
    p = 1/32, before any correction for multiple tests). ``paired``: the i-th entries
    belong together (the same seed) and the test is on their differences
    (``scipy.stats.ttest_rel``); otherwise Welch's test of two independent samples
    (``scipy.stats.ttest_ind``, unequal variances). When the differences (or both samples)
    have no spread, the p-value is 0 if every difference favours `x` and 1 otherwise.

    Raises:
        ValueError: samples that are not 1-D with at least two values, paired samples of
            different lengths, or NaN.

    Example:
        >>> round(t_test_greater([0.5, 0.6, 0.7], [0.4, 0.4, 0.6], paired=True), 3)
        0.029
    """
    a, b = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if a.ndim != 1 or b.ndim != 1 or a.size < 2 or b.size < 2:
        raise ValueError(f"t_test_greater needs two 1-D samples of at least 2 values; got "
                         f"shapes {a.shape} and {b.shape}.")
    if paired and a.shape != b.shape:
        raise ValueError(f"paired samples must have the same length; got {a.size} and {b.size}.")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("t_test_greater got NaN values; drop them before testing.")
    from scipy import stats  # imported on use (see wilcoxon_greater)

    if paired:
        difference = a - b
        if np.ptp(difference) == 0:
            return 0.0 if difference[0] > 0 else 1.0
        return float(stats.ttest_rel(a, b, alternative="greater").pvalue)
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return 0.0 if a[0] > b[0] else 1.0
    return float(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)


def holm_bonferroni(p_values: ArrayLike, *, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Holm-Bonferroni step-down correction for a family of ``m`` tests.

    Sort the p-values :math:`p_{(1)} \\le \\dots \\le p_{(m)}`; the adjusted
    values are :math:`\\tilde p_{(i)} = \\max_{j \\le i} \\min(1, (m - j + 1)\\,
    p_{(j)})` and hypothesis :math:`(i)` is rejected iff :math:`\\tilde p_{(i)}
    \\le \\alpha` (Holm, 1979). This controls the family-wise error rate at
    ``alpha``.

    Args:
        p_values: 1-D array of ``m >= 1`` p-values in [0, 1].
        alpha: family-wise error rate in (0, 1).

    Returns:
        ``(reject, adjusted)``: bool array and float array of shape ``(m,)`` in the
        input order.

    Raises:
        ValueError: for empty / non-1-D input, values outside [0, 1] or NaN, or
            ``alpha`` outside (0, 1).

    Example:
        >>> reject, adj = holm_bonferroni([0.01, 0.04, 0.03])
        >>> reject.tolist(), [round(float(v), 2) for v in adj]
        ([True, False, False], [0.03, 0.06, 0.06])
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"holm_bonferroni expects a non-empty 1-D array; got shape {p.shape}.")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError(f"p-values must lie in [0, 1]; got {p.tolist()}.")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}.")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])  # (m,) in sorted order
    adjusted_sorted = np.maximum.accumulate(scaled)
    adjusted = np.empty_like(adjusted_sorted)
    adjusted[order] = adjusted_sorted
    return adjusted <= alpha, adjusted
