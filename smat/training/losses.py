"""The two terms of the SMaT student loss (paper Eq. 3): simulation and explanation losses.

.. math::

   L_{student}(S_\\theta, E_{\\phi_S}, T, E_{\\phi_T}, x)
     = L_{sim}(S_\\theta(x), T(x))
       + \\beta\\, L_{expl}(E_{\\phi_S}(S_\\theta, x), E_{\\phi_T}(T, x))

Both functions are pure, jit-able and twice differentiable (the outer SMaT gradient, Eq. 9,
differentiates through a gradient of them).

References:
  Fernandes et al, `Learning to Scaffold: Optimizing Model Explanations for Teaching
  <https://arxiv.org/abs/2204.10810>`_, 2022, **Eq. 3**.
"""

from typing import Literal

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from smat.explainers import Saliency

Task = Literal["classification", "regression"]
TASKS: tuple[str, ...] = ("classification", "regression")


def simulation_loss(
    student_logits: Float[ArrayLike, "batch classes"],
    teacher_logits: Float[ArrayLike, "batch classes"],
    *,
    task: Task,
) -> Float[Array, ""]:
    """Simulation loss L_sim of paper Eq. 3: how well the student reproduces the teacher.

    .. math::

       L_{sim} = \\begin{cases}
         -\\frac{1}{B}\\sum_b \\log \\mathrm{softmax}(S(x_b))_{\\arg\\max_c T(x_b)_c}
           & \\text{classification} \\\\
         \\frac{1}{BC}\\sum_{b,c} (S(x_b)_c - T(x_b)_c)^2 & \\text{regression}
       \\end{cases}

    The teacher's prediction (its argmax, or its output for regression) is the target: never the
    gold label. No gradient flows into ``teacher_logits``.

    Args:
      student_logits: (B, C) student outputs (C = 1 for regression).
      teacher_logits: (B, C) teacher outputs, same shape.
      task: "classification" or "regression".

    Returns:
      Scalar loss averaged over the batch.

    Raises:
      ValueError: unknown ``task`` or mismatched / non-2-D shapes.
    """
    student_logits = jnp.asarray(student_logits)
    teacher_logits = jax.lax.stop_gradient(jnp.asarray(teacher_logits))
    if student_logits.ndim != 2 or student_logits.shape != teacher_logits.shape:
        raise ValueError(
            "simulation_loss expects student_logits and teacher_logits of the same shape "
            f"(batch, classes); got {student_logits.shape} and {teacher_logits.shape}."
        )
    if task == "classification":
        return label_loss(student_logits, jnp.argmax(teacher_logits, axis=-1), task=task)
    return label_loss(student_logits, teacher_logits[:, 0], task=task)


def label_loss(
    logits: Float[ArrayLike, "batch classes"],
    labels: ArrayLike,
    *,
    task: Task,
) -> Float[Array, ""]:
    """Supervised loss against targets: cross-entropy on class ids, or squared error.

    .. math::

       \\frac{1}{B}\\sum_b -\\log \\mathrm{softmax}(z_b)_{y_b} \\quad\\text{or}\\quad
       \\frac{1}{B}\\sum_b (z_{b,0} - y_b)^2

    Used with gold labels for the teacher, and (through :func:`simulation_loss`) with the
    teacher's predictions for the student.

    Args:
      logits: (B, C) model outputs (C = 1 for regression).
      labels: (B,) int class ids (classification) or float targets (regression).
      task: "classification" or "regression".

    Returns:
      Scalar loss averaged over the batch.

    Raises:
      ValueError: unknown ``task``, or regression logits with C != 1.
    """
    logits, labels = jnp.asarray(logits), jnp.asarray(labels)
    if task == "classification":
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    if task == "regression":
        if logits.shape[-1] != 1:
            raise ValueError(f"regression expects (batch, 1) outputs, got {logits.shape}")
        return jnp.mean(jnp.square(logits[:, 0] - labels))
    raise ValueError(f"Unknown task {task!r}; expected one of {TASKS}.")


def explanation_kl(
    teacher: Saliency,
    student: Saliency,
    *,
    temperature: float = 1.0,
) -> Float[Array, ""]:
    """Explanation loss L_expl of paper Eq. 3: KL(E_T || E_S) over non-padded tokens.

    .. math::

       L_{expl} = \\frac{1}{B}\\sum_b \\sum_{t:\\,m_{bt}}
         p^T_{bt}\\,(\\log p^T_{bt} - \\log p^S_{bt}),
       \\qquad p = \\mathrm{softmax}_{t:\\,m_{bt}}(\\mathrm{scores}/\\tau)

    ``p = exp(log p)`` equals :func:`smat.explainers.to_distribution` of each saliency (tested);
    it is computed here as a masked log-softmax instead, so that a token whose probability
    underflows gives a large finite loss and finite gradients (never ``inf`` or NaN), and in the
    dtype of the scores (``to_distribution`` computes in float32; float64 is needed for the
    finite-difference check of the meta-gradient). Padding never contributes: scores at masked
    positions may hold any finite value.

    Args:
      teacher: teacher saliency, scores (B, T), mask (B, T) bool.
      student: student saliency of the same shape.
      temperature: softmax temperature tau > 0 applied to both score vectors.

    Returns:
      Scalar KL divergence averaged over the batch.

    Raises:
      ValueError: mismatched shapes or non-positive temperature.

    Note:
      Both distributions are taken over the tokens valid in *both* masks (they coincide when
      teacher and student see the same batch).
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature!r}.")
    t_scores, s_scores = jnp.asarray(teacher.scores), jnp.asarray(student.scores)
    if t_scores.ndim != 2 or t_scores.shape != s_scores.shape:
        raise ValueError(
            "explanation_kl expects teacher and student scores of the same shape (batch, seq); "
            f"got {t_scores.shape} and {s_scores.shape}."
        )
    if jnp.shape(teacher.mask) != t_scores.shape or jnp.shape(student.mask) != t_scores.shape:
        raise ValueError(
            f"Saliency masks must match the scores shape {t_scores.shape}; got teacher mask "
            f"{jnp.shape(teacher.mask)} and student mask {jnp.shape(student.mask)}."
        )
    mask = jnp.asarray(teacher.mask, bool) & jnp.asarray(student.mask, bool)  # (B, T)
    log_p_teacher = _masked_log_softmax(t_scores / temperature, mask)  # (B, T)
    log_p_student = _masked_log_softmax(s_scores / temperature, mask)  # (B, T)
    p_teacher = jnp.where(mask, jnp.exp(log_p_teacher), 0.0)  # (B, T) = to_distribution(teacher)
    per_token = p_teacher * (log_p_teacher - log_p_student)  # (B, T), 0 on padding
    return jnp.sum(per_token, axis=-1).mean()


def _masked_log_softmax(
    scores: Float[Array, "batch seq"], mask: Bool[Array, "batch seq"]
) -> Float[Array, "batch seq"]:
    """Log-softmax over the masked-in tokens; 0 (not -inf) at padding so gradients stay finite."""
    return jnp.where(mask, jax.nn.log_softmax(scores, axis=-1, where=mask), 0.0)
