"""Tests for smat.explainers.normalizers: sparsemax, entmax15, softmax, identity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jax.test_util import check_grads

from smat.explainers import normalizers
from smat.explainers.normalizers import NORMALIZERS, entmax15, get_normalizer, sparsemax


def simplex_projection_reference(z: np.ndarray) -> np.ndarray:
    """Held/Duchi sort-based Euclidean projection onto the simplex (float64 numpy)."""
    u = np.sort(z)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, z.size + 1)
    rho = np.nonzero(u + (1 - css) / k > 0)[0][-1]
    tau = (css[rho] - 1) / (rho + 1)
    return np.maximum(z - tau, 0)


def entmax15_bisection_reference(z: np.ndarray, iters: int = 200) -> np.ndarray:
    """1.5-entmax by bisection on tau: sum_i max(z_i / 2 - tau, 0)^2 = 1 (float64)."""
    x = z / 2
    lo, hi = x.max() - 1.0, x.max()  # mass(lo) >= 1 >= mass(hi) = 0
    for _ in range(iters):
        mid = (lo + hi) / 2
        if np.sum(np.maximum(x - mid, 0) ** 2) >= 1:
            lo = mid
        else:
            hi = mid
    p = np.maximum(x - (lo + hi) / 2, 0) ** 2
    return p / p.sum()


# One compiled program per vector length (eagerly, each of the normalizer's operations
# compiled on its own for every length hypothesis draws).
jitted_sparsemax, jitted_entmax15 = jax.jit(sparsemax), jax.jit(entmax15)

vectors = hnp.arrays(
    np.float32,
    st.integers(min_value=1, max_value=24),
    elements=st.floats(-5, 5, width=32),
)


@settings(max_examples=60, deadline=None)
@given(vectors)
def test_sparsemax_equals_simplex_projection(z):
    got = np.asarray(jitted_sparsemax(z))
    want = simplex_projection_reference(z.astype(np.float64))
    np.testing.assert_allclose(got, want, atol=2e-6)
    assert got.min() >= 0
    # float32 cumulative sums: error grows with the size and magnitude of z.
    np.testing.assert_allclose(got.sum(), 1.0, atol=1e-6 * z.size * (1 + np.abs(z).max()))


@settings(max_examples=60, deadline=None)
@given(vectors)
# Found by hypothesis: one-pass cumulative variances cancel digits here in float32.
@example(np.array([-2.0] + [-3.5458477] * 15, np.float32))
def test_entmax15_matches_bisection(z):
    got = np.asarray(jitted_entmax15(z))
    want = entmax15_bisection_reference(z.astype(np.float64))
    np.testing.assert_allclose(got, want, atol=5e-6)


def test_sparsemax_is_the_closest_simplex_point():
    z = np.array([0.7, 0.1, 0.4, -0.3], np.float32)
    p = np.asarray(sparsemax(z))
    rng = np.random.default_rng(0)
    others = rng.dirichlet(np.ones(4), size=500)
    assert np.all(np.linalg.norm(others - z, axis=1) >= np.linalg.norm(p - z) - 1e-6)


def test_sparsemax_and_entmax_are_sparse_softmax_is_not():
    z = jnp.array([3.0, 0.0, -3.0])
    assert float(sparsemax(z)[2]) == 0.0
    assert float(entmax15(z)[2]) == 0.0
    assert float(normalizers.softmax(z)[2]) > 0.0


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_check_grads(name):
    fn = get_normalizer(name)
    # Distinct values, away from the sparsity kinks.
    z = jnp.array([0.9, 0.2, -0.4, 0.55, -1.3], jnp.float32)
    check_grads(fn, (z,), order=1, modes=("fwd", "rev"), eps=1e-3, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", sorted(NORMALIZERS))
def test_batched_jit_vmap_and_no_retrace(name):
    fn = get_normalizer(name)
    z = jax.random.normal(jax.random.key(1), (3, 4, 6))
    traces = []

    def counted(v):
        traces.append(1)
        return fn(v)

    jitted = jax.jit(counted)
    batched = jitted(z)
    assert batched.shape == z.shape
    per_row = jax.vmap(jax.vmap(fn))(z)
    np.testing.assert_allclose(batched, per_row, atol=1e-6)
    jitted(z + 1.0)
    assert len(traces) == 1
    if name != "identity":
        np.testing.assert_allclose(batched.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15", "softmax"])
def test_equal_inputs_give_uniform(name):
    np.testing.assert_allclose(get_normalizer(name)(jnp.full((12,), 1 / 12)), 1 / 12, rtol=1e-6)


def test_unknown_normalizer_lists_choices():
    with pytest.raises(ValueError, match="entmax15.*sparsemax|sparsemax.*entmax15"):
        get_normalizer("sparsemax2")


def test_scalar_input_is_rejected():
    with pytest.raises(ValueError, match="at least one axis"):
        sparsemax(jnp.float32(1.0))
