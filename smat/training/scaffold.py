"""The jitted bi-level SMaT train step (Scaffold-Maximizing Training, paper §3, Eqs. 3-9).

A fixed teacher T with a teacher explainer E_phiT teaches a student S_theta with a student
explainer E_phiS. One call of :data:`scaffold_step` performs

.. math::

   (\\theta_{t+1}, \\phi_S^{t+1}) &= \\mathrm{InnerOpt}\\big(\\nabla_{\\theta,\\phi_S}
       L_{student}(\\theta_t, \\phi_S^t; \\phi_T^t, x_{train})\\big)
       && \\text{Eqs. 6-7} \\\\
   \\theta'(\\phi_T) &= \\theta_{t+1} + \\mathrm{InnerOpt}_{t+1}\\big(\\nabla_{\\theta,\\phi_S}
       L_{student}(\\theta_{t+1}, \\phi_S^{t+1}; \\phi_T, x_{train})\\big)_\\theta
       && \\text{Eq. 8} \\\\
   \\phi_T^{t+1} &= \\mathrm{OuterOpt}\\big(\\nabla_{\\phi_T}
       L_{sim}(S_{\\theta'(\\phi_T)}(x_{valid}), T(x_{valid}))\\big)
       && \\text{Eq. 9}

with L_student = L_sim + beta * KL(E_T || E_S) (Eq. 3, :mod:`smat.training.losses`). The pilot
of Eq. 8 is the real inner optimizer update, as in the authors' code (``train.py``,
``student_inneropt_loss``): global-norm clipping over (theta, phiS), weight decay and SGD,
with the optimizer state after the inner step; the paper writes it as a plain gradient
step, which it is only while the clip is inactive and without weight decay. The pilot
parameters theta' are discarded; the student is never reset. Eqs. 8-9 run every
``meta_interval`` steps (``lax.cond``, compiled once) and only when the teacher explainer is
learned and beta > 0. The outer gradient is nested ``jax.grad`` through the pilot step
(:func:`pilot_objective`, the literal Eq. 9); ``hypergradient="forward_over_reverse"``
computes the same quantity with one JVP of the student forward instead of a reverse pass
through the pilot's backward pass (``benchmarks/meta_step.py`` times both).

The step is generic over pure functions bundled in :class:`ScaffoldFunctions`, so any model
(smat.models through ``smat.models.functional.apply``, or a user's own) plugs in.

References:
  Fernandes et al, `Learning to Scaffold: Optimizing Model Explanations for Teaching
  <https://arxiv.org/abs/2204.10810>`_, 2022, **Eqs. 3-9**.
"""

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from smat.explainers import Saliency
from smat.models import functional
from smat.training.loop import over_seeds
from smat.training.losses import TASKS, Task, explanation_kl, simulation_loss
from smat.training.optimizers import standard_promotion

PyTree = Any
Batch = Mapping[str, ArrayLike]
HYPERGRADIENTS: tuple[str, ...] = ("reverse", "forward_over_reverse")


class TeacherOutput(NamedTuple):
    """What the fixed teacher contributes to a batch.

    Attributes:
      logits: (B, C) teacher outputs (targets of L_sim).
      features: input of a learned teacher explainer, e.g. pooled attention logits (L, B, H, T);
        None for a static teacher explainer.
      scores: (B, T) static teacher explanation scores; None for a learned teacher explainer.
    """

    logits: Float[Array, "batch classes"]
    features: PyTree = None
    scores: Float[Array, "batch seq"] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaffoldConfig:
    """Hyperparameters of the SMaT step (defaults: design §5, from the authors' code).

    Attributes:
      task: "classification" (L_sim = CE against the teacher's argmax) or "regression" (MSE).
      beta: weight of the explanation loss in Eq. 3 (5 attention, 0.2 gradient, 0 no explainer).
      meta_interval: run the pilot + outer update (Eqs. 8-9) after every meta_interval-th
        inner step (steps k, 2k, ... counted from 1, as the authors' code does).
      inner_learning_rate: eta_inner of the student SGD step (Eqs. 6-8).
      inner_weight_decay: decoupled weight decay of the inner optimizer.
      inner_clip_norm: global-norm gradient clipping of the inner optimizer.
      outer_learning_rate: Adam learning rate of the teacher-explainer update (Eq. 9).
      outer_clip_norm: global-norm gradient clipping of the outer optimizer.
      explanation_temperature: softmax temperature turning scores into distributions in the KL.
      hypergradient: how the outer gradient of Eq. 9 is computed; both are exact:
        "reverse" (default) is ``jax.grad`` of :func:`pilot_objective` (nested reverse mode
        through the pilot step); "forward_over_reverse" replaces the outer reverse pass through
        the pilot's backward pass by one JVP of the student forward (fewer live activations).
    """

    task: Task = "classification"
    beta: float = 5.0
    meta_interval: int = 1
    inner_learning_rate: float = 5e-3
    inner_weight_decay: float = 0.01
    inner_clip_norm: float = 5.0
    outer_learning_rate: float = 5e-4
    outer_clip_norm: float = 5.0
    explanation_temperature: float = 1.0
    hypergradient: Literal["reverse", "forward_over_reverse"] = "reverse"

    def __post_init__(self) -> None:
        if self.hypergradient not in HYPERGRADIENTS:
            raise ValueError(f"ScaffoldConfig.hypergradient={self.hypergradient!r}; expected one "
                             f"of {HYPERGRADIENTS}.")
        if self.task not in TASKS:
            raise ValueError(f"ScaffoldConfig.task={self.task!r}; expected one of {TASKS}.")
        if isinstance(self.meta_interval, bool) or not isinstance(self.meta_interval, int):
            raise TypeError(
                f"ScaffoldConfig.meta_interval must be an int; got {self.meta_interval!r}."
            )
        if self.meta_interval < 1:
            raise ValueError(f"ScaffoldConfig.meta_interval={self.meta_interval}; expected >= 1.")
        for name in ("beta", "inner_weight_decay"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"ScaffoldConfig.{name}={getattr(self, name)!r}; expected >= 0.")
        for name in ("inner_learning_rate", "inner_clip_norm", "outer_learning_rate",
                     "outer_clip_norm", "explanation_temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ScaffoldConfig.{name}={getattr(self, name)!r}; expected > 0.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScaffoldFunctions:
    """The pure functions the SMaT step is built from (a static, hashable jit argument).

    Build it once per run: callables compare by identity, so a fresh ``functools.partial`` per
    step would recompile the step every time.

    Attributes:
      student_forward: ``(theta, batch, dropout_rng | None) -> (logits (B, C), features)``;
        ``features`` feed the student explainer (e.g. pooled attention logits (L, B, H, T)).
      student_explainer: ``(phiS, features, mask (B, T) bool) -> Saliency``; may be None when
        beta = 0.
      teacher_explainer: learned ``(phiT, teacher features, mask) -> Saliency`` (SMaT), or None
        for a static teacher explainer whose scores arrive in :class:`TeacherOutput.scores`.
      teacher_forward: ``(teacher_params, batch) -> TeacherOutput`` run inside the step (the
        ``teacher_params`` argument of :data:`scaffold_step`), or None to read cached
        ``batch["teacher_logits"]`` (B, C), ``batch["teacher_features"]`` and
        ``batch["teacher_scores"]`` (B, T). The teacher is fixed and deterministic, so caching
        its outputs per example is exact and saves one teacher forward per batch (per step: two,
        train and valid); ``benchmarks/meta_step.py`` measures the difference.
    """

    student_forward: Callable[..., tuple[Array, PyTree]]
    student_explainer: Callable[[PyTree, PyTree, Array], Saliency] | None = None
    teacher_explainer: Callable[[PyTree, PyTree, Array], Saliency] | None = None
    teacher_forward: Callable[[PyTree, Batch], TeacherOutput] | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not (callable(value) or (value is None and field.name != "student_forward")):
                raise TypeError(f"ScaffoldFunctions.{field.name} must be callable; got {value!r}.")


MODEL_INPUTS: tuple[str, ...] = ("input_ids", "attention_mask", "token_type_ids", "pixel_values")


@dataclasses.dataclass(frozen=True)
class ClassifierForward:
    """``student_forward`` for a smat.models classifier: (logits, pooled attention logits).

    ``(params, batch, dropout_rng) -> (logits (B, C), pooled_attention_logits (L, B, H, T))``
    through :func:`smat.models.functional.apply` with ``attention="pooled"``; the batch keys in
    :data:`MODEL_INPUTS` are passed to the model. Equal graphdefs give equal adapters, so
    rebuilding one does not recompile the step.
    """

    graphdef: Any
    query_pooling: str = "mean"

    def __call__(self, params: PyTree, batch: Batch, dropout_rng: jax.Array | None = None):
        inputs = {name: batch[name] for name in MODEL_INPUTS if name in batch}
        output = functional.apply(self.graphdef, params, **inputs, dropout_rng=dropout_rng,
                                  attention="pooled", query_pooling=self.query_pooling)
        return output.logits, output.encoder.pooled_attention_logits


@dataclasses.dataclass(frozen=True)
class ClassifierTeacher:
    """``teacher_forward`` for a smat.models classifier: logits + pooled attention logits."""

    graphdef: Any
    query_pooling: str = "mean"

    def __call__(self, params: PyTree, batch: Batch) -> TeacherOutput:
        logits, pooled = ClassifierForward(self.graphdef, self.query_pooling)(params, batch)
        return TeacherOutput(logits=logits, features=pooled)


class ScaffoldState(NamedTuple):
    """Everything a SMaT step updates (optax-style explicit state)."""

    step: jax.Array  # int32 scalar: number of completed steps
    student_params: PyTree  # theta
    student_explainer_params: PyTree  # phiS
    inner_opt_state: optax.OptState  # inner optimizer over (theta, phiS)
    teacher_explainer_params: PyTree  # phiT (None for a static teacher explainer)
    outer_opt_state: optax.OptState  # outer optimizer over phiT (None when static)
    rng: jax.Array  # base key; step t uses fold_in(rng, t)


def inner_optimizer(config: ScaffoldConfig) -> optax.GradientTransformation:
    """Student optimizer of Eqs. 6-7: clip by global norm -> weight decay -> SGD."""
    return optax.chain(
        optax.clip_by_global_norm(config.inner_clip_norm),
        optax.add_decayed_weights(config.inner_weight_decay),
        optax.sgd(config.inner_learning_rate),
    )


def outer_optimizer(config: ScaffoldConfig) -> optax.GradientTransformation:
    """Teacher-explainer optimizer of Eq. 9: clip by global norm -> Adam."""
    return standard_promotion(optax.chain(
        optax.clip_by_global_norm(config.outer_clip_norm), optax.adam(config.outer_learning_rate)
    ))


def init_state(
    config: ScaffoldConfig,
    *,
    student_params: PyTree,
    student_explainer_params: PyTree,
    teacher_explainer_params: PyTree = None,
    rng: jax.Array,
) -> ScaffoldState:
    """Initial :class:`ScaffoldState` (step 0, fresh optimizer states).

    Args:
      config: the step's hyperparameters.
      student_params: theta, any pytree of arrays.
      student_explainer_params: phiS (None allowed when beta = 0).
      teacher_explainer_params: phiT of a learned teacher explainer; None when static.
      rng: base PRNG key for dropout.

    Returns:
      The initial state.
    """
    params = (student_params, student_explainer_params)
    outer_opt_state = None
    if teacher_explainer_params is not None:
        outer_opt_state = outer_optimizer(config).init(teacher_explainer_params)
    return ScaffoldState(
        step=jnp.zeros((), jnp.int32),
        student_params=student_params,
        student_explainer_params=student_explainer_params,
        inner_opt_state=inner_optimizer(config).init(params),
        teacher_explainer_params=teacher_explainer_params,
        outer_opt_state=outer_opt_state,
        rng=rng,
    )


def explanation_mask(batch: Batch) -> Bool[Array, "batch seq"]:
    """Tokens explanations are defined over: ``batch["attention_mask"] != 0`` (B, T)."""
    return jnp.asarray(_field(batch, "attention_mask", "masking explanations")) != 0


def teacher_outputs(
    batch: Batch, functions: ScaffoldFunctions, teacher_params: PyTree = None
) -> TeacherOutput:
    """Teacher outputs for ``batch``: ``functions.teacher_forward`` or the cached batch fields."""
    if functions.teacher_forward is not None:
        return functions.teacher_forward(teacher_params, batch)
    scores = batch.get("teacher_scores")
    return TeacherOutput(
        logits=jnp.asarray(_field(batch, "teacher_logits", "the simulation loss (Eq. 3)")),
        features=batch.get("teacher_features"),
        scores=None if scores is None else jnp.asarray(scores),
    )


def _field(batch: Batch, name: str, purpose: str) -> ArrayLike:
    """``batch[name]``, or a ValueError naming the missing key and the keys present."""
    if not isinstance(batch, Mapping):
        raise TypeError(f"Batches must be mappings of arrays; got {type(batch).__name__}.")
    if name not in batch:
        raise ValueError(
            f"The batch needs the field {name!r} for {purpose}; it has {sorted(batch)}."
        )
    return batch[name]


def teacher_explanation(
    teacher_explainer_params: PyTree,
    teacher: TeacherOutput,
    mask: Bool[ArrayLike, "batch seq"],
    functions: ScaffoldFunctions,
) -> Saliency:
    """E_phiT(T, x): the learned teacher explainer, or the static scores in ``teacher.scores``.

    Raises:
      ValueError: the inputs the chosen teacher explainer needs are missing.
    """
    if functions.teacher_explainer is None:
        if teacher.scores is None:
            raise ValueError(
                "A static teacher explainer (ScaffoldFunctions.teacher_explainer=None) needs the "
                "scores: put cached (B, T) scores in batch['teacher_scores'] or return them in "
                "TeacherOutput.scores from teacher_forward."
            )
        return Saliency(scores=teacher.scores, mask=jnp.asarray(mask, bool))
    if teacher_explainer_params is None or teacher.features is None:
        raise ValueError(
            "A learned teacher explainer needs teacher_explainer_params (got "
            f"{type(teacher_explainer_params).__name__}) and teacher features: "
            "batch['teacher_features'] or TeacherOutput.features."
        )
    return functions.teacher_explainer(teacher_explainer_params, teacher.features, mask)


def student_loss(
    student_params: PyTree,
    student_explainer_params: PyTree,
    batch: Batch,
    teacher: TeacherOutput,
    teacher_saliency: Saliency | None,
    dropout_rng: jax.Array | None,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
) -> tuple[Float[Array, ""], tuple[Float[Array, ""], Float[Array, ""]]]:
    """L_student of Eq. 3: L_sim(S_theta(x), T(x)) + beta * KL(E_T || E_phiS(S_theta, x)).

    Args:
      student_params: theta.
      student_explainer_params: phiS.
      batch: the student's input batch (with "attention_mask" (B, T)).
      teacher: the teacher's outputs on ``batch``.
      teacher_saliency: E_T(T, x); ignored (may be None) when ``config.beta == 0``.
      dropout_rng: dropout key for the student forward, None for deterministic.
      config: hyperparameters (task, beta, temperature).
      functions: the student/teacher functions.

    Returns:
      ``(loss, (sim_loss, kl))``, scalars.
    """
    logits, features = functions.student_forward(student_params, batch, dropout_rng)
    sim = simulation_loss(logits, teacher.logits, task=config.task)
    if config.beta == 0:
        return sim, (sim, jnp.zeros_like(sim))
    if functions.student_explainer is None or teacher_saliency is None:
        raise ValueError(
            f"beta={config.beta} > 0 needs ScaffoldFunctions.student_explainer and a teacher "
            "saliency; use beta=0 for a student trained without explanations."
        )
    student_saliency = functions.student_explainer(
        student_explainer_params, features, explanation_mask(batch)
    )
    kl = explanation_kl(
        teacher_saliency, student_saliency, temperature=config.explanation_temperature
    )
    return sim + config.beta * kl, (sim, kl)


def pilot_objective(
    teacher_explainer_params: PyTree,
    student_params: PyTree,
    student_explainer_params: PyTree,
    inner_opt_state: optax.OptState,
    train_batch: Batch,
    valid_batch: Batch,
    dropout_rng: jax.Array | None,
    teacher_params: PyTree = None,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
) -> Float[Array, ""]:
    """Outer objective of Eq. 9 as a function of phiT: L_sim(S_theta'(phiT)(x_valid), T(x_valid)).

    theta'(phiT) is the pilot update of Eq. 8: the inner optimizer's update
    (:func:`inner_optimizer`: global-norm clipping over the gradients of theta and phiS
    together, weight decay, SGD) from `inner_opt_state`, applied to theta_{t+1}, as the
    authors' code does. The clip factor depends on phiT and is differentiated through. The
    validation forward is deterministic (no dropout) and its targets are the teacher's
    predictions, never gold labels. ``jax.grad`` of this function w.r.t. its first argument
    is the meta-gradient (nested grad).

    Args:
      teacher_explainer_params: phiT.
      student_params: theta_{t+1} (after the inner step).
      student_explainer_params: phiS_{t+1}.
      inner_opt_state: the inner optimizer's state after the inner step.
      train_batch: x_train of Eq. 8.
      valid_batch: x_valid of Eq. 9 (a batch of the student's validation split).
      dropout_rng: dropout key of the pilot's training forward, or None.
      teacher_params: parameters of ``functions.teacher_forward`` (None when cached).
      config: hyperparameters.
      functions: the student/teacher functions (``teacher_explainer`` must be learned).

    Returns:
      Scalar outer loss.
    """
    return _pilot_objective(
        teacher_explainer_params, student_params, student_explainer_params, inner_opt_state,
        train_batch, teacher_outputs(train_batch, functions, teacher_params), valid_batch,
        teacher_outputs(valid_batch, functions, teacher_params).logits, dropout_rng, config,
        functions,
    )


def _pilot_objective(phi_t, theta, phi_s, inner_opt_state, train_batch, train_teacher,
                     valid_batch, valid_teacher_logits, dropout_rng, config, functions):
    """:func:`pilot_objective` with the (phiT-independent) teacher outputs precomputed."""
    if functions.teacher_explainer is None:
        raise ValueError("The pilot objective (Eq. 9) needs a learned teacher explainer.")
    teacher_saliency = teacher_explanation(
        phi_t, train_teacher, explanation_mask(train_batch), functions
    )  # depends on phiT: the path of the meta-gradient
    grads, _ = jax.grad(student_loss, argnums=(0, 1), has_aux=True)(
        theta, phi_s, train_batch, train_teacher, teacher_saliency, dropout_rng,
        config=config, functions=functions,
    )
    pilot_theta = _pilot_update(grads, inner_opt_state, theta, phi_s, config)
    valid_logits, _ = functions.student_forward(pilot_theta, valid_batch, None)  # Eq. 8 -> 9
    return simulation_loss(valid_logits, valid_teacher_logits, task=config.task)


def _pilot_update(grads, inner_opt_state, theta, phi_s, config):
    """theta' of Eq. 8: theta moved by its part of the inner optimizer's update of
    (theta, phiS)."""
    updates, _ = inner_optimizer(config).update(grads, inner_opt_state, (theta, phi_s))
    return optax.apply_updates(theta, updates[0])


def _outer_gradient(phi_t, theta, phi_s, inner_opt_state, train_batch, train_teacher,
                    valid_batch, valid_teacher_logits, dropout_rng, config, functions):
    r"""``value_and_grad`` of :func:`_pilot_objective` by forward-over-reverse (same result).

    phiT enters Eq. 8 only through the teacher scores s = E_phiT(T, x). With
    g(s) = grad_{theta, phiS} L_student(theta, phiS; s) and theta' = theta + U(g)_theta (U
    the inner optimizer's update, clipping included), the chain rule and the symmetry of
    mixed second derivatives give

    .. math::

       \nabla_{\phi_T} J = \Big(\frac{\partial s}{\partial \phi_T}\Big)^{\!\top}
         \frac{d}{d\epsilon} \nabla_s L_{student}\big((\theta, \phi_S) + \epsilon w; s\big)
         \Big|_0, \qquad w = DU(g)^{\top} v,
         \quad v = \nabla_{\theta'} L_{sim}(S_{\theta'}(x_{valid}), T(x_{valid})).

    One VJP of the (cheap) optimizer update and one JVP of the student forward replace
    reverse-mode differentiation through the whole backward pass of the pilot step
    (reverse-over-reverse), which keeps more activations alive. Tests check it against
    ``jax.grad`` of :func:`pilot_objective`.
    """
    mask = explanation_mask(train_batch)
    scores, scores_vjp = jax.vjp(
        lambda phi: teacher_explanation(phi, train_teacher, mask, functions).scores, phi_t
    )

    def loss(params, teacher_scores):
        return student_loss(*params, train_batch, train_teacher, Saliency(teacher_scores, mask),
                            dropout_rng, config=config, functions=functions)[0]

    params = (theta, phi_s)
    pilot_theta, update_vjp = jax.vjp(
        lambda grads: _pilot_update(grads, inner_opt_state, theta, phi_s, config),
        jax.grad(loss)(params, scores))

    def valid_loss(th):
        logits, _ = functions.student_forward(th, valid_batch, None)
        return simulation_loss(logits, valid_teacher_logits, task=config.task)

    outer_loss, v = jax.value_and_grad(valid_loss)(pilot_theta)
    (w,) = update_vjp(v)
    _, mixed = jax.jvp(lambda p: jax.grad(loss, argnums=1)(p, scores), (params,), (w,))
    (grad_phi,) = scores_vjp(mixed)
    return outer_loss, grad_phi


def _scaffold_step(
    state: ScaffoldState,
    train_batch: Batch,
    valid_batch: Batch | None = None,
    teacher_params: PyTree = None,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
) -> tuple[ScaffoldState, dict[str, Float[Array, ""]]]:
    """One SMaT step: inner update (Eqs. 6-7), then pilot + outer update (Eqs. 8-9).

    Jitted once per (config, functions, input shapes) with ``state`` donated; call it as
    ``state, metrics = scaffold_step(state, train_batch, valid_batch, config=c, functions=f)``.
    The dropout key of step t is ``fold_in(state.rng, t)``.

    Args:
      state: current :class:`ScaffoldState` (donated: do not reuse it after the call).
      train_batch: mapping with "attention_mask" (B, T), whatever ``student_forward`` reads, and
        the cached teacher fields when ``functions.teacher_forward`` is None.
      valid_batch: a validation batch of the same kind for Eq. 9; may be None when no outer
        update runs (static teacher explainer or beta = 0).
      teacher_params: parameters passed to ``functions.teacher_forward`` (not donated); None
        when the teacher outputs are cached in the batches.
      config: hyperparameters (static).
      functions: the student/teacher functions (static).

    Returns:
      ``(new_state, metrics)``. Metrics (scalars): loss, sim_loss, kl (at theta_t), outer_loss,
      meta_update (1.0 when Eqs. 8-9 ran this step, else 0.0 and the outer_* entries are 0),
      grad_norm, update_norm, param_norm, explainer_param_norm (inner), outer_grad_norm,
      outer_update_norm, teacher_explainer_param_norm (outer). Check them with
      :func:`smat.store.run_log.check_finite` when fetched at logging time (non-finite ->
      RuntimeError naming the step range).

    Raises:
      ValueError: missing batch fields, parameters or functions for the requested setting.
    """
    key = jax.random.fold_in(state.rng, state.step)
    inner_key, pilot_key = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
    theta, phi_s, phi_t = (state.student_params, state.student_explainer_params,
                           state.teacher_explainer_params)
    train_teacher = teacher_outputs(train_batch, functions, teacher_params)
    teacher_saliency = None
    if config.beta > 0:  # E_T with phiT held fixed in the inner step
        teacher_saliency = teacher_explanation(
            jax.lax.stop_gradient(phi_t), train_teacher, explanation_mask(train_batch), functions
        )

    # Eqs. 6-7: inner optimizer step on (theta, phiS).
    (loss, (sim, kl)), grads = jax.value_and_grad(student_loss, argnums=(0, 1), has_aux=True)(
        theta, phi_s, train_batch, train_teacher, teacher_saliency, inner_key,
        config=config, functions=functions,
    )
    updates, inner_opt_state = inner_optimizer(config).update(
        grads, state.inner_opt_state, (theta, phi_s)
    )
    theta, phi_s = optax.apply_updates((theta, phi_s), updates)

    # Eqs. 8-9: pilot step (discarded) and outer optimizer step on phiT.
    phi_t_norm = optax.global_norm(phi_t)
    zero = jnp.zeros_like(loss)
    skip_outputs = (phi_t, state.outer_opt_state, zero, jnp.zeros_like(phi_t_norm),
                    jnp.zeros_like(phi_t_norm))
    learned = functions.teacher_explainer is not None and config.beta > 0
    if learned and valid_batch is None:
        raise ValueError("A learned teacher explainer with beta > 0 needs valid_batch (Eq. 9).")

    def outer_update(_):
        valid_logits = teacher_outputs(valid_batch, functions, teacher_params).logits
        meta_gradient = (jax.value_and_grad(_pilot_objective) if config.hypergradient == "reverse"
                         else _outer_gradient)
        outer_loss, outer_grads = meta_gradient(
            phi_t, theta, phi_s, inner_opt_state, train_batch, train_teacher, valid_batch,
            valid_logits, pilot_key, config, functions,
        )
        outer_updates, outer_opt_state = outer_optimizer(config).update(
            outer_grads, state.outer_opt_state, phi_t
        )
        return (optax.apply_updates(phi_t, outer_updates), outer_opt_state, outer_loss,
                optax.global_norm(outer_grads), optax.global_norm(outer_updates))

    if learned:
        is_meta_step = (state.step + 1) % config.meta_interval == 0
        outer = jax.lax.cond(is_meta_step, outer_update, lambda _: skip_outputs, None)
    else:  # static teacher explainer or beta = 0: no outer update at all (Eq. 9 is constant)
        is_meta_step, outer = jnp.zeros((), bool), skip_outputs
    new_phi_t, outer_opt_state, outer_loss, outer_grad_norm, outer_update_norm = outer

    new_state = ScaffoldState(
        step=state.step + 1, student_params=theta, student_explainer_params=phi_s,
        inner_opt_state=inner_opt_state, teacher_explainer_params=new_phi_t,
        outer_opt_state=outer_opt_state, rng=state.rng,
    )
    metrics = {
        "loss": loss, "sim_loss": sim, "kl": kl, "outer_loss": outer_loss,
        "meta_update": jnp.asarray(is_meta_step, zero.dtype),
        "grad_norm": optax.global_norm(grads), "update_norm": optax.global_norm(updates),
        "param_norm": optax.global_norm(theta), "explainer_param_norm": optax.global_norm(phi_s),
        "outer_grad_norm": outer_grad_norm, "outer_update_norm": outer_update_norm,
        "teacher_explainer_param_norm": optax.global_norm(new_phi_t),
    }
    return new_state, metrics


scaffold_step = jax.jit(
    _scaffold_step, static_argnames=("config", "functions"), donate_argnames=("state",)
)



def _scaffold_seed_step(
    states: ScaffoldState,
    train_batch: Batch,
    valid_batch: Batch | None = None,
    *,
    config: ScaffoldConfig,
    functions: ScaffoldFunctions,
) -> tuple[ScaffoldState, dict[str, Float[Array, " seeds"]]]:
    """:func:`scaffold_step` over a leading seed axis of the state and the batches.

    Several seeds run under ``vmap``: the step counter is the same for all seeds, but the
    ``lax.cond`` of the meta update becomes a select, so with ``meta_interval > 1`` the
    pilot and outer updates are computed at every step and discarded where they do not
    apply (same results, more work). One seed runs the plain step
    (:func:`smat.training.loop.over_seeds`), where the branch stays a branch.
    """
    def one(state, train, valid):
        return _scaffold_step(state, train, valid, config=config, functions=functions)

    return over_seeds(one)(states, train_batch, valid_batch)


scaffold_seed_step = jax.jit(
    _scaffold_seed_step, static_argnames=("config", "functions"), donate_argnames=("states",)
)
