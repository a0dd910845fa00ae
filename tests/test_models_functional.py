"""Tests for smat.models.functional: pure split/apply, differentiable twice."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from smat.models import SequenceClassifier, TextConfig, functional

IDS = jnp.array([[2, 5, 9, 7], [2, 8, 0, 0]], jnp.int32)
MASK = (IDS != 0).astype(jnp.int32)
LABELS = jnp.array([0, 1])


def _model():
    cfg = dataclasses.replace(TextConfig.tiny(num_layers=1), hidden_dropout=0.1)
    return SequenceClassifier(cfg, num_labels=2, rngs=nnx.Rngs(0))


def test_apply_equals_module_call():
    model = _model()
    graphdef, params = functional.split(model)
    assert isinstance(params, nnx.State)
    ours = functional.apply(graphdef, params, IDS, attention_mask=MASK)
    np.testing.assert_allclose(ours.logits, model(IDS, attention_mask=MASK).logits, atol=1e-6)


def test_split_rejects_non_param_state():
    class WithRng(nnx.Module):
        def __init__(self):
            self.rngs = nnx.Rngs(0)
            self.w = nnx.Param(jnp.ones(2))

    with pytest.raises(ValueError, match="non-parameter state at .*rngs"):
        functional.split(WithRng())


def test_double_grad_through_apply():
    """grad of ||grad L||^2 / 2 (reverse-over-reverse) equals the Hessian-vector product
    H grad L (forward-over-reverse) and a central finite difference."""
    graphdef, params = functional.split(_model())
    key = jax.random.key(0)

    def loss(p):
        logits = functional.apply(graphdef, p, input_ids=IDS, attention_mask=MASK,
                                  dropout_rng=key, attention="none").logits
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), LABELS[:, None], 1))

    def half_sq_grad(p):
        g = jax.grad(loss)(p)
        return 0.5 * sum(jnp.vdot(x, x) for x in jax.tree.leaves(g))

    meta = jax.jit(jax.grad(half_sq_grad))(params)
    hvp = jax.jit(lambda p: jax.jvp(jax.grad(loss), (p,), (jax.grad(loss)(p),))[1])(params)
    flat_meta = np.concatenate([np.ravel(x) for x in jax.tree.leaves(meta)])
    flat_hvp = np.concatenate([np.ravel(x) for x in jax.tree.leaves(hvp)])
    assert np.all(np.isfinite(flat_meta)) and np.abs(flat_meta).max() > 0
    np.testing.assert_allclose(flat_meta, flat_hvp, rtol=1e-3, atol=1e-6)
    direction = jax.tree.map(lambda x: jax.random.normal(jax.random.key(1), x.shape), params)
    norm = jnp.sqrt(sum(jnp.vdot(x, x) for x in jax.tree.leaves(direction)))
    direction = jax.tree.map(lambda x: x / norm, direction)  # unit step direction
    eps = 1e-2
    shifted = [jax.tree.map(lambda p, d, s=s: p + s * eps * d, params, direction)
               for s in (1.0, -1.0)]
    value = jax.jit(half_sq_grad)
    finite = (value(shifted[0]) - value(shifted[1])) / (2 * eps)
    analytic = sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(meta),
                                                  jax.tree.leaves(direction), strict=True))
    np.testing.assert_allclose(float(finite), float(analytic), rtol=5e-2)


def test_cast_changes_only_floating_leaves_and_rejects_unknown_precisions():
    params = {"w": jnp.ones((2, 2), jnp.float32), "ids": jnp.arange(3)}
    low = functional.cast(params, "bfloat16")
    assert low["w"].dtype == jnp.bfloat16 and low["ids"].dtype == params["ids"].dtype
    assert functional.cast(low, "float32")["w"].dtype == jnp.float32
    with pytest.raises(ValueError, match=r"precision must be one of \('float32', 'bfloat16'\), "
                                         "got 'fp8'"):
        functional.cast(params, "fp8")


def test_precision_of_reads_the_floating_leaves_and_rejects_a_mix():
    params = {"w": jnp.ones((2, 2), jnp.float32), "ids": jnp.arange(3)}
    assert functional.precision_of(params) == "float32"
    assert functional.precision_of(functional.cast(params, "bfloat16")) == "bfloat16"
    with pytest.raises(ValueError, match=r"parameters in \['bfloat16', 'float32'\]"):
        functional.precision_of({**params, "b": jnp.ones(2, jnp.bfloat16)})
    with pytest.raises(ValueError, match=r"parameters in \['float16'\]"):
        functional.precision_of({"w": jnp.ones(2, jnp.float16)})
