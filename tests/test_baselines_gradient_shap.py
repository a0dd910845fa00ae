"""Tests for baselines.gradient_shap: Captum 0.9 parity with Captum's own draws, a closed
form on a linear model, seeding and bad settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from tests.test_baselines_captum_parity import TOL, B, C, E, T, rel_err
from tests.test_baselines_perturbation import setup  # noqa: F401  (the shared fixture)

S, R = 4, 3


@pytest.fixture
def numpy_global_rng():
    """Captum draws from numpy's global RNG: seed it here and put its state back after."""
    state = np.random.get_state()  # noqa: NPY002
    yield
    np.random.set_state(state)  # noqa: NPY002


def test_matches_captum_given_its_draws(setup, numpy_global_rng):  # noqa: F811
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, _ = setup
    target = np.arange(B) % C
    distribution = np.random.default_rng(5).normal(size=(R, T, E)).astype(np.float32)
    np.random.seed(7)  # noqa: NPY002
    theirs = captum_attr.GradientShap(tf).attribute(
        torch.from_numpy(x).requires_grad_(), baselines=torch.from_numpy(distribution),
        n_samples=S, stdevs=0.0, target=torch.from_numpy(target),
        additional_forward_args=(torch.from_numpy(mask),))
    # Captum's numpy draws, in its order: baseline indices, then alphas, both for the batch
    # expanded example-major (example b, sample s at b * S + s).
    np.random.seed(7)  # noqa: NPY002
    indices = np.asarray(np.random.choice(R, S * B)).reshape(B, S).T  # noqa: NPY002
    alphas = np.random.uniform(0.0, 1.0, B * S).astype(np.float32).reshape(B, S).T  # noqa: NPY002
    ours = baselines.gradient_shap(f, x, mask, baselines=distribution, n_samples=S,
                                   target=target,
                                   draws=(indices, alphas, np.zeros((S, B, T, E), np.float32)))
    assert rel_err(ours.attributions, theirs.detach().numpy()) <= TOL


def test_linear_model_with_a_zero_baseline_is_input_x_gradient():
    w = jnp.asarray(np.random.default_rng(0).normal(size=(E, 2)), jnp.float32)

    def f(x, mask):
        return jnp.einsum("bte,ec->bc", x * mask[..., None].astype(x.dtype), w)

    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, T, E)), jnp.float32)
    mask = jnp.ones((3, T), bool)
    shap = baselines.gradient_shap(f, x, mask, key=jax.random.key(0), n_samples=3, target=0)
    plain = baselines.input_x_gradient(f, x, mask, target=0)
    np.testing.assert_allclose(shap.attributions, plain.attributions, rtol=1e-5, atol=1e-6)


def test_seeded_and_bad_settings_are_named(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    run = jax.jit(lambda key: baselines.gradient_shap(f, x, mask, key=key, n_samples=3,
                                                      stdevs=0.1).attributions)
    np.testing.assert_array_equal(run(jax.random.key(1)), run(jax.random.key(1)))
    assert not np.allclose(run(jax.random.key(1)), run(jax.random.key(2)))
    key = jax.random.key(0)
    for kwargs, message in (({"n_samples": 0}, "n_samples must be an int >= 1; got 0"),
                            ({"stdevs": -0.5}, "stdevs must be >= 0; got -0.5"),
                            ({"baselines": np.zeros((2, 3))},
                             "baselines of shape \\(2, 3\\) do not broadcast")):
        with pytest.raises(ValueError, match=message):
            baselines.gradient_shap(f, x, mask, key=key, **kwargs)
    with pytest.raises(ValueError, match="exactly one of key"):
        baselines.gradient_shap(f, x, mask)
