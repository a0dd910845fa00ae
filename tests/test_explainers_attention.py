"""Tests for smat.explainers.attention: the SMaT attention explainer (paper Eq. 11)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import baselines
from smat.explainers import (
    AttentionExplainer,
    AttentionExplainerConfig,
    AttentionExplainerParams,
    apply,
    head_weights,
    init,
    pool_attention,
    to_distribution,
)
from smat.explainers.normalizers import NORMALIZERS

L, B, H, T = 3, 4, 2, 7
LENGTHS = np.array([7, 5, 3, 1])


@pytest.fixture
def mask():
    return jnp.asarray(np.arange(T)[None, :] < LENGTHS[:, None])


@pytest.fixture
def logits():
    return jax.random.normal(jax.random.key(3), (L, B, H, T, T)) * 2.0


def masked_log_softmax(logits, mask):
    """Log attention probabilities as a BERT computes them (padded keys get -inf)."""
    return jax.nn.log_softmax(jnp.where(mask[None, :, None, None, :], logits, -jnp.inf), -1)


def config(**overrides):
    return AttentionExplainerConfig(num_layers=L, num_heads=H, **overrides)


def test_pool_attention_mean_and_cls_match_numpy(logits, mask):
    pooled = np.asarray(pool_attention(logits, mask))
    lg, m = np.asarray(logits), np.asarray(mask)
    for b in range(B):
        real = m[b]
        want = lg[:, b][:, :, real, :].mean(axis=2)  # (L, H, T) mean over real queries
        np.testing.assert_allclose(pooled[:, b], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(pool_attention(logits, mask, query_pooling="cls"),
                                  logits[:, :, :, 0, :])


@pytest.mark.parametrize("normalizer", sorted(NORMALIZERS))
@pytest.mark.parametrize("query_pooling", ["mean", "cls"])
def test_logits_path_equals_log_probs_path(logits, mask, normalizer, query_pooling):
    cfg = config(normalizer=normalizer, query_pooling=query_pooling)
    params = AttentionExplainerParams(jax.random.normal(jax.random.key(5), (L * H,)))
    from_logits = pool_attention(logits, mask, query_pooling=query_pooling)
    log_probs = masked_log_softmax(logits, mask)
    from_log_probs = pool_attention(log_probs, mask, query_pooling=query_pooling,
                                    kind="log_probs")
    from_probs = pool_attention(jnp.exp(log_probs), mask, query_pooling=query_pooling,
                                kind="probs")
    want = to_distribution(apply(params, from_logits, mask, config=cfg))
    for pooled in (from_log_probs, from_probs):
        got = to_distribution(apply(params, pooled, mask, config=cfg))
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert bool(jnp.all(jnp.isfinite(want)))


@pytest.mark.parametrize("normalizer", sorted(NORMALIZERS))
def test_uniform_init_is_the_static_all_layers_explainer(logits, mask, normalizer):
    pooled = pool_attention(logits, mask)
    cfg = config(normalizer=normalizer)
    learned = apply(init(None, cfg), pooled, mask, config=cfg)
    static = baselines.all_layers_attention(pooled, mask)
    np.testing.assert_allclose(learned.scores, static.scores, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(learned.mask, static.mask)


def test_uniform_init_last_layer_is_the_static_last_layer_explainer(logits, mask):
    pooled = pool_attention(logits, mask)
    cfg = config(layer=-1)
    learned = apply(init(None, cfg), pooled, mask, config=cfg)
    static = baselines.last_layer_attention(pooled, mask)
    np.testing.assert_allclose(learned.scores, static.scores, rtol=1e-6, atol=1e-6)


def test_head_k_selects_one_head(logits, mask):
    pooled = pool_attention(logits, mask)
    cfg = config(init="head_k", head=1 * H + 1)  # layer 1, head 1
    saliency = apply(init(None, cfg), pooled, mask, config=cfg)
    want = jnp.where(mask, pooled[1, :, 1, :], 0.0)
    np.testing.assert_allclose(saliency.scores, want, rtol=1e-6)
    lam = head_weights(init(None, cfg), config=cfg)
    assert lam.shape == (L, H) and float(lam[1, 1]) == 1.0 and float(lam.sum()) == 1.0


def test_single_layer_and_temperature(logits, mask):
    pooled = pool_attention(logits, mask)
    cfg = config(layer=1, temperature=2.0, init="head_k", head=0)
    scores = apply(init(None, cfg), pooled, mask, config=cfg).scores
    np.testing.assert_allclose(scores, jnp.where(mask, pooled[1, :, 0] / 2.0, 0.0), rtol=1e-6)
    assert cfg.num_coefficients == H


def test_padding_is_ignored_and_gets_zero_probability(logits, mask):
    pooled = pool_attention(logits, mask)
    poisoned = jnp.where(mask[None, :, None, :], pooled, -jnp.inf)  # pads may be -inf
    cfg = config()
    params = init(None, cfg)
    a = apply(params, pooled, mask, config=cfg)
    b = apply(params, poisoned, mask, config=cfg)
    np.testing.assert_array_equal(a.scores, b.scores)
    p = to_distribution(b)
    assert float(jnp.abs(jnp.where(mask, 0.0, p)).max()) == 0.0
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-6)


def test_gradient_wrt_phi_is_finite_and_nonzero(logits, mask):
    pooled = pool_attention(logits, mask)
    cfg = config(normalizer="softmax")
    target = jax.nn.softmax(jax.random.normal(jax.random.key(9), (B, T)), -1)
    target = target * mask.astype(target.dtype)
    target = target / target.sum(-1, keepdims=True)

    def kl(params):
        p = to_distribution(apply(params, pooled, mask, config=cfg))
        return jnp.sum(jnp.where(mask, target * (jnp.log(target + 1e-12) - jnp.log(p + 1e-12)), 0))

    grad = jax.grad(kl)(init(None, cfg)).phi
    assert grad.shape == (L * H,)
    assert bool(jnp.all(jnp.isfinite(grad))) and float(jnp.abs(grad).max()) > 0


def test_facade_matches_functions(logits, mask):
    cfg = config(normalizer="entmax15")
    explainer = AttentionExplainer(cfg)
    params = explainer.init(jax.random.key(0))
    pooled = pool_attention(logits, mask)
    np.testing.assert_array_equal(explainer.apply(params, pooled, mask).scores,
                                  apply(params, pooled, mask, config=cfg).scores)
    with pytest.raises(TypeError, match="AttentionExplainerConfig"):
        AttentionExplainer({"num_layers": 1})


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"num_layers": 0}, "num_layers"),
        ({"layer": 3}, "layer=3"),
        ({"normalizer": "sparsemx"}, "sparsemx"),
        ({"query_pooling": "max"}, "query_pooling"),
        ({"init": "random"}, "init"),
        ({"input": "probs"}, "input"),
        ({"head": 6}, "head=6"),
        ({"temperature": 0.0}, "temperature"),
    ],
)
def test_config_validation(overrides, match):
    kwargs = {"num_layers": L, "num_heads": H} | overrides
    with pytest.raises(ValueError, match=match):
        AttentionExplainerConfig(**kwargs)


def test_config_is_frozen_and_hashable():
    cfg = config()
    assert hash(cfg) == hash(config())
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.layer = 0  # type: ignore[misc]


def test_apply_rejects_mismatched_shapes(logits, mask):
    pooled = pool_attention(logits, mask)
    cfg = AttentionExplainerConfig(num_layers=L + 1, num_heads=H)
    with pytest.raises(ValueError, match="pooled"):
        apply(init(None, cfg), pooled, mask, config=cfg)
    with pytest.raises(ValueError, match="phi"):
        apply(AttentionExplainerParams(jnp.zeros(3)), pooled, mask, config=config())
    with pytest.raises(ValueError, match="kind"):
        pool_attention(logits, mask, kind="attn")
    with pytest.raises(ValueError, match=r"\(L, B, H, T, T\)"):
        pool_attention(logits[0], mask)
