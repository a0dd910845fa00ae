"""Tests for baselines.noise_tunnel: SmoothGrad / SmoothGrad² / VarGrad against Captum 0.9
at zero noise (where they reduce to the wrapped method), and their behaviour with noise."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from tests.test_baselines_captum_parity import TOL, B, C, rel_err
from tests.test_baselines_perturbation import setup  # noqa: F401  (the shared fixture)


@pytest.mark.parametrize("nt_type", baselines.NT_TYPES)
def test_zero_noise_matches_captum_noise_tunnel_of_saliency(setup, nt_type):  # noqa: F811
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, _ = setup
    target = np.arange(B) % C
    theirs = captum_attr.NoiseTunnel(captum_attr.Saliency(tf)).attribute(
        torch.from_numpy(x).requires_grad_(), nt_type=nt_type, nt_samples=3, stdevs=0.0,
        target=torch.from_numpy(target), additional_forward_args=(torch.from_numpy(mask),))
    ours = baselines.noise_tunnel(f, x, mask, key=jax.random.key(0), nt_type=nt_type,
                                  nt_samples=3, stdevs=0.0, target=target)
    theirs = theirs.detach().numpy()
    if nt_type == "vargrad":  # zero up to rounding on both sides
        assert np.max(np.abs(np.asarray(ours.attributions))) <= 1e-6
        assert np.max(np.abs(theirs)) <= 1e-6
    else:
        assert rel_err(ours.attributions, theirs) <= TOL


def test_noise_is_seeded_and_smooths(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    run = jax.jit(lambda key: baselines.noise_tunnel(
        f, x, mask, key=key, method="input_x_gradient", nt_samples=4, stdevs=0.5,
        reduction="sum").attributions)
    a, b, c = run(jax.random.key(1)), run(jax.random.key(1)), run(jax.random.key(2))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    plain = baselines.input_x_gradient(f, x, mask).attributions
    assert not np.allclose(a, plain)
    var = baselines.noise_tunnel(f, x, mask, key=jax.random.key(1), nt_type="vargrad",
                                 nt_samples=4, stdevs=0.5).attributions
    assert float(jnp.min(var)) >= -1e-6  # a variance


def test_bad_settings_are_named(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    key = jax.random.key(0)
    for kwargs, message in (({"nt_samples": 0}, "nt_samples must be an int >= 1; got 0"),
                            ({"stdevs": -1.0}, "stdevs must be >= 0; got -1.0"),
                            ({"nt_type": "mean"}, "nt_type must be one of"),
                            ({"method": "lime"}, "method must be one of")):
        with pytest.raises(ValueError, match=message):
            baselines.noise_tunnel(f, x, mask, key=key, **kwargs)
