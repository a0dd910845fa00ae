"""Tests for smat.evaluation.agreement: hand cases, exclusions, scipy parity, matrices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from smat.evaluation import agreement as A

CORRELATIONS = {
    "pearson": (A.pearson_r, lambda x, y: stats.pearsonr(x, y).statistic),
    "kendall": (A.kendall_tau_b, lambda x, y: stats.kendalltau(x, y, variant="b").statistic),
    "spearman": (A.spearman_rho, lambda x, y: stats.spearmanr(x, y).statistic),
}


def _row(*values):
    return jnp.asarray([values], jnp.float32)


def test_hand_computed_values():
    ones = jnp.ones((1, 4), bool)
    a, b = _row(1, 2, 3, 4), _row(1, 3, 2, 4)
    # 6 pairs, 5 concordant, 1 discordant, no ties.
    assert float(A.kendall_tau_b(a, b, ones).values[0]) == pytest.approx(4 / 6)
    # Spearman: 1 - 6 * sum d^2 / (n (n^2 - 1)) = 1 - 6 * 2 / 60.
    assert float(A.spearman_rho(a, b, ones).values[0]) == pytest.approx(0.8)
    assert float(A.pearson_r(a, b, ones).values[0]) == pytest.approx(0.8)
    assert float(A.pearson_r(a, -a, ones).values[0]) == pytest.approx(-1.0)


def test_ties_tau_b_and_average_ranks():
    ones = jnp.ones((1, 4), bool)
    a, b = _row(1, 1, 2, 3), _row(1, 2, 2, 3)
    # Pairs: (0,1) tie a; (0,2) C; (0,3) C; (1,2) tie b; (1,3) C; (2,3) C.
    # n0 = 6, n1 = n2 = 1: tau_b = 4 / sqrt(5 * 5) = 0.8.
    assert float(A.kendall_tau_b(a, b, ones).values[0]) == pytest.approx(0.8)
    # Average ranks: a -> (1.5, 1.5, 3, 4), b -> (1, 2.5, 2.5, 4).
    expected = stats.pearsonr([1.5, 1.5, 3, 4], [1, 2.5, 2.5, 4]).statistic
    assert float(A.spearman_rho(a, b, ones).values[0]) == pytest.approx(expected, abs=1e-6)


def test_padding_is_ignored():
    a = jnp.asarray([[1.0, 2.0, 3.0, 100.0, -5.0]])
    b = jnp.asarray([[1.0, 2.0, 3.0, -100.0, 9.0]])
    mask = jnp.asarray([[1, 1, 1, 0, 0]])
    for name, (fn, _) in CORRELATIONS.items():
        c = fn(a, b, mask)
        assert bool(c.valid[0]), name
        assert float(c.values[0]) == pytest.approx(1.0), name


@pytest.mark.parametrize("name", sorted(CORRELATIONS))
def test_exclusions_are_counted_never_nan(name):
    fn = CORRELATIONS[name][0]
    a = jnp.asarray([[1.0, 2.0, 3.0, 4.0],   # valid
                     [1.0, 2.0, 0.0, 0.0],   # two tokens -> too short
                     [1.0, 1.0, 1.0, 1.0],   # constant a
                     [5.0, 0.0, 0.0, 0.0],   # single token
                     [0.0, 0.0, 0.0, 0.0]])  # fully masked
    b = jnp.asarray([[2.0, 1.0, 4.0, 3.0],
                     [2.0, 1.0, 0.0, 0.0],
                     [1.0, 2.0, 3.0, 4.0],
                     [5.0, 0.0, 0.0, 0.0],
                     [0.0, 0.0, 0.0, 0.0]])
    mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0]])
    c = fn(a, b, mask)
    assert c.valid.tolist() == [True, False, False, False, False]
    assert np.all(np.isfinite(np.asarray(c.values)))
    assert c.values[1:].tolist() == [0.0] * 4
    assert int(c.num_excluded()) == 4
    assert float(c.mean()) == pytest.approx(float(c.values[0]))
    v = A.correlation_validity(a, b, mask)
    assert v.too_short.tolist() == [False, True, False, True, True]
    assert v.constant.tolist() == [False, False, True, False, False]


def test_constant_detection_is_exact_for_non_representable_values():
    # 0.1 * 3 / 3 != 0.1 in floating point; the constant check must still fire.
    a = jnp.full((1, 3), 0.1)
    v = A.correlation_validity(a, _row(1, 2, 3), jnp.ones((1, 3), bool))
    assert v.constant.tolist() == [True]


def test_all_invalid_mean_is_zero():
    c = A.pearson_r(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.ones((2, 3), bool))
    assert float(c.mean()) == 0.0 and int(c.num_excluded()) == 2


@st.composite
def score_batches(draw):
    # One fixed shape keeps recompilation out of the loop; the random mask varies lengths.
    batch, seq = 4, 9
    grid = st.integers(-3, 3)  # few distinct values -> many ties
    fine = st.integers(-1000, 1000).map(lambda v: v / 100)
    values = draw(st.sampled_from([grid, fine]))
    a = np.asarray(draw(st.lists(values, min_size=batch * seq, max_size=batch * seq)), np.float32)
    b = np.asarray(draw(st.lists(values, min_size=batch * seq, max_size=batch * seq)), np.float32)
    mask = np.asarray(draw(st.lists(st.booleans(), min_size=batch * seq, max_size=batch * seq)))
    shape = (batch, seq)
    return a.reshape(shape), b.reshape(shape), mask.reshape(shape)


@pytest.mark.parametrize("name", sorted(CORRELATIONS))
@given(data=score_batches())
@settings(max_examples=40, deadline=None)
def test_matches_scipy(name, data):
    fn, ref = CORRELATIONS[name]
    a, b, mask = data
    c = fn(a, b, mask)
    for i in range(a.shape[0]):
        x, y = a[i][mask[i]], b[i][mask[i]]
        defined = x.size >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0
        assert bool(c.valid[i]) == defined
        if defined:
            assert float(c.values[i]) == pytest.approx(ref(x.astype(float), y.astype(float)),
                                                       abs=2e-5)
        else:
            assert float(c.values[i]) == 0.0


@pytest.mark.parametrize("name", ["kendall", "spearman"])
def test_chunking_does_not_change_results(name):
    fn = CORRELATIONS[name][0]
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, (2, 10, 7)).astype(np.float32)
    mask = rng.random((10, 7)) < 0.8
    whole = fn(a, b, mask, batch_size=None)
    chunked = fn(a, b, mask, batch_size=3)
    np.testing.assert_allclose(whole.values, chunked.values, atol=1e-6)
    np.testing.assert_array_equal(whole.valid, chunked.valid)


def test_jit_and_vmap_over_seeds():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3, 5, 6)).astype(np.float32)  # (seeds, batch, seq)
    mask = np.ones((3, 5, 6), bool)
    stacked = jax.jit(jax.vmap(lambda x, y, m: A.pearson_r(x, y, m).values))(a, b, mask)
    for s in range(3):
        np.testing.assert_allclose(stacked[s], A.pearson_r(a[s], b[s], mask[s]).values,
                                   rtol=1e-5, atol=1e-6)


def test_shape_errors_name_the_input():
    with pytest.raises(ValueError, match="mask has shape"):
        A.pearson_r(jnp.zeros((2, 3)), jnp.zeros((2, 3)), jnp.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"b must have shape \(batch, seq\)"):
        A.kendall_tau_b(jnp.zeros((2, 3)), jnp.zeros((6,)), jnp.zeros((2, 3)))


def test_top_k_overlap_hand_computed():
    a = jnp.asarray([[3.0, 2.0, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 0.0, 0.0]])
    b = jnp.asarray([[3.0, 0.0, 2.0, 1.0], [4.0, 3.0, 2.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0]])
    o = A.top_k_overlap(a, b, mask, k=2)
    assert o.values.tolist() == [0.5, 0.0, 1.0]  # k clipped to the single valid token
    assert o.valid.tolist() == [True, True, True]
    none = A.top_k_overlap(a, b, jnp.zeros((3, 4), bool), k=2)
    assert none.valid.tolist() == [False] * 3 and none.values.tolist() == [0.0] * 3


@given(data=score_batches(), k=st.integers(1, 9))
@settings(max_examples=40, deadline=None)
def test_top_k_overlap_matches_sets(data, k):
    a, b, mask = data
    o = A.top_k_overlap(a, b, mask, k=k)
    for i in range(a.shape[0]):
        idx = np.flatnonzero(mask[i])
        if idx.size == 0:
            assert not bool(o.valid[i])
            continue
        kk = min(k, idx.size)
        top = [set(idx[np.argsort(-x[idx], kind="stable")[:kk]]) for x in (a[i], b[i])]
        assert float(o.values[i]) == pytest.approx(len(top[0] & top[1]) / kk)


def test_aggregate_over_seeds():
    values = jnp.asarray([[1.0, 0.0, 0.5], [0.2, 0.4, 0.0], [9.0, 9.0, 9.0]])
    valid = jnp.asarray([[True, False, True], [True, True, False], [False, False, False]])
    agg = A.aggregate_over_seeds(values, valid)
    np.testing.assert_allclose(agg.per_seed, [0.75, 0.3, 0.0], atol=1e-6)
    assert agg.num_valid.tolist() == [2, 2, 0] and agg.num_excluded.tolist() == [1, 1, 3]
    assert float(agg.mean) == pytest.approx(0.525)  # seed without valid instances left out
    one = A.aggregate_over_seeds(values[0], valid[0])
    assert float(one.mean) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="share"):
        A.aggregate_over_seeds(values, valid[0])


def test_agreement_matrix_hand_computed_and_mean_over_pairs():
    x = jnp.asarray([[1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]])
    mask = jnp.ones((2, 4), bool)
    m = A.agreement_matrix({"a": x, "b": 2 * x + 1, "c": -x}, mask, metric="spearman")
    np.testing.assert_allclose(m.values, [[1, 1, -1], [1, 1, -1], [-1, -1, 1]], atol=1e-6)
    assert m.names == ("a", "b", "c")
    assert m.num_valid[0, 1] == 1 and m.num_excluded[0, 1] == 1  # the constant row
    assert m.mean_over_pairs() == pytest.approx(-1 / 3)


def test_agreement_matrix_with_seeds_equals_manual_aggregate():
    rng = np.random.default_rng(2)
    scores = {n: rng.normal(size=(3, 4, 6)).astype(np.float32) for n in ("ig", "grad", "attn")}
    mask = rng.random((4, 6)) < 0.9
    m = A.agreement_matrix(scores, mask, metric="kendall")
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        a, b = scores[m.names[i]], scores[m.names[j]]
        per_seed = [A.kendall_tau_b(a[s], b[s], mask).mean() for s in range(3)]
        assert m.values[i, j] == pytest.approx(float(np.mean(per_seed)), abs=1e-6)
        assert m.values[j, i] == m.values[i, j]
        np.testing.assert_allclose(m.per_seed[i, j], per_seed, atol=1e-6)


def test_agreement_matrix_errors():
    x = jnp.zeros((2, 3))
    with pytest.raises(ValueError, match="Unknown agreement metric 'tau'"):
        A.agreement_matrix({"a": x, "b": x}, x, metric="tau")
    with pytest.raises(ValueError, match="at least two explainers"):
        A.agreement_matrix({"a": x}, x)
    with pytest.raises(ValueError, match=r"scores\['b'\] has shape"):
        A.agreement_matrix({"a": x, "b": jnp.zeros((2, 4))}, x)
    with pytest.raises(ValueError, match="mask has shape"):
        A.agreement_matrix({"a": x, "b": x}, jnp.zeros((3, 3)))


def test_plot_agreement_matrix(tmp_path):
    x = jnp.asarray([[1.0, 2.0, 3.0, 4.0]])
    m = A.agreement_matrix({"a": x, "b": -x}, jnp.ones((1, 4), bool))
    path = tmp_path / "heat.png"
    fig = A.plot_agreement_matrix(m, path=path)
    assert path.stat().st_size > 0
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["1.00", "-1.00", "-1.00", "1.00"]
    assert fig.axes[0].get_title() == "pearson agreement"


def test_docstring_examples():
    import doctest

    import jax
    import jax.numpy as jnp

    result = doctest.testmod(A, extraglobs={"jax": jax, "jnp": jnp})
    assert result.attempted > 0 and result.failed == 0


def test_jukic_figure1_toy_example():
    """Jukić et al. (2022) Figure 1: two explanations of "The old Japanese movie Rashomon is
    great." that rank the six unimportant tokens in reverse but agree on "great"."""
    a = np.array([[.01, .02, .03, .04, .05, .06, 1.00]])
    b = np.array([[.06, .05, .04, .03, .02, .01, .80]])
    mask = np.ones((1, 7), bool)
    assert float(A.kendall_tau_b(a, b, mask).values[0]) == pytest.approx(-0.4286, abs=1e-4)
    assert float(A.pearson_r(a, b, mask).values[0]) == pytest.approx(0.994, abs=1e-3)
