"""Tests for baselines.attention: head means, attention rollout and the random baseline."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from baselines import (
    all_layers_attention,
    attention_rollout,
    last_layer_attention,
    mean_attention,
    random_saliency,
)

L, B, H, T = 3, 3, 2, 6
LENGTHS = np.array([6, 4, 2])
MASK = jnp.asarray(np.arange(T)[None, :] < LENGTHS[:, None])


@pytest.fixture
def logits():
    return jax.random.normal(jax.random.key(7), (L, B, H, T, T)) * 1.5


def rollout_reference(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-example numpy rollout with explicit loops (Abnar & Zuidema 2020)."""
    out = np.zeros(mask.shape)
    for b in range(mask.shape[0]):
        n = int(mask[b].sum())
        rollout = np.eye(n)
        for layer in range(logits.shape[0]):
            z = logits[layer, b][:, :n, :n].astype(np.float64)  # real queries and keys
            p = np.exp(z - z.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            a = p.mean(0) + np.eye(n)
            a /= a.sum(-1, keepdims=True)
            rollout = a @ rollout
        out[b, :n] = rollout[0]
    return out


def test_mean_attention_matches_numpy():
    pooled = np.asarray(jax.random.normal(jax.random.key(1), (L, B, H, T)))
    m = np.asarray(MASK)
    np.testing.assert_allclose(all_layers_attention(pooled, MASK).scores,
                               np.where(m, pooled.mean((0, 2)), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(last_layer_attention(pooled, MASK).scores,
                               np.where(m, pooled[-1].mean(1), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean_attention(pooled, MASK, layer=1).scores,
                               np.where(m, pooled[1].mean(1), 0), rtol=1e-5, atol=1e-6)


def test_mean_attention_ignores_padded_values():
    pooled = jax.random.normal(jax.random.key(1), (L, B, H, T))
    poisoned = jnp.where(MASK[None, :, None, :], pooled, jnp.nan)
    np.testing.assert_array_equal(all_layers_attention(poisoned, MASK).scores,
                                  all_layers_attention(pooled, MASK).scores)


def test_rollout_matches_reference(logits):
    got = attention_rollout(logits, MASK)
    want = rollout_reference(np.asarray(logits), np.asarray(MASK))
    np.testing.assert_allclose(got.scores, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.scores.sum(-1), 1.0, atol=1e-5)
    assert float(got.scores.min()) >= 0.0


def test_rollout_probs_input_equals_logits_input(logits):
    probs = jax.nn.softmax(jnp.where(MASK[None, :, None, None, :], logits, -jnp.inf), -1)
    np.testing.assert_allclose(attention_rollout(probs, MASK, kind="probs").scores,
                               attention_rollout(logits, MASK).scores, rtol=1e-5, atol=1e-6)


def test_rollout_mean_query_averages_rows(logits):
    cls = attention_rollout(logits[:, :1], MASK[:1], query="cls").scores
    mean = attention_rollout(logits[:, :1], MASK[:1], query="mean").scores
    assert not np.allclose(cls, mean)
    np.testing.assert_allclose(mean.sum(-1), 1.0, atol=1e-5)


def test_rollout_of_uniform_attention_is_uniformish():
    """Uniform attention over n real tokens: every rollout row is uniform after one layer."""
    zeros = jnp.zeros((1, B, H, T, T))
    scores = attention_rollout(zeros, MASK).scores
    n = LENGTHS[0]
    want = np.full(n, 1 / (2 * n))
    want[0] += 0.5
    np.testing.assert_allclose(scores[0, :n], want, rtol=1e-6)


def test_random_is_seeded():
    a = random_saliency(jax.random.key(0), MASK)
    b = random_saliency(jax.random.key(0), MASK)
    c = random_saliency(jax.random.key(1), MASK)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert not np.array_equal(a.scores, c.scores)
    assert float(jnp.abs(jnp.where(MASK, 0.0, a.scores)).max()) == 0.0


def test_errors(logits):
    pooled = jnp.zeros((L, B, H, T))
    with pytest.raises(ValueError, match="layer=3"):
        mean_attention(pooled, MASK, layer=3)
    with pytest.raises(ValueError, match=r"\(L, B, H, T\)"):
        mean_attention(pooled[0], MASK)
    with pytest.raises(ValueError, match="mask"):
        mean_attention(pooled, MASK[:, :3])
    with pytest.raises(ValueError, match="kind"):
        attention_rollout(logits, MASK, kind="log_probs")
    with pytest.raises(ValueError, match="query"):
        attention_rollout(logits, MASK, query="max")
    with pytest.raises(ValueError, match=r"\(L, B, H, T, T\)"):
        attention_rollout(logits[0], MASK)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        random_saliency(jax.random.key(0), MASK[0])
