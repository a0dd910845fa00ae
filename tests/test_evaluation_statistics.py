"""Tests for smat.evaluation.statistics: hand-computed cases and scipy parity."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from smat.evaluation import statistics as S

samples = st.lists(st.integers(-20, 20).map(lambda v: v / 4), min_size=1, max_size=30)


def test_median_iqr_hand_computed():
    s = S.median_iqr([1.0, 2.0, 3.0, 4.0])
    assert (float(s.median), float(s.q25), float(s.q75)) == (2.5, 1.75, 3.25)


def test_median_iqr_single_value_and_axis():
    s = S.median_iqr([7.0])
    assert float(s.median) == float(s.q25) == float(s.q75) == 7.0
    s = S.median_iqr(np.array([[1.0, 3.0], [5.0, 7.0]]), axis=1)
    np.testing.assert_allclose(s.median, [2.0, 6.0])
    np.testing.assert_allclose(s.q25, [1.5, 5.5])


@given(samples)
@settings(max_examples=50, deadline=None)
def test_median_iqr_matches_numpy(values):
    s = S.median_iqr(values)
    np.testing.assert_allclose([s.median, s.q25, s.q75],
                               np.percentile(values, [50, 25, 75]), rtol=1e-5, atol=1e-5)


def test_median_iqr_rejects_empty():
    with pytest.raises(ValueError, match="at least one value"):
        S.median_iqr([])


def test_format_median_iqr():
    assert S.format_median_iqr([0.8, 0.9, 1.0], scale=100.0, digits=1) == "90.0 [85.0:95.0]"
    assert S.format_median_iqr([1.0, 2.0, 3.0, 4.0]) == "2.50 [1.75:3.25]"
    with pytest.raises(ValueError, match="digits"):
        S.format_median_iqr([1.0], digits=-1)


def test_iqr_above_baseline():
    assert S.iqr_above_baseline([0.9, 0.91, 0.92], [0.8, 0.85, 0.88])
    # Overlapping IQRs: q25 of values (0.86) is below q75 of the baseline (0.87).
    assert not S.iqr_above_baseline([0.84, 0.88, 0.92], [0.8, 0.85, 0.89])
    # Touching is not above.
    assert not S.iqr_above_baseline([1.0, 1.0], [1.0, 1.0])


def test_bootstrap_ci_deterministic_and_contains_mean():
    x = np.random.default_rng(1).normal(size=40)
    a = S.bootstrap_ci(x, seed=3)
    b = S.bootstrap_ci(x, seed=3)
    assert a == b
    assert a[0] < x.mean() < a[1]
    assert S.bootstrap_ci(x, seed=4) != a
    # Wider coverage gives a wider interval; more data a narrower one.
    wide = S.bootstrap_ci(x, confidence=0.99, seed=3)
    assert wide[0] <= a[0] and wide[1] >= a[1]
    big = np.random.default_rng(1).normal(size=4000)
    lo, hi = S.bootstrap_ci(big, seed=3, num_resamples=2000)
    assert hi - lo < (a[1] - a[0]) / 3


def test_bootstrap_ci_constant_and_statistic():
    assert S.bootstrap_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)
    lo, hi = S.bootstrap_ci([0.0, 0.0, 0.0, 10.0], statistic=np.median, seed=0)
    assert lo == 0.0 and hi <= 10.0


def test_bootstrap_ci_close_to_scipy_percentile():
    x = np.random.default_rng(0).exponential(size=60)
    ours = S.bootstrap_ci(x, seed=0, num_resamples=20000)
    ref = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=20000,
                          random_state=1).confidence_interval
    np.testing.assert_allclose(ours, (ref.low, ref.high), atol=0.03)


@pytest.mark.parametrize("kwargs,match", [
    ({"values": []}, "non-empty 1-D"),
    ({"values": [[1.0]]}, "non-empty 1-D"),
    ({"values": [1.0, np.nan]}, "NaN"),
    ({"values": [1.0], "confidence": 1.0}, "confidence"),
    ({"values": [1.0], "num_resamples": 0}, "num_resamples"),
])
def test_bootstrap_ci_errors(kwargs, match):
    values = kwargs.pop("values")
    with pytest.raises(ValueError, match=match):
        S.bootstrap_ci(values, **kwargs)


def test_mean_with_ci_is_the_mean_and_its_bootstrap_interval():
    x = np.random.default_rng(2).normal(size=30).astype(np.float32)
    cell = S.mean_with_ci(x)
    assert cell["mean"] == float(np.mean(x))  # in the sample's own dtype
    assert (cell["low"], cell["high"]) == S.bootstrap_ci(x)
    # no valid row: a cell of NaN, not an error, so the report is still written
    assert all(np.isnan(v) for v in S.mean_with_ci(np.zeros(0)).values())


def test_wilcoxon_hand_computed():
    # All five differences positive: exact one-sided p = 1 / 2^5.
    r = S.wilcoxon_greater([1.0, 2.0, 3.0, 4.0, 5.0], [0.0] * 5)
    assert r.statistic == 15.0 and r.p_value == pytest.approx(1 / 32) and r.num_nonzero == 5
    # All negative: the smallest W+ has p = 1.
    assert S.wilcoxon_greater([0.0] * 5, [1.0, 2.0, 3.0, 4.0, 5.0]).p_value == pytest.approx(1.0)


def test_wilcoxon_all_zero_differences_is_no_evidence():
    r = S.wilcoxon_greater([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert r == S.WilcoxonResult(statistic=0.0, p_value=1.0, num_nonzero=0)


def test_wilcoxon_one_sample_form():
    assert S.wilcoxon_greater([1.0, 2.0, 3.0]).p_value == pytest.approx(1 / 8)


@given(st.lists(st.tuples(st.integers(-8, 8), st.integers(-8, 8)), min_size=1, max_size=10))
@settings(max_examples=60, deadline=None)
def test_wilcoxon_matches_scipy(pairs):
    x = np.array([p[0] for p in pairs], float)
    y = np.array([p[1] for p in pairs], float)
    r = S.wilcoxon_greater(x, y)
    if np.all(x == y):
        assert r.p_value == 1.0
        return
    ref = stats.wilcoxon(x, y, alternative="greater", zero_method="wilcox")
    assert r.statistic == pytest.approx(ref.statistic)
    assert r.p_value == pytest.approx(ref.pvalue)


def test_wilcoxon_large_sample_matches_scipy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.3, 1.0, (2, 80))
    r = S.wilcoxon_greater(x, y)
    ref = stats.wilcoxon(x, y, alternative="greater")
    assert r.p_value == pytest.approx(ref.pvalue) and r.statistic == pytest.approx(ref.statistic)


def test_wilcoxon_errors():
    with pytest.raises(ValueError, match="same shape"):
        S.wilcoxon_greater([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        S.wilcoxon_greater([1.0, np.nan])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        S.wilcoxon_greater([])


def test_holm_hand_computed():
    reject, adjusted = S.holm_bonferroni([0.01, 0.04, 0.03])
    assert reject.tolist() == [True, False, False]
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06])
    reject, adjusted = S.holm_bonferroni([0.001, 0.2, 0.011, 0.5], alpha=0.05)
    np.testing.assert_allclose(adjusted, [0.004, 0.4, 0.033, 0.5])
    assert reject.tolist() == [True, False, True, False]


def test_holm_caps_at_one_and_single_test():
    _, adjusted = S.holm_bonferroni([0.6, 0.7])
    np.testing.assert_allclose(adjusted, [1.0, 1.0])
    reject, adjusted = S.holm_bonferroni([0.04])
    assert reject.tolist() == [True] and adjusted.tolist() == [0.04]


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_holm_properties(p):
    reject, adjusted = S.holm_bonferroni(p)
    p = np.asarray(p)
    assert np.all(adjusted >= p - 1e-12) and np.all(adjusted <= 1.0)
    assert np.all(adjusted <= np.minimum(1.0, len(p) * p) + 1e-12)  # never worse than Bonferroni
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adjusted[order]) >= -1e-12)  # monotone in p
    np.testing.assert_array_equal(reject, adjusted <= 0.05)


@pytest.mark.parametrize("p,alpha", [([], 0.05), ([1.5], 0.05), ([0.5], 0.0), ([np.nan], 0.05)])
def test_holm_errors(p, alpha):
    with pytest.raises(ValueError):
        S.holm_bonferroni(p, alpha=alpha)


def test_docstring_examples():
    import doctest

    import jax
    import jax.numpy as jnp

    result = doctest.testmod(S, extraglobs={"jax": jax, "jnp": jnp})
    assert result.attempted > 0 and result.failed == 0


def test_evaluation_package_exports_are_documented():
    import smat.evaluation as evaluation

    for name in evaluation.__all__:
        obj = getattr(evaluation, name)
        if callable(obj) or isinstance(obj, type):
            assert obj.__doc__ and obj.__doc__.strip(), name


def test_bootstrap_over_rows_is_the_authors_resampling_of_test_sentences():
    """Resamples of half the rows with replacement, shared by every setting, each scored
    by its students' mean agreement: checked against a loop that draws the same rows."""
    from smat.evaluation.statistics import bootstrap_over_rows

    rng = np.random.default_rng(1)
    agreement = {"smat": rng.random((5, 200)) < 0.9, "none": rng.random((5, 200)) < 0.8}
    out = bootstrap_over_rows(agreement, pairs=[("smat", "none")], num_resamples=300, seed=4)
    draws = np.random.default_rng(4).integers(0, 200, size=(300, 100))
    by_loop = {name: np.array([np.mean([rows[s, d].mean() for s in range(5)])
                               for d in draws]) for name, rows in agreement.items()}
    for name, rows in agreement.items():
        low, high = np.percentile(by_loop[name], [2.5, 97.5])
        assert out[name] == pytest.approx({"mean": rows.mean(), "low": low, "high": high})
    low, high = np.percentile(by_loop["smat"] - by_loop["none"], [2.5, 97.5])
    assert out["smat - none"]["low"] == pytest.approx(low)
    assert out["smat - none"]["high"] == pytest.approx(high)
    assert 0 < out["smat - none"]["low"] < out["smat - none"]["mean"] < out["smat - none"]["high"]
    # a setting agreeing everywhere has no spread; every pair by default
    same = bootstrap_over_rows({"a": np.ones((2, 10)), "b": np.ones((2, 10))})
    assert same["a"] == {"mean": 1.0, "low": 1.0, "high": 1.0}
    assert same["a - b"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    with pytest.raises(ValueError, match="the same test rows"):
        bootstrap_over_rows({"a": np.ones((2, 10)), "b": np.ones((2, 9))})
