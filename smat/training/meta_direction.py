"""Which way does SMaT's outer step push the teacher explainer? The mean meta-gradient and its
z-score over many (train, validation) batch pairs.

One SMaT outer step (paper Eq. 9, :func:`smat.training.scaffold.pilot_objective`) follows the
meta-gradient of *one* pair of batches. Adam turns a noisy gradient into steps of about its
learning rate, so whether the teacher explainer's coefficients drift somewhere useful is
decided by the sign-consistency of that gradient over pairs, not by its size. For a fixed
student (theta, phiS) and teacher explainer phiT, this module computes, over P pairs
:math:`(x^p_{train}, x^p_{valid})`,

.. math::

   g_p = \\nabla_{\\phi_T} J(\\phi_T; \\theta, \\phi_S, x^p_{train}, x^p_{valid}), \\qquad
   \\bar g = \\frac1P \\sum_p g_p, \\qquad
   \\mathrm{se} = \\frac{\\mathrm{sd}_p(g_p)}{\\sqrt P}, \\qquad z = \\bar g / \\mathrm{se},

per coordinate of phiT, with J the outer objective of Eq. 9 (the pilot step of Eq. 8 from the
given student, then the simulation loss on the validation batch). A coordinate the outer step
would raise has :math:`\\bar g < 0` (Adam descends), so an informative head shows a large
*negative* z. :math:`\\bar g / \\mathrm{sd}_p = z / \\sqrt P` is the signal-to-noise ratio of a
single outer step: over S outer steps with Adam at rate r a coordinate drifts by about
:math:`r S \\bar g / \\mathrm{rms}_p(g_p)` while its noise spreads it by about
:math:`r \\sqrt S`, so a direction with per-step ratio rho needs S >> 1 / rho^2 steps to
win over the noise.

References:
  Fernandes et al, `Learning to Scaffold: Optimizing Model Explanations for Teaching
  <https://arxiv.org/abs/2204.10810>`_, 2022, **Eqs. 8-9**.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from smat.training.scaffold import (
    ScaffoldConfig,
    ScaffoldFunctions,
    inner_optimizer,
    pilot_objective,
)

PyTree = Any
Batch = Mapping[str, ArrayLike]

__all__ = ["MetaDirection", "meta_direction", "pair_meta_gradients"]


class MetaDirection(NamedTuple):
    """The meta-gradient of Eq. 9 over P batch pairs (see the module docstring).

    Attributes:
      mean: pytree shaped like phiT: the mean meta-gradient over pairs (descent is -mean).
      standard_error: pytree like phiT: sample standard deviation over pairs / sqrt(P).
      z_score: pytree like phiT: mean / standard_error (inf or nan where every pair agrees
        exactly, i.e. a zero standard error).
      gradients: pytree like phiT with a leading (P,) axis: the meta-gradient of each pair.
      outer_loss: (P,) the outer objective J at each pair.
    """

    mean: PyTree
    standard_error: PyTree
    z_score: PyTree
    gradients: PyTree
    outer_loss: Float[Array, " pairs"]


def _pair_meta_gradients(teacher_explainer_params, student_params, student_explainer_params,
                         inner_opt_state, train_batches, valid_batches, dropout_rng,
                         teacher_params, *, config, functions):
    num_pairs = _num_pairs(train_batches, valid_batches)
    keys = None if dropout_rng is None else jax.vmap(
        lambda i: jax.random.fold_in(dropout_rng, i))(jnp.arange(num_pairs))

    def one(pair):
        train, valid, key = pair
        return jax.value_and_grad(pilot_objective)(
            teacher_explainer_params, student_params, student_explainer_params,
            inner_opt_state, train, valid, key, teacher_params, config=config,
            functions=functions)

    return jax.lax.map(one, (dict(train_batches), dict(valid_batches), keys))


_pair_meta_gradients_jit = jax.jit(_pair_meta_gradients,
                                   static_argnames=("config", "functions"))


def pair_meta_gradients(
    teacher_explainer_params: PyTree,
    student_params: PyTree,
    student_explainer_params: PyTree,
    inner_opt_state: optax.OptState,
    train_batches: Batch,
    valid_batches: Batch,
    dropout_rng: jax.Array | None = None,
    teacher_params: PyTree = None,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
) -> tuple[Float[Array, " pairs"], PyTree]:
    """The outer objective and its meta-gradient (Eq. 9) for each of P batch pairs.

    ``jax.value_and_grad`` of :func:`smat.training.scaffold.pilot_objective` w.r.t. phiT,
    mapped over the leading pair axis of the batches (``lax.map``: one pair in memory at a
    time; jitted once per config, functions and shapes).

    Args:
      teacher_explainer_params: phiT, where the gradient is taken.
      student_params: theta (the student after its inner step, as in Eq. 8).
      student_explainer_params: phiS.
      inner_opt_state: the inner optimizer's state the pilot update starts from.
      train_batches: x_train of Eq. 8, every field with a leading (P,) pair axis.
      valid_batches: x_valid of Eq. 9, every field with the same leading (P,) axis.
      dropout_rng: None for a deterministic pilot forward, or a key; pair p then uses
        ``fold_in(dropout_rng, p)``.
      teacher_params: parameters of ``functions.teacher_forward`` (None when cached).
      config: the SMaT hyperparameters (beta, the pilot's inner optimizer, task).
      functions: the student and teacher functions (``teacher_explainer`` learned).

    Returns:
      ``(outer_loss (P,), gradients)`` with gradients shaped like phiT plus a leading (P,).

    Raises:
      ValueError: batches without a common leading pair axis.
    """
    return _pair_meta_gradients_jit(
        teacher_explainer_params, student_params, student_explainer_params, inner_opt_state,
        train_batches, valid_batches, dropout_rng, teacher_params, config=config,
        functions=functions)


def meta_direction(
    teacher_explainer_params: PyTree,
    student_params: PyTree,
    student_explainer_params: PyTree,
    train_batches: Batch,
    valid_batches: Batch,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
    inner_opt_state: optax.OptState | None = None,
    dropout_rng: jax.Array | None = None,
    teacher_params: PyTree = None,
) -> MetaDirection:
    """Mean, standard error and z-score of the meta-gradient over P (train, valid) pairs.

    .. math::

       \\bar g = \\frac1P\\sum_p \\nabla_{\\phi_T} J_p, \\quad
       \\mathrm{se} = \\sqrt{\\frac{\\sum_p (g_p - \\bar g)^2}{P (P - 1)}}, \\quad
       z = \\bar g / \\mathrm{se}

    Args:
      teacher_explainer_params: phiT (e.g. uniform head coefficients,
        ``smat.explainers.init(None, config)``).
      student_params: theta.
      student_explainer_params: phiS.
      train_batches: stacked training batches, every field (P, ...), P >= 2.
      valid_batches: stacked validation batches, every field (P, ...).
      config: the SMaT step's hyperparameters.
      functions: the SMaT step's functions, with a learned ``teacher_explainer``.
      inner_opt_state: the pilot's inner optimizer state; None takes a fresh
        :func:`smat.training.scaffold.inner_optimizer` state (exact for its stateless SGD).
      dropout_rng: None (deterministic pilot, the default) or a key folded per pair.
      teacher_params: parameters of ``functions.teacher_forward`` (None when cached).

    Returns:
      :class:`MetaDirection`; for the attention explainer every field is an
      ``AttentionExplainerParams`` whose ``phi`` holds one value per head.

    Raises:
      ValueError: fewer than 2 pairs, or train and validation batches with different
        numbers of pairs; ``functions`` without a learned teacher explainer.

    Example:
      >>> direction = meta_direction(phi_t, theta, phi_s, trains, valids,      # doctest: +SKIP
      ...                            config=config, functions=functions)
      >>> direction.z_score.phi  # (L * H,): large negative = the outer step raises that head
    """
    if functions.teacher_explainer is None:
        raise ValueError("meta_direction needs a learned teacher explainer "
                         "(ScaffoldFunctions.teacher_explainer); a static one has no "
                         "meta-gradient.")
    num_pairs = _num_pairs(train_batches, valid_batches)
    if num_pairs < 2:
        raise ValueError(f"meta_direction needs at least 2 batch pairs for a standard error; "
                         f"got {num_pairs}.")
    if inner_opt_state is None:
        inner_opt_state = inner_optimizer(config).init((student_params, student_explainer_params))
    losses, gradients = pair_meta_gradients(
        teacher_explainer_params, student_params, student_explainer_params, inner_opt_state,
        train_batches, valid_batches, dropout_rng, teacher_params, config=config,
        functions=functions)
    mean = jax.tree.map(lambda g: jnp.mean(g, axis=0), gradients)
    scale = jnp.sqrt(jnp.asarray(num_pairs, jnp.float32))
    standard_error = jax.tree.map(
        lambda g: jnp.std(g, axis=0, ddof=1) / scale.astype(g.dtype), gradients)
    z_score = jax.tree.map(jnp.divide, mean, standard_error)
    return MetaDirection(mean=mean, standard_error=standard_error, z_score=z_score,
                         gradients=gradients, outer_loss=losses)


def _num_pairs(train_batches: Batch, valid_batches: Batch) -> int:
    """The common leading axis of every field of both stacked batches (checked at trace time)."""
    counts = {}
    for role, batches in (("train_batches", train_batches), ("valid_batches", valid_batches)):
        if not isinstance(batches, Mapping):
            raise TypeError(f"{role} must be a mapping of stacked arrays; got "
                            f"{type(batches).__name__}.")
        for name, value in batches.items():
            shape = jnp.shape(value)
            if not shape:
                raise ValueError(f"{role}[{name!r}] is a scalar; every field needs a leading "
                                 "(pairs,) axis.")
            counts[f"{role}[{name!r}]"] = shape[0]
    if len(set(counts.values())) != 1:
        raise ValueError(f"every batch field needs the same leading (pairs,) axis; got {counts}.")
    return next(iter(counts.values()))
