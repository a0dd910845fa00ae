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
        f, x, mask, key=key, explainer="input_x_gradient", nt_samples=4, stdevs=0.5,
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
                            ({"explainer": "lime"}, "explainer must be one of")):
        with pytest.raises(ValueError, match=message):
            baselines.noise_tunnel(f, x, mask, key=key, **kwargs)


# ------------------------------------------- the wrapped explainer's options
# `method` named both the wrapped explainer and integrated gradients' quadrature rule, so
# NoiseTunnel over IG could not choose its rule. Each option below must reach the wrapped
# explainer: at zero noise the tunnel equals the plain explainer with the same option and
# differs from it with the option's default.

IG_CASES = {  # option: (the value given, a value that gives different attributions)
    "method": ("riemann_trapezoid", "gausslegendre"),
    "n_steps": (2, 50),
    "multiply_by_inputs": (False, True),
    "baseline": ("pad", None),
}


@pytest.mark.parametrize("option", list(IG_CASES))
def test_each_integrated_gradients_option_reaches_it(setup, option):  # noqa: F811
    """Checked once by hand: with the tunnel dropping the option (the IG default in its
    place), every case here fails."""
    f, _, x, mask, pad = setup
    target = np.arange(B) % C
    given, other = (pad if v == "pad" else v for v in IG_CASES[option])
    tunnel = baselines.noise_tunnel(f, x, mask, key=jax.random.key(0), nt_samples=2,
                                    stdevs=0.0, target=target,
                                    explainer="integrated_gradients", **{option: given})
    same = baselines.integrated_gradients(f, x, mask, target=target, **{option: given})
    different = baselines.integrated_gradients(f, x, mask, target=target, **{option: other})
    np.testing.assert_allclose(tunnel.attributions, same.attributions, rtol=1e-5, atol=1e-6)
    assert rel_err(tunnel.attributions, different.attributions) > 1e-3


def test_chunk_size_and_abs_reach_the_wrapped_explainer(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    key, target = jax.random.key(0), np.arange(B) % C
    # chunk_size changes memory, not the result: IG's own check shows that it arrived.
    with pytest.raises(ValueError, match="chunk_size must be an int >= 1; got 0"):
        baselines.noise_tunnel(f, x, mask, key=key, explainer="integrated_gradients",
                               chunk_size=0)
    chunked = baselines.noise_tunnel(f, x, mask, key=key, nt_samples=2, stdevs=0.0,
                                     target=target, explainer="integrated_gradients",
                                     n_steps=9, chunk_size=2)
    plain = baselines.integrated_gradients(f, x, mask, target=target, n_steps=9)
    np.testing.assert_allclose(chunked.attributions, plain.attributions, rtol=1e-5, atol=1e-6)
    signed = baselines.noise_tunnel(f, x, mask, key=key, nt_samples=2, stdevs=0.0,
                                    target=target, abs=False)
    np.testing.assert_allclose(
        signed.attributions,
        baselines.saliency(f, x, mask, target=target, abs=False).attributions, rtol=1e-5,
        atol=1e-7)
    assert float(jnp.min(signed.attributions)) < 0


def test_options_for_another_explainer_and_the_old_method_name_are_errors(setup):  # noqa: F811
    f, _, x, mask, _ = setup
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"explainer='saliency' takes none of \['n_steps', "
                                         r"'method'\]; its options are \['abs'\]"):
        baselines.noise_tunnel(f, x, mask, key=key, method="riemann_left", n_steps=5)
    with pytest.raises(ValueError, match=r"explainer='integrated_gradients' takes none of "
                                         r"\['abs'\]"):
        baselines.noise_tunnel(f, x, mask, key=key, explainer="integrated_gradients",
                               abs=False)
    with pytest.raises(ValueError, match=r"input_x_gradient' takes none of "
                                         r"\['multiply_by_inputs'\]; it takes no options"):
        baselines.noise_tunnel(f, x, mask, key=key, explainer="input_x_gradient",
                               multiply_by_inputs=False)
    with pytest.raises(ValueError, match="Write explainer='integrated_gradients'"):
        baselines.noise_tunnel(f, x, mask, key=key, method="integrated_gradients")
    with pytest.raises(ValueError, match="Unknown integration method 'simpson'"):
        baselines.noise_tunnel(f, x, mask, key=key, explainer="integrated_gradients",
                               method="simpson")


@pytest.mark.parametrize("nt_type", ["smoothgrad", "vargrad"])
def test_zero_noise_matches_captum_noise_tunnel_of_ig_with_its_options(setup, nt_type):  # noqa: F811
    """Captum passes NoiseTunnel.attribute's extra keywords to IntegratedGradients; smat's
    tunnel gives them under the same names."""
    captum_attr = pytest.importorskip("captum.attr")
    torch = pytest.importorskip("torch")
    f, tf, x, mask, pad = setup
    target = np.arange(B) % C
    theirs = captum_attr.NoiseTunnel(
        captum_attr.IntegratedGradients(tf, multiply_by_inputs=False)).attribute(
        torch.from_numpy(x), nt_type=nt_type, nt_samples=2, stdevs=0.0,
        target=torch.from_numpy(target), additional_forward_args=(torch.from_numpy(mask),),
        baselines=torch.from_numpy(np.broadcast_to(pad, x.shape).copy()),
        method="riemann_trapezoid", n_steps=12).detach().numpy()
    ours = baselines.noise_tunnel(f, x, mask, key=jax.random.key(0), nt_type=nt_type,
                                  nt_samples=2, stdevs=0.0, target=target,
                                  explainer="integrated_gradients", baseline=pad,
                                  method="riemann_trapezoid", n_steps=12,
                                  multiply_by_inputs=False)
    if nt_type == "vargrad":  # zero up to rounding on both sides
        assert np.max(np.abs(np.asarray(ours.attributions))) <= 1e-6
        assert np.max(np.abs(theirs)) <= 1e-6
    else:
        assert rel_err(ours.attributions, theirs) <= TOL
