"""Tests for baselines.surrogate: KernelShap equals exact Shapley values with every
coalition, Lime and KernelShap equal Captum 0.9 given the same coalitions, sampling and
bad settings."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from baselines.surrogate import shapley_kernel_weights
from tests.test_baselines_captum_parity import TOL, B, C, E, T, rel_err
from tests.test_baselines_perturbation import setup  # noqa: F401  (the shared fixture)

N = 60  # coalitions per example in the parity tests (T = 7 features)


def _coalitions(seed):
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, 2, size=(N, B, T))
    samples[:, :, 0] = np.arange(N)[:, None] % 2  # every feature varies
    return samples


def test_all_coalitions_with_the_shapley_kernel_give_exact_shapley_values(setup):  # noqa: F811
    f, _, x, mask, pad = setup
    target = np.arange(B) % C
    everything = np.array([z for z in itertools.product([0, 1], repeat=T)
                           if 0 < sum(z) < T])  # (2^T - 2, T)
    samples = np.broadcast_to(everything[:, None], (len(everything), B, T))
    weights = np.broadcast_to(np.asarray(shapley_kernel_weights(everything))[:, None],
                              samples.shape[:2])
    ours = baselines.kernel_shap(f, x, mask, samples=samples, weights=weights,
                                 n_samples=len(everything) + 2, baseline=pad, target=target)

    def value(z):  # f on the coalition z (1 = kept), every example
        kept = jnp.asarray(z, jnp.float32)[None, :, None]
        point = pad[None, None] + kept * (x - pad[None, None])
        return np.asarray(f(point, mask))[np.arange(B), target]

    values = {z: value(z) for z in itertools.product([0, 1], repeat=T)}
    exact = np.zeros((B, T))
    for i in range(T):
        for z, v in values.items():
            if z[i]:
                continue
            k = sum(z)
            share = math.factorial(k) * math.factorial(T - k - 1) / math.factorial(T)
            exact[:, i] += share * (values[z[:i] + (1,) + z[i + 1:]] - v)
    np.testing.assert_allclose(np.asarray(ours.attributions)[..., 0], exact, atol=2e-5)


def _captum_per_example(explainer, tf, x, mask, target, **kwargs):
    torch = pytest.importorskip("torch")
    feature_mask = torch.arange(T)[None, :, None].expand(1, T, E)
    return np.concatenate([
        explainer(b).attribute(torch.from_numpy(x[b:b + 1]), target=int(target[b]),
                               feature_mask=feature_mask,
                               additional_forward_args=(torch.from_numpy(mask[b:b + 1]),),
                               **kwargs).numpy()
        for b in range(B)])


def test_lime_matches_captum_given_the_same_coalitions(setup):  # noqa: F811
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    from captum._utils.models.linear_model import SkLearnLinearRegression

    f, tf, x, mask, _ = setup
    target = np.arange(B) % C
    samples = _coalitions(3)

    def explainer(b):
        def sampler(original_input, **kwargs):
            for row in samples[:, b]:
                yield torch.from_numpy(row[None]).long()
        return captum_attr.Lime(tf, interpretable_model=SkLearnLinearRegression(),
                                perturb_func=sampler)

    theirs = _captum_per_example(explainer, tf, x, mask, target, n_samples=N)
    ours = baselines.lime(f, x, mask, samples=samples, n_samples=N, target=target)
    assert rel_err(ours.attributions, theirs) <= TOL


def test_kernel_shap_matches_captum_given_the_same_coalitions(setup):  # noqa: F811
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, _ = setup
    target = np.arange(B) % C
    samples = _coalitions(4)

    def explainer(b):
        class GivenCoalitions(captum_attr.KernelShap):
            def kernel_shap_perturb_generator(self, original_inp, **kwargs):
                yield torch.ones(1, T, dtype=torch.long)
                yield torch.zeros(1, T, dtype=torch.long)
                for row in samples[:, b]:
                    yield torch.from_numpy(row[None]).long()
        return GivenCoalitions(tf)

    theirs = _captum_per_example(explainer, tf, x, mask, target, n_samples=N + 2)
    ours = baselines.kernel_shap(f, x, mask, samples=samples, n_samples=N + 2, target=target)
    assert rel_err(ours.attributions, theirs) <= TOL  # Captum's 1e6 weights vs exact constraints


def test_sampling_is_seeded_and_bad_settings_are_named(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    for explain in (baselines.lime, baselines.kernel_shap):
        run = jax.jit(lambda key, explain=explain: explain(f, x, mask, key=key,
                                                           n_samples=30).attributions)
        np.testing.assert_array_equal(run(jax.random.key(0)), run(jax.random.key(0)))
        assert not np.allclose(run(jax.random.key(0)), run(jax.random.key(1)))
        with pytest.raises(ValueError, match="n_samples must be an int >="):
            explain(f, x, mask, key=jax.random.key(0), n_samples=1)
        with pytest.raises(ValueError, match="exactly one of key"):
            explain(f, x, mask)
        with pytest.raises(ValueError, match="samples must be 0/1 coalitions of shape"):
            explain(f, x, mask, samples=np.ones((4, B, T + 1)), n_samples=6)
    # The efficiency property: KernelShap's values sum to f(x) - f(baseline).
    shap = baselines.kernel_shap(f, x, mask, key=jax.random.key(2), n_samples=40, target=0)
    gap = np.asarray(f(x, mask))[:, 0] - np.asarray(f(jnp.zeros_like(x), mask))[:, 0]
    np.testing.assert_allclose(np.asarray(shap.attributions)[..., 0].sum(-1), gap, atol=1e-4)
