"""Every Captum-like class takes Captum 0.9's arguments and gives its core's result.

The parity tests compare the cores with Captum; these tests check that each class
(`baselines.captum_like`) accepts the names of Captum's own class, constructor and
``attribute`` alike, so that Captum code ports by changing its imports, and that it
returns what its pure core returns on the same inputs (a model that is not linear in the
perturbed tokens, so a wrong binding would show).
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from baselines import captum_like

captum_attr = pytest.importorskip("captum.attr")

B, T, E, C = 3, 5, 4, 2


def forward(x, mask):
    """A small model, nonlinear in every token, that reads its mask."""
    weights = jnp.asarray(np.random.default_rng(0).normal(size=(E, 6)), x.dtype)
    mask = mask.astype(x.dtype)
    hidden = jnp.tanh(x @ weights) * mask[..., None]
    pooled = hidden.sum(1) / jnp.maximum(mask.sum(1, keepdims=True), 1)
    return jnp.stack([pooled.sum(-1), jnp.sin(pooled).sum(-1) ** 2], axis=-1)


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(B, T, E)), jnp.float32)
    mask = jnp.asarray([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
    return x, mask


TOKENS = np.arange(T)[None, :, None]  # feature t = token t
KEY = jax.random.key(3)
CLASSES = {  # class -> (its Captum-named call, the pure core's call)
    "Saliency": (
        lambda x, m: baselines.Saliency(forward).attribute(
            x, target=1, abs=True, additional_forward_args=(m,)),
        lambda x, m: jnp.abs(baselines.saliency(forward, x, m, target=1).attributions)),
    "InputXGradient": (
        lambda x, m: baselines.InputXGradient(forward).attribute(
            x, target=0, additional_forward_args=(m,)),
        lambda x, m: baselines.input_x_gradient(forward, x, m, target=0).attributions),
    "IntegratedGradients": (
        lambda x, m: baselines.IntegratedGradients(forward, multiply_by_inputs=True).attribute(
            x, baselines=0.5, target=None, additional_forward_args=(m,), n_steps=8,
            method="riemann_trapezoid", internal_batch_size=6,
            return_convergence_delta=False),
        lambda x, m: baselines.integrated_gradients(
            forward, x, m, baseline=0.5, n_steps=8, method="riemann_trapezoid",
            chunk_size=2).attributions),
    "DeepLift": (
        lambda x, m: baselines.DeepLift(forward, multiply_by_inputs=True).attribute(
            x, baselines=0.1, target=1, additional_forward_args=(m,),
            return_convergence_delta=False),
        lambda x, m: baselines.deeplift(forward, x, m, baselines=0.1, target=1).attributions),
    "DeepLiftShap": (
        lambda x, m: baselines.DeepLiftShap(forward).attribute(
            x, baselines=jnp.stack([x[0] * 0, x[1] * 0.5]), target=1,
            additional_forward_args=(m,)),
        lambda x, m: baselines.deeplift_shap(
            forward, x, m, baselines=jnp.stack([x[0] * 0, x[1] * 0.5]), target=1).attributions),
    "GradientShap": (
        lambda x, m: baselines.GradientShap(forward, multiply_by_inputs=True).attribute(
            x, baselines=x[:2] * 0.3, n_samples=4, stdevs=0.1, target=1,
            additional_forward_args=(m,), key=KEY),
        lambda x, m: baselines.gradient_shap(forward, x, m, baselines=x[:2] * 0.3, key=KEY,
                                             n_samples=4, stdevs=0.1, target=1).attributions),
    "FeatureAblation": (
        lambda x, m: baselines.FeatureAblation(forward).attribute(
            x, baselines=0.2, target=0, additional_forward_args=(m,), feature_mask=TOKENS,
            perturbations_per_eval=2),
        lambda x, m: baselines.feature_ablation(forward, x, m, baseline=0.2, target=0,
                                                chunk_size=2).attributions),
    "Occlusion": (
        lambda x, m: baselines.Occlusion(forward).attribute(
            x, sliding_window_shapes=(2, E), strides=(1, E), baselines=0.0, target=0,
            additional_forward_args=(m,), perturbations_per_eval=3),
        lambda x, m: baselines.occlusion(forward, x, m, window=2, stride=1, target=0,
                                         chunk_size=3).attributions),
    "Lime": (
        lambda x, m: baselines.Lime(
            forward, interpretable_model=baselines.SkLearnLinearRegression()).attribute(
            x, baselines=None, target=1, additional_forward_args=(m,), feature_mask=TOKENS,
            n_samples=30, perturbations_per_eval=5, return_input_shape=True, key=KEY),
        # Captum knows no mask: the model gets it, every token is a feature of the coalitions
        lambda x, m: baselines.lime(lambda z, _: forward(z, m), x, jnp.ones_like(m), key=KEY,
                                    n_samples=30, target=1, chunk_size=5).attributions),
    "KernelShap": (
        lambda x, m: baselines.KernelShap(forward).attribute(
            x, target=1, additional_forward_args=(m,), feature_mask=TOKENS, n_samples=20,
            perturbations_per_eval=4, key=KEY),
        lambda x, m: baselines.kernel_shap(lambda z, _: forward(z, m), x, jnp.ones_like(m),
                                           key=KEY, n_samples=20, target=1,
                                           chunk_size=4).attributions),
    "NoiseTunnel": (
        lambda x, m: baselines.NoiseTunnel(baselines.IntegratedGradients(forward)).attribute(
            x, nt_type="smoothgrad_sq", nt_samples=3, stdevs=0.2, key=KEY, target=1,
            additional_forward_args=(m,), n_steps=6, method="gausslegendre"),
        lambda x, m: baselines.noise_tunnel(
            forward, x, m, key=KEY, explainer="integrated_gradients", nt_type="smoothgrad_sq",
            nt_samples=3, stdevs=0.2, target=1, n_steps=6, method="gausslegendre"
        ).attributions),
}


def test_every_captum_class_smat_implements_is_here():
    assert set(CLASSES) == set(captum_like.__all__) - {"SkLearnLinearRegression"}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_class_takes_captums_argument_names(name):
    ours, theirs = getattr(baselines, name), getattr(captum_attr, name)
    for method in ("__init__", "attribute"):
        wanted = set(inspect.signature(getattr(theirs, method)).parameters) - {"self",
                                                                               "kwargs"}
        have = set(inspect.signature(getattr(ours, method)).parameters)
        assert wanted <= have, (name, method, wanted - have)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_class_returns_its_cores_attributions(name, inputs):
    x, mask = inputs
    facade, core = CLASSES[name]
    ours = np.asarray(facade(x, mask))
    assert ours.shape == (B, T, E) and np.abs(ours).max() > 0
    np.testing.assert_allclose(ours, np.asarray(core(x, mask)), rtol=2e-5, atol=1e-6)


def test_what_smat_does_not_compute_is_refused_by_name(inputs):
    x, mask = inputs
    with pytest.raises(ValueError, match="feature_mask numbering the tokens"):
        baselines.FeatureAblation(forward).attribute(x, additional_forward_args=(mask,))
    with pytest.raises(ValueError, match="other feature groups are not implemented"):
        baselines.KernelShap(forward).attribute(x, additional_forward_args=(mask,),
                                                feature_mask=np.zeros((B, T, E), int))
    with pytest.raises(ValueError, match="a Lasso, is not implemented"):
        baselines.Lime(forward)
    with pytest.raises(ValueError, match=r"sliding_window_shapes must be \(tokens, 4\)"):
        baselines.Occlusion(forward).attribute(x, sliding_window_shapes=(2, 2))
    with pytest.raises(TypeError, match="NoiseTunnel wraps Saliency"):
        baselines.NoiseTunnel(baselines.Occlusion(forward))
    with pytest.raises(ValueError, match="multiply_by_inputs=False"):
        baselines.GradientShap(forward, multiply_by_inputs=False)
