"""Tests for baselines.perturbation: feature ablation and occlusion over tokens, against
Captum 0.9 on the small token model of the gradient parity tests, and closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from baselines.perturbation import occlusion_windows
from tests.test_baselines_captum_parity import TOL, B, C, E, T, jax_forward, rel_err, torch_forward

WEIGHTS_SEED, BATCH_SEED = 0, 1


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(WEIGHTS_SEED)
    shapes = {"w1": (E, 16), "b1": (16,), "w2": (16, 16), "b2": (16,), "wo": (16, C),
              "bo": (C,)}
    weights = {k: (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)
               for k, s in shapes.items()}
    rng = np.random.default_rng(BATCH_SEED)
    x = rng.normal(size=(B, T, E)).astype(np.float32)
    mask = np.arange(T)[None, :] < np.array([7, 6, 4, 3, 1])[:, None]
    pad = rng.normal(size=(E,)).astype(np.float32) * 0.1
    return jax_forward(weights), torch_forward(weights), x, mask, pad


def test_linear_model_ablation_is_each_tokens_contribution():
    """f(x) = sum_t m_t w . x_t: removing token t (zero baseline) drops exactly w . x_t."""
    w = jnp.asarray(np.random.default_rng(0).normal(size=(E, 2)), jnp.float32)

    def f(x, mask):
        return jnp.einsum("bte,ec->bc", x * mask[..., None].astype(x.dtype), w)

    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, T, E)), jnp.float32)
    mask = jnp.arange(T)[None, :] < jnp.asarray([T, 4, 2])[:, None]
    out = baselines.feature_ablation(f, x, mask, target=1, chunk_size=3)
    expected = jnp.where(mask, x @ w[:, 1], 0.0)
    np.testing.assert_allclose(out.saliency.scores, expected, atol=1e-5)
    # Occlusion with one-token windows is feature ablation.
    single = baselines.occlusion(f, x, mask, window=1, stride=1, target=1)
    np.testing.assert_allclose(single.attributions, out.attributions, atol=1e-6)


@pytest.mark.parametrize("baseline_kind", ["zero", "pad"])
def test_feature_ablation_matches_captum(setup, baseline_kind):
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, pad = setup
    target = np.arange(B) % C
    baseline = np.broadcast_to(pad, (1, T, E)).copy() if baseline_kind == "pad" else None
    feature_mask = torch.arange(T)[None, :, None].expand(1, T, E)
    theirs = captum_attr.FeatureAblation(tf).attribute(
        torch.from_numpy(x), target=torch.from_numpy(target), feature_mask=feature_mask,
        baselines=None if baseline is None else torch.from_numpy(baseline),
        additional_forward_args=(torch.from_numpy(mask),), perturbations_per_eval=3)
    ours = baselines.feature_ablation(f, x, mask, target=target, chunk_size=3,
                                      baseline=None if baseline is None else pad)
    assert rel_err(ours.attributions, theirs.numpy()) <= TOL


@pytest.mark.parametrize("window,stride", [(1, 1), (3, 1), (3, 2), (3, 3), (4, 3)])
def test_occlusion_matches_captum(setup, window, stride):
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, pad = setup
    target = np.arange(B) % C
    theirs = captum_attr.Occlusion(tf).attribute(
        torch.from_numpy(x), sliding_window_shapes=(window, E), strides=(stride, E),
        target=torch.from_numpy(target), additional_forward_args=(torch.from_numpy(mask),))
    ours = baselines.occlusion(f, x, mask, window=window, stride=stride, target=target)
    assert rel_err(ours.attributions, theirs.numpy()) <= TOL


def test_windows_cover_every_token_and_bad_settings_are_named():
    masks = occlusion_windows(7, 3, 3)  # starts 0, 3, 6; the last window is cut at 7
    assert masks.shape == (3, 7) and masks.sum(0).min() == 1 and masks[-1].sum() == 1
    assert occlusion_windows(7, 3, 2).shape == (3, 7)  # starts 0, 2, 4
    for kwargs, message in (({"window": 8, "stride": 1}, "window must be an int in 1..7"),
                            ({"window": 2, "stride": 3}, "stride \\(3\\) cannot exceed"),
                            ({"window": 2, "stride": 0}, "stride must be an int in 1..7")):
        with pytest.raises(ValueError, match=message):
            occlusion_windows(7, **kwargs)
    f = jax_forward({"w1": np.eye(E, 16, dtype=np.float32), "b1": np.zeros(16, np.float32),
                     "w2": np.eye(16, dtype=np.float32), "b2": np.zeros(16, np.float32),
                     "wo": np.ones((16, C), np.float32), "bo": np.zeros(C, np.float32)})
    x, mask = jnp.ones((2, T, E)), jnp.ones((2, T), bool)
    with pytest.raises(ValueError, match="baseline of shape \\(3,\\) does not broadcast"):
        baselines.feature_ablation(f, x, mask, baseline=jnp.zeros(3))
    with pytest.raises(ValueError, match="chunk_size must be an int >= 1; got 0"):
        baselines.occlusion(f, x, mask, chunk_size=0)


def test_one_jitted_call_and_no_retrace():
    traces = []

    def f(x, mask):
        traces.append(1)
        return jnp.sum(x * mask[..., None].astype(x.dtype), axis=(1, 2))[:, None] * jnp.ones((1, 2))

    explain = jax.jit(lambda x, mask: baselines.occlusion(f, x, mask, window=2).saliency.scores)
    x, mask = jnp.ones((2, T, E)), jnp.ones((2, T), bool)
    first = explain(x, mask)
    count = len(traces)
    np.testing.assert_array_equal(explain(x + 0, mask), first)
    assert len(traces) == count  # the second call reuses the compiled program
