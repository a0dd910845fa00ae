"""Tests for smat.training.regularizers (Jukić et al. Eqs. 1-3, appendix A.2) and their use
in teacher training."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from smat.models import functional
from smat.training import regularizers, teacher
from tests.helpers import synthetic_encoded, tiny_classifier


def test_conicity_of_identical_and_orthonormal_vectors():
    same = jnp.tile(jnp.asarray([[[0.3, -1.0, 2.0]]]), (1, 4, 1))  # (1, 4, 3)
    np.testing.assert_allclose(regularizers.conicity(same, jnp.ones((1, 4))), [1.0], rtol=1e-6)
    # T orthonormal vectors: the mean has norm 1/sqrt(T) and each cosine is 1/sqrt(T)
    for t in (2, 3, 5):
        eye = jnp.eye(t)[None]
        np.testing.assert_allclose(regularizers.conicity(eye, jnp.ones((1, t))),
                                   [1 / np.sqrt(t)], rtol=1e-6)


def test_tying_is_zero_on_the_embeddings_and_the_mean_squared_distance_otherwise():
    e = jnp.asarray(np.random.default_rng(0).normal(size=(2, 5, 4)), jnp.float32)
    mask = jnp.asarray([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    np.testing.assert_allclose(regularizers.tying(e, e, mask), [0.0, 0.0], atol=1e-7)
    shifted = e.at[..., 0].add(2.0)  # each real token moves by 2: squared distance 4
    np.testing.assert_allclose(regularizers.tying(shifted, e, mask), [4.0, 4.0], rtol=1e-6)


def test_padding_is_ignored():
    rng = np.random.default_rng(1)
    h = jnp.asarray(rng.normal(size=(1, 6, 4)), jnp.float32)
    e = jnp.asarray(rng.normal(size=(1, 6, 4)), jnp.float32)
    mask = jnp.asarray([[1, 1, 1, 0, 0, 0]])
    garbage = h.at[:, 3:].set(100.0)
    for fn, args in ((regularizers.conicity, ()), (regularizers.tying, (e,))):
        np.testing.assert_allclose(fn(garbage, *args, mask), fn(h, *args, mask), rtol=1e-6)
        np.testing.assert_allclose(fn(h, *args, mask), fn(h[:, :3], *(a[:, :3] for a in args),
                                                         mask[:, :3]), rtol=1e-6)


def test_gradients_pass_check_grads():
    rng = np.random.default_rng(2)
    h = jnp.asarray(rng.normal(size=(2, 4, 3)), jnp.float32)
    e = jnp.asarray(rng.normal(size=(2, 4, 3)), jnp.float32)
    mask = jnp.asarray([[1, 1, 1, 0], [1, 1, 1, 1]])
    with jax.enable_x64(True):
        h64, e64 = h.astype(jnp.float64), e.astype(jnp.float64)
        check_grads(lambda x: regularizers.conicity(x, mask).sum(), (h64,), order=2)
        check_grads(lambda x: regularizers.tying(x, e64, mask).sum(), (h64,), order=2)


def test_bad_shapes_name_both_sizes():
    with pytest.raises(ValueError, match=r"hidden \(1, 3, 4\) and embeddings \(1, 3, 2\)"):
        regularizers.tying(jnp.ones((1, 3, 4)), jnp.ones((1, 3, 2)), jnp.ones((1, 3)))
    with pytest.raises(ValueError, match=r"mask must be \(batch, seq\) = \(1, 3\), got \(3,\)"):
        regularizers.conicity(jnp.ones((1, 3, 4)), jnp.ones(3))


def test_select_weight_takes_the_strongest_within_three_points():
    grid = {0.1: 88.0, 0.5: 87.2, 1.0: 86.1, 5.0: 84.9, 10.0: 80.0}
    assert regularizers.select_weight(grid, unregularized=88.0) == 1.0
    assert regularizers.select_weight(grid, unregularized=88.0, tolerance=4.0) == 5.0
    assert regularizers.select_weight({5.0: 70.0}, unregularized=88.0) == 0.0
    with pytest.raises(ValueError, match="at least one"):
        regularizers.select_weight({}, unregularized=88.0)


@pytest.mark.slow  # about 1 min alone (2.5 min on a busy machine): several compilations
def test_regularized_teacher_step_logs_both_and_compiles_once():
    model = tiny_classifier(seed=0)
    graphdef, params = functional.split(model)
    data = synthetic_encoded(8, seq_len=16, seed=0)
    config = teacher.TeacherTrainConfig(learning_rate=1e-3, warmup_steps=0, tying_weight=1.0,
                                        conicity_weight=0.5)
    optimizer = teacher.teacher_optimizer(config, 10)
    batch = (data.input_ids, data.attention_mask, data.token_type_ids, data.labels)
    kwargs = {"optimizer": optimizer, "task": "classification", "conicity_weight": 0.5,
              "tying_weight": 1.0}
    state = teacher.TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params))
    unregularized = teacher.teacher_update(graphdef, state, *batch, jax.random.key(0),
                                           optimizer=optimizer, task="classification")[1]
    state, metrics = teacher.teacher_step(graphdef, state, *batch, jax.random.key(0), **kwargs)
    compiled = teacher.teacher_step._cache_size()
    state, metrics = teacher.teacher_step(graphdef, state, *batch, jax.random.key(0), **kwargs)
    assert teacher.teacher_step._cache_size() == compiled
    first = {k: float(v) for k, v in unregularized.items()}
    assert 0 < first["conicity"] <= 1 and first["tying"] > 0
    assert first["loss"] == pytest.approx(first["task_loss"])
    assert float(metrics["loss"]) == pytest.approx(
        float(metrics["task_loss"]) + 0.5 * float(metrics["conicity"])
        + float(metrics["tying"]), rel=1e-5)


def test_regularizer_weights_are_checked():
    with pytest.raises(ValueError, match="tying_weight must be >= 0, got -1"):
        teacher.TeacherTrainConfig(tying_weight=-1.0)


def test_tying_target_picks_the_embedded_tokens_it_names():
    """The logged tying equals tying(last hidden, e) with e the embedding block's output by
    default and the raw word embeddings when asked (the two differ on any BERT)."""
    model = tiny_classifier(seed=0)
    graphdef, params = functional.split(model)
    data = synthetic_encoded(4, seq_len=8, seed=0)
    config = teacher.TeacherTrainConfig(learning_rate=1e-3, warmup_steps=0)
    optimizer = teacher.teacher_optimizer(config, 10)
    batch = (data.input_ids, data.attention_mask, data.token_type_ids, data.labels)
    key = jax.random.key(0)
    out = functional.apply(graphdef, params, data.input_ids, attention_mask=data.attention_mask,
                           token_type_ids=data.token_type_ids, attention="none",
                           dropout_rng=jax.random.fold_in(key, 0))  # the step's dropout
    logged = {}
    for target, embedded in (("embedding_output", out.encoder.embedding_output),
                             ("word_embeddings", out.encoder.inputs_embeds)):
        state = teacher.TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params))
        metrics = teacher.teacher_update(graphdef, state, *batch, key, optimizer=optimizer,
                                         task="classification", tying_target=target)[1]
        expected = jnp.mean(regularizers.tying(out.encoder.last_hidden_state, embedded,
                                               data.attention_mask))
        logged[target] = float(metrics["tying"])
        assert logged[target] == pytest.approx(float(expected), rel=1e-5)
    assert logged["embedding_output"] != pytest.approx(logged["word_embeddings"], rel=1e-2)
    with pytest.raises(ValueError, match="tying_target must be one of"):
        teacher.TeacherTrainConfig(tying_target="hidden")
