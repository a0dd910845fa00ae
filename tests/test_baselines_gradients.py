"""Tests for baselines.gradients: Saliency, Input x Gradient, Integrated Gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import enable_x64

import baselines
from baselines import (
    METHODS,
    Attribution,
    input_x_gradient,
    integrated_gradients,
    quadrature,
    saliency,
)

B, T, E = 2, 4, 3
MASK = jnp.array([[True, True, True, True], [True, True, False, False]])


def quadratic(x, mask):
    """f(x) = [sum x^2, sum x] per example: IG of output 0 is exactly x^2 (zero baseline)."""
    del mask
    return jnp.stack([jnp.sum(x * x, axis=(1, 2)), jnp.sum(x, axis=(1, 2))], axis=-1)


def cubic(x, mask):
    """A model whose IG depends on the quadrature: f(x) = sum x^3, sum sin x."""
    m = mask[:, :, None].astype(x.dtype)
    return jnp.stack([jnp.sum(m * x**3, axis=(1, 2)), jnp.sum(m * jnp.sin(x), axis=(1, 2))], -1)


@pytest.fixture
def x():
    return jax.random.normal(jax.random.key(0), (B, T, E))


# ---------------------------------------------------------------- quadrature


@pytest.mark.parity
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n_steps", [2, 3, 7, 50, 128, 199, 512])
def test_quadrature_equals_captum(method, n_steps):
    approximation_methods = pytest.importorskip("captum.attr._utils.approximation_methods")
    step_sizes, alphas = approximation_methods.approximation_parameters(method)
    got_alphas, got_weights = quadrature(method, n_steps)
    np.testing.assert_array_equal(got_alphas, np.asarray(alphas(n_steps)))
    np.testing.assert_array_equal(got_weights, np.asarray(step_sizes(n_steps)))


def test_quadrature_rejects_bad_arguments():
    with pytest.raises(ValueError, match="riemann_trapezoid"):
        quadrature("simpson", 10)
    with pytest.raises(ValueError, match="n_steps"):
        quadrature("riemann_left", 1)
    assert quadrature("gausslegendre", 1)[0].shape == (1,)


# ---------------------------------------------------------------- closed forms


def test_ig_closed_form_float64():
    with enable_x64():
        x = jax.random.normal(jax.random.key(1), (B, T, E), dtype=jnp.float64)
        result = integrated_gradients(quadratic, x, MASK, target=0, n_steps=50,
                                      method="gausslegendre", return_convergence_delta=True)
        assert result.attributions.dtype == jnp.float64
        rel = jnp.max(jnp.abs(result.attributions - x**2)) / jnp.max(x**2)
        assert float(rel) < 1e-6
        assert float(jnp.max(jnp.abs(result.delta))) < 1e-9


@pytest.mark.parametrize("method", METHODS)
def test_ig_of_linear_function_is_weight_sum_times_difference(x, method):
    result = integrated_gradients(quadratic, x, MASK, target=1, n_steps=10, method=method,
                                  baseline=0.5)
    # Captum's trapezoid weights are 1/n (halved at the ends), summing to 1 - 1/n; the
    # other rules' weights sum to 1.
    weight_sum = 0.9 if method == "riemann_trapezoid" else 1.0
    np.testing.assert_allclose(quadrature(method, 10)[1].sum(), weight_sum, rtol=1e-12)
    np.testing.assert_allclose(result.attributions, weight_sum * (x - 0.5), rtol=1e-5,
                               atol=1e-6)


def test_saliency_and_input_x_gradient_closed_form(x):
    grad = 2 * x  # d sum(x^2) / dx
    np.testing.assert_allclose(saliency(quadratic, x, MASK, target=0).attributions,
                               jnp.abs(grad), rtol=1e-6)
    np.testing.assert_allclose(saliency(quadratic, x, MASK, target=0, abs=False).attributions,
                               grad, rtol=1e-6)
    ixg = input_x_gradient(quadratic, x, MASK, target=0)
    np.testing.assert_allclose(ixg.attributions, x * grad, rtol=1e-6)
    np.testing.assert_allclose(ixg.saliency.scores, jnp.where(MASK, (x * grad).sum(-1), 0),
                               rtol=1e-5)
    assert ixg.reduction == "sum" and saliency(quadratic, x, MASK).reduction == "l2"


def test_default_target_is_the_predicted_class(x):
    outputs = cubic(x, MASK)
    predicted = jnp.argmax(outputs, -1)
    default = integrated_gradients(cubic, x, MASK, n_steps=8)
    given = integrated_gradients(cubic, x, MASK, target=predicted, n_steps=8)
    np.testing.assert_array_equal(default.attributions, given.attributions)
    other = integrated_gradients(cubic, x, MASK, target=1 - predicted, n_steps=8)
    assert float(jnp.max(jnp.abs(other.attributions - given.attributions))) > 1e-3


def test_regression_output_needs_no_target(x):
    f = lambda z, m: jnp.sum(z, axis=(1, 2))  # (B,) single output  # noqa: E731
    np.testing.assert_allclose(saliency(f, x, MASK, abs=False).attributions, jnp.ones_like(x))


# ---------------------------------------------------------------- IG mechanics


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 50, 64])
def test_ig_chunking_does_not_change_the_result(x, chunk_size):
    reference = integrated_gradients(cubic, x, MASK, target=0, n_steps=50, chunk_size=50)
    chunked = integrated_gradients(cubic, x, MASK, target=0, n_steps=50, chunk_size=chunk_size)
    np.testing.assert_allclose(chunked.attributions, reference.attributions, rtol=1e-5,
                               atol=1e-6)


def test_ig_local_variant_and_delta(x):
    baseline = jnp.full((E,), 0.3)  # broadcast like a PAD embedding
    glob = integrated_gradients(cubic, x, MASK, baseline=baseline, target=0, n_steps=64,
                                return_convergence_delta=True)
    local = integrated_gradients(cubic, x, MASK, baseline=baseline, target=0, n_steps=64,
                                 multiply_by_inputs=False)
    np.testing.assert_allclose(glob.attributions, local.attributions * (x - baseline[None, None]),
                               rtol=1e-5, atol=1e-7)
    gap = cubic(x, MASK)[:, 0] - cubic(jnp.broadcast_to(baseline, x.shape), MASK)[:, 0]
    np.testing.assert_allclose(glob.delta, glob.attributions.sum((1, 2)) - gap, atol=1e-5)
    assert float(jnp.max(jnp.abs(glob.delta))) < 1e-3 * float(jnp.max(jnp.abs(gap)))
    assert local.delta is None


def test_ig_runs_as_one_jitted_computation(x):
    traces = []

    def run(z):
        traces.append(1)
        return integrated_gradients(cubic, z, MASK, n_steps=20, chunk_size=6,
                                    return_convergence_delta=True)

    jitted = jax.jit(run)
    out = jitted(x)
    assert isinstance(out, Attribution) and out.reduction == "sum"
    jitted(x + 1.0)
    assert len(traces) == 1
    jaxpr = str(jax.make_jaxpr(run)(x))
    assert "scan" in jaxpr


def test_attribution_is_a_pytree_with_static_reduction(x):
    out = saliency(quadratic, x, MASK)
    leaves = jax.tree.leaves(out)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    mapped = jax.tree.map(jnp.zeros_like, out)
    assert mapped.reduction == "l2"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "simpson"}, ValueError, "simpson"),
        ({"n_steps": 1, "method": "riemann_left"}, ValueError, "n_steps"),
        ({"chunk_size": 0}, ValueError, "chunk_size"),
        ({"baseline": jnp.zeros((5,))}, ValueError, "broadcast"),
        ({"reduction": "max"}, ValueError, "reduction"),
        ({"target": jnp.zeros((3,), jnp.int32)}, ValueError, "target"),
        ({"target": 0.5}, TypeError, "integers"),
        ({"target": -1}, ValueError, "nonnegative"),
    ],
)
def test_ig_argument_errors(x, kwargs, error, match):
    with pytest.raises(error, match=match):
        integrated_gradients(quadratic, x, MASK, **kwargs)


def test_shape_errors(x):
    with pytest.raises(ValueError, match=r"x \(B, T, E\)"):
        saliency(quadratic, x[0], MASK)
    with pytest.raises(TypeError, match="floating"):
        input_x_gradient(quadratic, jnp.ones((B, T, E), jnp.int32), MASK)
    with pytest.raises(ValueError, match=r"\(B, C\)"):
        saliency(lambda z, m: z, x, MASK)


# ---------------------------------------------------------------- smat model adapters


@pytest.fixture(scope="module")
def tiny_model():
    from flax import nnx

    from smat.models import SequenceClassifier, TextConfig, functional

    model = SequenceClassifier(TextConfig.tiny(), num_labels=3, pooling="mean",
                               rngs=nnx.Rngs(0))
    graphdef, params = functional.split(model)
    ids = jax.random.randint(jax.random.key(2), (2, 6), 5, 100)
    mask = jnp.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], jnp.int32)
    return graphdef, params, ids, mask


@pytest.mark.parametrize("point", ["word_embeddings", "embedding_output"])
def test_attribution_inputs_reproduce_the_model(tiny_model, point):
    from smat.models import functional

    graphdef, params, ids, mask = tiny_model
    f, x, m = baselines.attribution_inputs(graphdef, params, input_ids=ids, attention_mask=mask,
                                           point=point)
    logits = functional.apply(graphdef, params, input_ids=ids, attention_mask=mask,
                              attention="none").logits
    np.testing.assert_allclose(f(x, m), logits, rtol=1e-5, atol=1e-6)
    assert m.dtype == jnp.bool_ and x.shape[:2] == ids.shape
    # A PAD baseline at the same point (a zero embedding_output is degenerate for post-LN
    # BERT: the first LayerNorm makes f jump at 0, so the path integral misses it).
    base = baselines.token_baseline(graphdef, params, input_ids=ids, attention_mask=mask,
                                    token_id=0, point=point)
    assert base.shape == x.shape
    out = jax.jit(lambda z, b: integrated_gradients(f, z, m, baseline=b, n_steps=64,
                                                    return_convergence_delta=True))(x, base)
    predicted = jnp.argmax(logits, -1)
    gap = logits[jnp.arange(2), predicted] - f(base, m)[jnp.arange(2), predicted]
    assert float(jnp.max(jnp.abs(out.delta) / jnp.abs(gap))) < 1e-3


def test_token_baseline(tiny_model):
    graphdef, params, ids, mask = tiny_model
    pad = baselines.token_baseline(graphdef, params, input_ids=ids, attention_mask=mask,
                                   token_id=0)
    word_embeddings = params["encoder"]["word_embeddings"][...]
    np.testing.assert_array_equal(pad, jnp.broadcast_to(word_embeddings[0], pad.shape))
    keep = jnp.zeros(ids.shape, bool).at[:, 0].set(True)  # keep [CLS]-like first token
    kept = baselines.token_baseline(graphdef, params, input_ids=ids, attention_mask=mask,
                                    token_id=0, keep=keep)
    np.testing.assert_array_equal(kept[:, 0], word_embeddings[ids[:, 0]])
    np.testing.assert_array_equal(kept[:, 1:], pad[:, 1:])
    with pytest.raises(ValueError, match="keep"):
        baselines.token_baseline(graphdef, params, input_ids=ids, attention_mask=mask,
                                 token_id=0, keep=keep[:, :2])
    with pytest.raises(ValueError, match="embedding_output"):
        baselines.attribution_inputs(graphdef, params, input_ids=ids, attention_mask=mask,
                                     point="logits")
