"""Tests of the SMaT student-loss terms (smat.training.losses, paper Eq. 3)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from smat.explainers import Saliency, to_distribution
from smat.training.losses import explanation_kl, label_loss, simulation_loss


def saliencies(key, *, batch=3, seq=7, lengths=(7, 4, 1)):
    k1, k2 = jax.random.split(key)
    mask = jnp.arange(seq)[None, :] < jnp.asarray(lengths)[:, None]  # (B, T)
    teacher = Saliency(jax.random.normal(k1, (batch, seq)) * 2.0, mask)
    student = Saliency(jax.random.normal(k2, (batch, seq)), mask)
    return teacher, student


def test_simulation_loss_classification_uses_teacher_argmax(key):
    student = jax.random.normal(key, (5, 4))
    teacher = jax.random.normal(jax.random.fold_in(key, 1), (5, 4))
    expected = optax.softmax_cross_entropy_with_integer_labels(student, teacher.argmax(-1)).mean()
    loss = simulation_loss(student, teacher, task="classification")
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    # Only the teacher's prediction matters, not its confidence.
    np.testing.assert_allclose(simulation_loss(student, 10.0 * teacher, task="classification"),
                               loss, rtol=1e-6)


def test_simulation_loss_regression_is_mse_and_teacher_gets_no_gradient(key):
    student = jax.random.normal(key, (6, 1))
    teacher = jax.random.normal(jax.random.fold_in(key, 1), (6, 1))
    np.testing.assert_allclose(simulation_loss(student, teacher, task="regression"),
                               jnp.mean((student - teacher) ** 2), rtol=1e-6)
    grad_teacher = jax.grad(simulation_loss, argnums=1)(student, teacher, task="regression")
    assert bool(jnp.all(grad_teacher == 0))


def test_simulation_loss_rejects_bad_input(key):
    x = jnp.zeros((2, 3))
    with pytest.raises(ValueError, match="same shape"):
        simulation_loss(x, jnp.zeros((2, 4)), task="classification")
    with pytest.raises(ValueError, match="ranking"):
        simulation_loss(x, x, task="ranking")


def test_label_loss_matches_cross_entropy_and_squared_error(key):
    logits = jax.random.normal(key, (4, 3))
    labels = jnp.array([0, 2, 1, 2])
    np.testing.assert_allclose(
        label_loss(logits, labels, task="classification"),
        optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean(), rtol=1e-6)
    targets = jnp.array([0.5, -1.0, 2.0, 0.0])
    np.testing.assert_allclose(label_loss(logits[:, :1], targets, task="regression"),
                               jnp.mean((logits[:, 0] - targets) ** 2), rtol=1e-6)


def test_explanation_kl_matches_kl_of_to_distribution(key):
    teacher, student = saliencies(key)
    p, q = to_distribution(teacher), to_distribution(student)
    safe = teacher.mask
    expected = jnp.sum(jnp.where(safe, p * (jnp.log(jnp.where(safe, p, 1.0))
                                            - jnp.log(jnp.where(safe, q, 1.0))), 0.0), -1).mean()
    np.testing.assert_allclose(explanation_kl(teacher, student), expected, rtol=1e-5)
    assert float(explanation_kl(teacher, student)) > 0
    np.testing.assert_allclose(explanation_kl(teacher, teacher), 0.0, atol=1e-6)


def test_explanation_kl_temperature_divides_scores(key):
    teacher, student = saliencies(key)
    scaled = explanation_kl(Saliency(teacher.scores / 2.0, teacher.mask),
                            Saliency(student.scores / 2.0, student.mask))
    np.testing.assert_allclose(explanation_kl(teacher, student, temperature=2.0), scaled,
                               rtol=1e-6)


def test_explanation_kl_ignores_padding_values(key):
    teacher, student = saliencies(key)
    noise = 1e3 * jax.random.normal(jax.random.fold_in(key, 7), teacher.scores.shape)
    pad = ~teacher.mask
    loud_teacher = Saliency(jnp.where(pad, noise, teacher.scores), teacher.mask)
    loud_student = Saliency(jnp.where(pad, -noise, student.scores), student.mask)
    np.testing.assert_allclose(explanation_kl(loud_teacher, loud_student),
                               explanation_kl(teacher, student), rtol=1e-6)
    # Appending padded positions changes nothing either.
    wider = [Saliency(jnp.pad(s.scores, ((0, 0), (0, 3)), constant_values=5.0),
                      jnp.pad(s.mask, ((0, 0), (0, 3)))) for s in (teacher, student)]
    np.testing.assert_allclose(explanation_kl(*wider), explanation_kl(teacher, student),
                               rtol=1e-6)
    grads = jax.grad(lambda s: explanation_kl(teacher, Saliency(s, student.mask)))(student.scores)
    assert bool(jnp.all(grads[pad] == 0))


def test_explanation_kl_stays_finite_when_student_probability_underflows():
    mask = jnp.ones((1, 3), bool)
    teacher = Saliency(jnp.zeros((1, 3)), mask)
    student = Saliency(jnp.array([[0.0, 0.0, -1e4]]), mask)  # exp(-1e4) underflows float32

    def loss(t, s):
        return explanation_kl(Saliency(t, mask), Saliency(s, mask))

    value = loss(teacher.scores, student.scores)
    grads = jax.grad(loss, argnums=(0, 1))(teacher.scores, student.scores)
    assert np.isfinite(float(value)) and float(value) > 1e3
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)


def test_explanation_kl_rejects_bad_input(key):
    teacher, student = saliencies(key)
    with pytest.raises(ValueError, match="temperature"):
        explanation_kl(teacher, student, temperature=0.0)
    with pytest.raises(ValueError, match="same shape"):
        explanation_kl(teacher, Saliency(student.scores[:, :3], student.mask[:, :3]))
    with pytest.raises(ValueError, match="mask"):
        explanation_kl(teacher, Saliency(student.scores, student.mask[:, :3]))
