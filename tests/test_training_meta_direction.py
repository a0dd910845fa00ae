"""Tests of smat.training.meta_direction: the mean meta-gradient of SMaT's outer step (Eq. 9)
over batch pairs, with its standard error and z-score per teacher-explainer coefficient.

A planted problem with a known answer: a linear student whose explanation is its own token
weights, labels decided by the token at one position, and a teacher explainer of whose heads
only head 0 points at that position (the others are noise). Raising head 0 moves the pilot
student's weight onto the deciding token and lowers the validation loss, so its meta-gradient
is negative for every pair; the noise heads' gradients average out."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat import explainers
from smat.explainers import Saliency
from smat.training.meta_direction import MetaDirection, meta_direction, pair_meta_gradients
from smat.training.scaffold import (
    ScaffoldConfig,
    ScaffoldFunctions,
    inner_optimizer,
    pilot_objective,
)

SEQ, HEADS, PLANTED, DECIDING = 6, 8, 0, 2
PAIRS, BATCH = 48, 16
CONFIG = ScaffoldConfig(beta=1.0, inner_learning_rate=0.5, inner_weight_decay=0.0,
                        inner_clip_norm=100.0)
EXPLAINER = explainers.AttentionExplainerConfig(num_layers=1, num_heads=HEADS,
                                                normalizer="identity")


def linear_student(theta, batch, dropout_rng=None):
    """logits [0, x.w + b] (B, 2); its 'pooled attention' is its token weights w (B, T)."""
    del dropout_rng
    score = batch["x"] @ theta["w"] + theta["b"]  # (B,)
    logits = jnp.stack([jnp.zeros_like(score), score], axis=-1)  # (B, 2)
    return logits, jnp.broadcast_to(theta["w"][None, :], batch["x"].shape)


def student_explainer(phi_s, weights, mask):
    del phi_s
    return Saliency(weights, mask)


def teacher_explainer(phi_t, features, mask):
    """The attention explainer over cached (B, 1, H, T) teacher rows."""
    return explainers.apply(phi_t, jnp.swapaxes(features, 0, 1), mask, config=EXPLAINER)


def flipped_teacher_explainer(phi_t, features, mask):
    """A deliberately wrong explainer: the explanation's sign flipped."""
    saliency = teacher_explainer(phi_t, features, mask)
    return saliency._replace(scores=-saliency.scores)


FUNCTIONS = ScaffoldFunctions(student_forward=linear_student, student_explainer=student_explainer,
                              teacher_explainer=teacher_explainer)
FLIPPED = ScaffoldFunctions(student_forward=linear_student, student_explainer=student_explainer,
                            teacher_explainer=flipped_teacher_explainer)


def planted_batches(key, *, pairs=PAIRS, batch=BATCH, planted_at=DECIDING):
    """(P, B, ...) batches: x in {-1, 1}, label = x[DECIDING] > 0; teacher head 0 has a
    logit of 3 at `planted_at`, the other heads standard normal logits everywhere."""
    k_x, k_noise = jax.random.split(key)
    x = jnp.where(jax.random.bernoulli(k_x, 0.5, (pairs, batch, SEQ)), 1.0, -1.0)
    labels = (x[..., DECIDING] > 0).astype(jnp.int32)
    noise = jax.random.normal(k_noise, (pairs, batch, 1, HEADS, SEQ))
    planted = 3.0 * jax.nn.one_hot(planted_at, SEQ)  # (T,)
    rows = noise.at[:, :, 0, PLANTED, :].set(jnp.broadcast_to(planted, (pairs, batch, SEQ)))
    return {"x": x, "attention_mask": jnp.ones((pairs, batch, SEQ), jnp.int32),
            "teacher_logits": jax.nn.one_hot(labels, 2), "teacher_features": rows}


def student():
    return {"w": jnp.zeros((SEQ,)), "b": jnp.zeros(())}


def uniform():
    return explainers.init(None, EXPLAINER)


def planted_head_found(z, *, head=PLANTED, threshold=6.0, others_below=4.0):
    """The check the tests make: the outer step raises `head` (z far below 0) and no other
    head stands out."""
    others = np.delete(np.asarray(z), head)
    return bool(z[head] < -threshold and np.all(np.abs(others) < others_below))


@functools.cache
def direction(planted_at=DECIDING, functions=FUNCTIONS):
    trains = planted_batches(jax.random.key(0), planted_at=planted_at)
    valids = planted_batches(jax.random.key(1), planted_at=planted_at)
    return meta_direction(uniform(), student(), None, trains, valids, config=CONFIG,
                          functions=functions)


def test_finds_the_planted_head():
    result = direction()
    assert isinstance(result, MetaDirection)
    z = np.asarray(result.z_score.phi)
    assert z.shape == (HEADS,)
    assert planted_head_found(z), z
    assert np.all(np.asarray(result.gradients.phi)[:, PLANTED] < 0)  # every single pair


def test_a_sign_flipped_explainer_fails_the_check():
    z = np.asarray(direction(functions=FLIPPED).z_score.phi)
    assert not planted_head_found(z), z
    assert z[PLANTED] > 6.0  # the flipped explanation points the student away: lowered


def test_a_head_planted_at_the_wrong_token_fails_the_check():
    z = np.asarray(direction(planted_at=DECIDING + 1).z_score.phi)
    assert not planted_head_found(z), z


def test_statistics_match_per_pair_gradients():
    trains = planted_batches(jax.random.key(2), pairs=3)
    valids = planted_batches(jax.random.key(3), pairs=3)
    result = meta_direction(uniform(), student(), None, trains, valids, config=CONFIG,
                            functions=FUNCTIONS)
    value_and_grad = jax.jit(jax.value_and_grad(pilot_objective),
                             static_argnames=("config", "functions"))
    opt_state = inner_optimizer(CONFIG).init((student(), None))
    per_pair = [value_and_grad(uniform(), student(), None, opt_state,
                               jax.tree.map(lambda a, p=p: a[p], trains),
                               jax.tree.map(lambda a, p=p: a[p], valids), None,
                               config=CONFIG, functions=FUNCTIONS) for p in range(3)]
    grads = np.stack([np.asarray(g.phi) for _, g in per_pair])  # (3, H)
    np.testing.assert_allclose(result.gradients.phi, grads, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(result.outer_loss, [float(v) for v, _ in per_pair], rtol=1e-6)
    np.testing.assert_allclose(result.mean.phi, grads.mean(0), rtol=1e-5, atol=1e-8)
    se = grads.std(0, ddof=1) / np.sqrt(3)
    np.testing.assert_allclose(result.standard_error.phi, se, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(result.z_score.phi, grads.mean(0) / se, rtol=1e-3)


def test_dropout_keys_are_folded_per_pair():
    trains = planted_batches(jax.random.key(2), pairs=2)
    valids = planted_batches(jax.random.key(3), pairs=2)
    opt_state = inner_optimizer(CONFIG).init((student(), None))
    losses, _ = pair_meta_gradients(uniform(), student(), None, opt_state, trains, valids,
                                    jax.random.key(5), config=CONFIG, functions=FUNCTIONS)
    assert losses.shape == (2,)  # the linear student ignores dropout: only the plumbing


def test_errors():
    one = planted_batches(jax.random.key(0), pairs=1)
    with pytest.raises(ValueError, match="at least 2 batch pairs"):
        meta_direction(uniform(), student(), None, one, one, config=CONFIG, functions=FUNCTIONS)
    two = planted_batches(jax.random.key(0), pairs=2)
    with pytest.raises(ValueError, match="same leading"):
        meta_direction(uniform(), student(), None, two, one, config=CONFIG, functions=FUNCTIONS)
    static = ScaffoldFunctions(student_forward=linear_student, student_explainer=student_explainer)
    with pytest.raises(ValueError, match="learned teacher explainer"):
        meta_direction(uniform(), student(), None, two, two, config=CONFIG, functions=static)
