"""Tests for smat.explainers.base and the shared explainer conformance table.

Every explainer (learned attention with each normalizer, static attention,
rollout, random, gradient methods) runs through the same checks: output shape and
mask, padded positions, jit, vmap over an extra leading axis and no retracing on
a second call with new values.
"""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import baselines
import smat.explainers
from smat.explainers import (
    REDUCTIONS,
    AttentionExplainerConfig,
    Saliency,
    apply,
    init,
    pool_attention,
    reduce_tokens,
    to_distribution,
)
from smat.explainers.normalizers import NORMALIZERS

L, B, H, T, E, C = 2, 3, 2, 5, 4, 3
MASK = jnp.asarray(np.arange(T)[None, :] < np.array([5, 3, 1])[:, None])


def _classifier(x, mask):
    """A tiny nonlinear (B, T, E) -> (B, C) model."""
    w = jnp.linspace(-1.0, 1.0, E * C).reshape(E, C)
    h = jnp.tanh(x) * mask[:, :, None].astype(x.dtype)
    return jnp.einsum("bte,ec->bc", h, w) + jnp.sum(x * x, axis=(1, 2))[:, None]


def _attention_explainer(normalizer):
    cfg = AttentionExplainerConfig(num_layers=L, num_heads=H, normalizer=normalizer)
    params = init(None, cfg)
    return lambda data: apply(params, pool_attention(data["attention"], data["mask"]),
                              data["mask"], config=cfg)


EXPLAINERS = {
    **{f"attention[{n}]": _attention_explainer(n) for n in sorted(NORMALIZERS)},
    "all_layers_attention": lambda d: baselines.all_layers_attention(
        pool_attention(d["attention"], d["mask"]), d["mask"]),
    "last_layer_attention": lambda d: baselines.last_layer_attention(
        pool_attention(d["attention"], d["mask"]), d["mask"]),
    "attention_rollout": lambda d: baselines.attention_rollout(d["attention"], d["mask"]),
    "random": lambda d: baselines.random_saliency(d["key"], d["mask"]),
    "saliency": lambda d: baselines.saliency(_classifier, d["x"], d["mask"]).saliency,
    "input_x_gradient": lambda d: baselines.input_x_gradient(
        _classifier, d["x"], d["mask"]).saliency,
    "integrated_gradients": lambda d: baselines.integrated_gradients(
        _classifier, d["x"], d["mask"], n_steps=8, chunk_size=3).saliency,
}


def _data(seed):
    keys = jax.random.split(jax.random.key(seed), 3)
    return {
        "attention": jax.random.normal(keys[0], (L, B, H, T, T)),
        "x": jax.random.normal(keys[1], (B, T, E)),
        "key": keys[2],
        "mask": MASK,
    }


@pytest.mark.parametrize("name", sorted(EXPLAINERS))
def test_conformance(name):
    explainer = EXPLAINERS[name]
    traces = []

    def counted(data):
        traces.append(1)
        return explainer(data)

    jitted = jax.jit(counted)
    out = jitted(_data(0))
    assert isinstance(out, Saliency)
    assert out.scores.shape == (B, T) and out.scores.dtype == jnp.float32
    np.testing.assert_array_equal(out.mask, MASK)
    assert float(jnp.abs(jnp.where(MASK, 0.0, out.scores)).max()) == 0.0
    assert bool(jnp.all(jnp.isfinite(out.scores)))
    # Real positions carry information (not all equal) where an example has >= 2 tokens.
    assert float(jnp.std(out.scores[0])) > 0
    # jit == eager, and a second call with new values does not retrace.
    eager = explainer(_data(0))
    np.testing.assert_allclose(out.scores, eager.scores, rtol=1e-5, atol=1e-6)
    jitted(_data(1))
    assert len(traces) == 1
    # vmap over an extra leading axis (e.g. seeds or ensembles) == per-slice calls.
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), _data(0), _data(1))
    batched = jax.vmap(explainer)(stacked)
    assert batched.scores.shape == (2, B, T)
    np.testing.assert_allclose(batched.scores[1], explainer(_data(1)).scores,
                               rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- to_distribution


def test_to_distribution_is_masked_softmax():
    scores = jax.random.normal(jax.random.key(0), (B, T))
    p = to_distribution(Saliency(scores, MASK), temperature=0.5)
    for b in range(B):
        real = np.asarray(MASK[b])
        z = np.asarray(scores[b])[real] / 0.5
        want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        np.testing.assert_allclose(np.asarray(p[b])[real], want, rtol=1e-5)
        assert np.all(np.asarray(p[b])[~real] == 0.0)


def test_to_distribution_handles_empty_rows_and_extreme_pads():
    mask = jnp.array([[True, False, False], [False, False, False]])
    scores = jnp.array([[1.0, 1e30, -jnp.inf], [0.0, 0.0, 0.0]])
    p = to_distribution(Saliency(scores, mask))
    np.testing.assert_array_equal(p, [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_to_distribution_gradients():
    mask = MASK
    check_grads(lambda s: to_distribution(Saliency(s, mask)),
                (jax.random.normal(jax.random.key(1), (B, T)),), order=1,
                modes=("fwd", "rev"), eps=1e-3, atol=1e-2, rtol=1e-2)
    grad = jax.grad(lambda s: jnp.sum(to_distribution(Saliency(s, mask))[:, 0] ** 2))(
        jnp.zeros((B, T)))
    assert float(jnp.abs(jnp.where(mask, 0.0, grad)).max()) == 0.0


def test_to_distribution_rejects_bad_shapes():
    with pytest.raises(ValueError, match="mask shape"):
        to_distribution(Saliency(jnp.zeros((2, 3)), jnp.ones((2, 4), bool)))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        to_distribution(Saliency(jnp.zeros((3,)), jnp.ones((3,), bool)))
    with pytest.raises(ValueError, match="temperature"):
        to_distribution(Saliency(jnp.zeros((2, 3)), jnp.ones((2, 3), bool)), temperature=0.0)


# ---------------------------------------------------------------- reductions


@pytest.mark.parametrize(
    ("name", "reference"),
    [
        ("l2", lambda a: np.linalg.norm(a, axis=-1)),
        ("sum", lambda a: a.sum(-1)),
        ("abs_sum", lambda a: np.abs(a.sum(-1))),
        ("l1", lambda a: np.abs(a).sum(-1)),
        ("mean", lambda a: a.mean(-1)),
    ],
)
def test_reductions_match_numpy(name, reference):
    a = np.asarray(jax.random.normal(jax.random.key(2), (B, T, E)))
    got = reduce_tokens(a, MASK, reduction=name)
    np.testing.assert_allclose(got.scores, np.where(MASK, reference(a), 0.0), rtol=1e-5)
    assert set(REDUCTIONS) == {"l2", "sum", "abs_sum", "l1", "mean"}


def test_l2_reduction_gradient_is_finite_at_zero():
    grad = jax.grad(lambda a: jnp.sum(reduce_tokens(a, MASK, reduction="l2").scores))(
        jnp.zeros((B, T, E)))
    assert bool(jnp.all(jnp.isfinite(grad)))


def test_reduction_errors():
    with pytest.raises(ValueError, match="valid choices"):
        reduce_tokens(jnp.zeros((B, T, E)), MASK, reduction="max")
    with pytest.raises(ValueError, match=r"\(B, T, D\)"):
        reduce_tokens(jnp.zeros((B, T)), MASK, reduction="sum")


# ---------------------------------------------------------------- public API


@pytest.mark.parametrize("module", ["smat.explainers", "baselines"])
def test_every_public_name_is_documented(module):
    mod = importlib.import_module(module)
    assert mod.__doc__
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, dict | tuple):
            continue  # data constants: documented in the module docstring / attribute doc
        assert obj.__doc__ and obj.__doc__.strip(), f"{module}.{name} has no docstring"


def test_learned_explainer_protocol():
    assert issubclass(smat.explainers.AttentionExplainer, smat.explainers.AbstractLearnedExplainer)
    with pytest.raises(TypeError):
        smat.explainers.AbstractLearnedExplainer()  # type: ignore[abstract]
