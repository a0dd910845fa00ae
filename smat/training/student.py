"""Student training: a student learns to simulate a fixed teacher, with or without explanations.

The teacher is fixed, so everything it contributes is computed once per example and cached
next to the student's inputs (design §5): its logits (the targets of L_sim), its query-pooled
attention logits (the input of a learned SMaT or static attention explainer) or its static
gradient explanation scores. The jitted :data:`smat.training.scaffold.scaffold_step` then reads the
cache instead of re-running the teacher (``benchmarks/meta_step.py`` measures the saving).

Settings (paper §5): ``none`` (beta = 0), static teacher explainers ``gradient`` (Gradient
L2), ``input_x_gradient``, ``integrated_gradients``, ``attention_all``, ``attention_last``,
and the learned ``smat`` explainer. The student explainer is always a learned attention
explainer over the student's heads (restricted to its last layer for ``attention_last``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from smat.data import Encoded, shuffled_tokens
from smat.explainers import attention
from smat.explainers.normalizers import NORMALIZERS
from smat.models import functional
from smat.models.inference import (
    map_batches,
    predict_logits,
    predictions_from_logits,
    trim_to_length,
)
from smat.parallel import resolve_mesh
from smat.registry import DEFAULT_BETA, FIXED_HEADS, STATIC, STUDENT_SETTINGS, static_scores
from smat.training import scaffold
from smat.training.loop import LoopConfig, fit, seed_folders, seed_groups, stack_seeds
from smat.training.task_metrics import primary_metric, task_metrics

OUTER_LEARNING_RATE = {"classification": 5e-4, "regression": 2e-4}
"""The authors' Adam rate of the SMaT head coefficients per task (IMDB / MLQE configs)."""


# what a teacher explanation is computed on (StudentTrainConfig.explanation_source)
EXPLANATION_SOURCES = ("text", "shuffled_text", "swapped_same_label")
NO_MASS = -1e4
"""The teacher score of a position a swapped explanation does not cover (its donor row is
shorter): the explanation softmax gives it no mass."""
# where a student's training rows come from (StudentTrainConfig.student_pool)
STUDENT_POOLS = ("held_out", "teacher_train")
# where SMaT's outer loss (Eq. 9) draws its rows from (StudentTrainConfig.outer_rows)
OUTER_ROWS = ("validation", "pool")
POOL_OUTER_FRACTION = 0.2
"""The part of its training pool a SMaT student with ``outer_rows="pool"`` keeps for the
outer loss (its inner steps train on the rest)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudentTrainConfig:
    """How one student is trained (design §5 defaults).

    Attributes:
      explainer: the teacher-explainer setting, one of
        :data:`smat.registry.STUDENT_SETTINGS`.
      beta: explanation-loss weight; None takes the paper's value for the setting.
      meta_interval: run the pilot + outer update every this many steps (SMaT only).
      inner_learning_rate: SGD learning rate of the student (and its explainer).
      outer_learning_rate: Adam learning rate of the SMaT head coefficients; None takes
        the authors' value for the task (5e-4 classification, 2e-4 regression).
      normalizer: NORMALIZE of the SMaT teacher explainer (Eq. 11).
      ig_steps: quadrature nodes of the integrated-gradients teacher explainer.
      init_seed: seed of the one task-head initialisation every seed's student starts from
        (the authors' students all start from identical parameters: the pretrained encoder
        and a head drawn once with a fixed seed, so seeds vary only the data order, dropout
        and validation draws).
      per_seed_init: draw each seed's task head from its own seed instead (more variance
        between seeds; smat's behaviour before it followed the reference).
      explanation_source: the text each teacher explanation is computed on: the row's own
        ("text"), or its tokens in a random order fixed per row ("shuffled_text"), the
        leakage control: an explanation that points at evidence stops helping, a label
        encoded in where the mass sits survives (smat.jobs.leakage); or another row's
        explanation, of a row the teacher gives the same class ("swapped_same_label",
        :func:`same_label_donors`): what the mass says about the class survives, what it
        says about this row's words does not.
      student_pool: where the student's training rows come from: rows the teacher never
        saw ("held_out", the paper's text classification protocol) or a sample of the
        teacher's own training rows ("teacher_train", its CIFAR-100 and MLQE-PE
        protocol); validation and test rows are held out either way.
      student_layers: keep the first N layers of the teacher's pretrained encoder for the
        student (a smaller, faster student; default: the teacher's architecture). The SMaT
        explainer still combines every teacher head.
      head_weights: the fixed head coefficients of the "attention_heads" setting, one per
        teacher head in (layer, head) order, non-negative and summing to 1 (empty for every
        other setting): the teacher explanation is Eq. 11 with these coefficients frozen.
      outer_rows: where SMaT's outer loss (Eq. 9) draws its batches from: the student's
        validation rows ("validation", the authors' choice, which also early-stop every
        setting) or the last :data:`POOL_OUTER_FRACTION` of its own training pool ("pool",
        its inner steps then train on the rest), so that SMaT sees no teacher-labelled row
        the other settings do not.
      loop: how the training loop batches (the batch size is also the outer step's
        validation batch), evaluates (on validation simulability), stops and runs seeds
        (LoopConfig; the seed also draws the outer step's validation batches).
    """

    explainer: str = "smat"
    beta: float | None = None
    meta_interval: int = 1
    inner_learning_rate: float = 5e-3
    outer_learning_rate: float | None = None
    normalizer: str = dataclasses.field(default="sparsemax",
                                        metadata={"choices": tuple(NORMALIZERS)})
    ig_steps: int = 50
    init_seed: int = 0
    per_seed_init: bool = False
    explanation_source: str = dataclasses.field(default="text",
                                                metadata={"choices": EXPLANATION_SOURCES})
    student_pool: str = dataclasses.field(default="held_out",
                                          metadata={"choices": STUDENT_POOLS})
    student_layers: int | None = dataclasses.field(default=None,
                                                   metadata={"shown": "the teacher's"})
    head_weights: tuple[float, ...] = ()
    outer_rows: str = dataclasses.field(default="validation", metadata={"choices": OUTER_ROWS})
    # The authors' students stop on patience, not on an epoch cap (patience 10 for
    # classification; their regression runs use patience 5 and batch 16).
    loop: LoopConfig = LoopConfig(max_epochs=100, patience=10)

    def __post_init__(self) -> None:
        if self.explainer not in STUDENT_SETTINGS:
            raise ValueError(f"StudentTrainConfig.explainer={self.explainer!r}; expected one of "
                             f"{STUDENT_SETTINGS}")
        for name in ("ig_steps", "meta_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"StudentTrainConfig.{name} must be >= 1, got "
                                 f"{getattr(self, name)!r}")
        if self.explanation_source not in EXPLANATION_SOURCES:
            raise ValueError(f"StudentTrainConfig.explanation_source must be one of "
                             f"{EXPLANATION_SOURCES}, got {self.explanation_source!r}")
        if self.student_pool not in STUDENT_POOLS:
            raise ValueError(f"StudentTrainConfig.student_pool must be one of {STUDENT_POOLS}, "
                             f"got {self.student_pool!r}")
        if self.init_seed < 0:
            raise ValueError(f"StudentTrainConfig.init_seed must be >= 0, got {self.init_seed}")
        self._check_head_weights()
        if self.student_layers is not None and self.student_layers < 1:
            raise ValueError(f"StudentTrainConfig.student_layers must be >= 1, got "
                             f"{self.student_layers}")
        if self.outer_rows not in OUTER_ROWS:
            raise ValueError(f"StudentTrainConfig.outer_rows must be one of {OUTER_ROWS}, got "
                             f"{self.outer_rows!r}")
        if self.outer_rows != "validation" and self.explainer != "smat":
            raise ValueError(f"StudentTrainConfig.outer_rows={self.outer_rows!r} is read only "
                             f"by the 'smat' setting, not {self.explainer!r}")
        if self.per_seed_init and self.init_seed != 0:
            raise ValueError(f"StudentTrainConfig.init_seed={self.init_seed} is not used with "
                             "StudentTrainConfig.per_seed_init, which draws each seed's head "
                             "from its own seed; give one of the two")
        if self.beta is not None and self.beta < 0:
            raise ValueError(f"StudentTrainConfig.beta must be >= 0, got {self.beta}")
        # checked here, before any work, rather than when the training step is built
        for name in ("inner_learning_rate", "outer_learning_rate"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"StudentTrainConfig.{name} must be > 0, got {value}")

    def _check_head_weights(self) -> None:
        weights = np.asarray(self.head_weights, dtype=np.float64)
        if self.explainer != FIXED_HEADS:
            if weights.size:
                raise ValueError(f"StudentTrainConfig.head_weights is only read by the "
                                 f"{FIXED_HEADS!r} setting, not {self.explainer!r}")
            return
        if not weights.size or weights.min() < 0 or abs(weights.sum() - 1) > 1e-4:
            raise ValueError(f"the {FIXED_HEADS!r} setting needs StudentTrainConfig."
                             "head_weights: one non-negative coefficient per teacher head, "
                             f"summing to 1 (got {weights.size} summing to {weights.sum():.4g})")

    @property
    def resolved_beta(self) -> float:
        """beta, or the paper's value for the setting when not given."""
        return DEFAULT_BETA[self.explainer] if self.beta is None else self.beta


class StudentRows(NamedTuple):
    """Student inputs with the teacher's cached contribution, one row per example."""

    input_ids: np.ndarray  # (N, T) int32, or an image's (N, T, pixels) patch tokens
    attention_mask: np.ndarray  # (N, T) int32
    token_type_ids: np.ndarray  # (N, T) int32
    special_tokens_mask: np.ndarray  # (N, T) bool
    labels: np.ndarray  # (N,) gold labels (kept for reference; never trained on)
    teacher_logits: np.ndarray  # (N, C)
    teacher_features: np.ndarray  # (N, L, H, T) pooled attention logits (SMaT), or (N, 0)
    teacher_scores: np.ndarray  # (N, T) static explanation scores, or (N, 0)


class StudentResult(NamedTuple):
    """Outcome of :func:`train_student`."""

    student_params: nnx.State
    teacher_explainer_params: attention.AttentionExplainerParams | None
    validation: dict[str, float]
    test: dict[str, float]
    best_step: int
    steps: int
    seconds: float
    test_predictions: np.ndarray | None = None  # (N,) the best student's, on the test rows


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _teacher_logits_and_pooled(graphdef, params, input_ids, attention_mask, token_type_ids):
    out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, attention="pooled")
    return out.logits, jnp.swapaxes(out.encoder.pooled_attention_logits, 0, 1)  # (B, L, H, T)


def cache_teacher(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *,
                  setting: str, ig_steps: int = 50, batch_size: int = 32,
                  mesh: jax.sharding.Mesh | None = None,
                  explanation_source: str = "text") -> StudentRows:
    """Run the fixed teacher once over `data` and keep what the student step needs.

    Runs through :func:`smat.models.inference.map_batches` on uncut batches (the student
    batches are cut later, by the loop); with a mesh each batch is sharded over its devices.

    Args:
      graphdef, params: the teacher (``smat.models.functional.split``).
      data: the student's tokenized examples.
      setting: one of :data:`smat.registry.STUDENT_SETTINGS`; decides which explanation is
        cached.
      ig_steps: quadrature nodes for ``integrated_gradients``.
      batch_size: rows per teacher call (a multiple of the mesh's devices).
      mesh: data parallelism (:mod:`smat.parallel`); None uses the ambient mesh, if any.
      explanation_source: "shuffled_text" explains each row's tokens in a random order
        (:func:`smat.data.shuffled_tokens`), for the class the teacher gives the row
        itself; "swapped_same_label" gives each row the
        explanation of another row of the same teacher class (:func:`same_label_donors`),
        with no mass past the donor's length; the logits stay the row's own.

    Returns:
      :class:`StudentRows` aligned with `data`.
    """

    def teacher_outputs(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, Any]:
        args = (graphdef, params, batch.input_ids, batch.attention_mask, batch.token_type_ids)
        logits, pooled = _teacher_logits_and_pooled(*args)
        outputs = {"logits": logits}
        target = None  # the explained class: the predicted one
        if explanation_source == "shuffled_text" and setting != "none":
            shuffled = shuffled_tokens(Encoded(*(np.asarray(a) for a in batch)), rows)
            args = (graphdef, params, shuffled.input_ids, batch.attention_mask,
                    batch.token_type_ids)
            pooled = _teacher_logits_and_pooled(*args)[1]
            if logits.shape[-1] > 1:  # the class the teacher gives the row itself
                target = jnp.argmax(logits, axis=-1)
        if setting in ("smat", FIXED_HEADS):  # fixed heads are applied when training
            outputs["features"] = pooled
        elif setting != "none":  # a static teacher explainer (smat.jobs.explain, paper §5)
            outputs["scores"] = static_scores(*args, target, name=setting, ig_steps=ig_steps,
                                              row_ids=rows)
        return outputs

    outputs = map_batches(teacher_outputs, data, batch_size=batch_size, length_multiple=None,
                          mesh=mesh)
    if explanation_source == "swapped_same_label" and setting != "none":
        if outputs["logits"].shape[1] < 2:
            raise ValueError("explanation_source 'swapped_same_label' pairs rows of the same "
                             "teacher class: a regression teacher has none")
        lengths = np.sum(data.attention_mask != 0, axis=1)
        donors = same_label_donors(np.argmax(outputs["logits"], axis=1), lengths)
        covered = np.arange(data.attention_mask.shape[1])[None] < lengths[donors][:, None]
        for name in ("features", "scores"):
            if name in outputs:
                swapped = outputs[name][donors]
                outputs[name] = np.where(covered.reshape(len(donors), *(1,) * (
                    swapped.ndim - 2), -1), swapped, np.float32(NO_MASS))
    empty = np.zeros((len(data.labels), 0), np.float32)
    return StudentRows(*data, teacher_logits=outputs["logits"],
                       teacher_features=outputs.get("features", empty),
                       teacher_scores=outputs.get("scores", empty))


def same_label_donors(classes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """For each row, the row whose explanation it gets under "swapped_same_label": another
    row of the same class, of the same length where its class has one, else of the nearest
    length. Each class's rows are sorted by length (then index) and cut into runs of equal
    length (a run of one row joins the run before it, or after it when it is first); each
    row takes the next row's explanation in its run, the last row the first's. A class of
    one row keeps its own.

    Args:
      classes: (N,) the teacher's class of each row.
      lengths: (N,) each row's real tokens.

    Returns:
      (N,) donor row indices, a permutation without fixed points except in one-row classes.
    """
    donors = np.arange(len(classes))
    for label in np.unique(classes):
        rows = np.flatnonzero(classes == label)
        rows = rows[np.argsort(lengths[rows], kind="stable")]
        runs = np.split(rows, np.flatnonzero(np.diff(lengths[rows])) + 1)
        merged: list[np.ndarray] = []
        for run in runs:
            if merged and (len(run) == 1 or len(merged[-1]) == 1):
                merged[-1] = np.concatenate([merged[-1], run])
            else:
                merged.append(run)
        for run in merged:
            donors[run] = np.roll(run, -1)
    return donors


def _trim_rows(rows: StudentRows, multiple: int, length: int | None = None) -> StudentRows:
    """Cut the sequence axis of every per-token field (padding only; see trim_to_length)."""
    if length is None:
        length = trim_to_length(Encoded(*rows[:5]), multiple).input_ids.shape[1]
    # axis 1 is the token axis (an image's patch tokens carry their pixels on axis 2)
    cut = {name: getattr(rows, name)[:, :length] for name in
           ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")}
    if rows.teacher_features.shape[-1]:
        cut["teacher_features"] = rows.teacher_features[..., :length]
    if rows.teacher_scores.shape[-1]:
        cut["teacher_scores"] = rows.teacher_scores[..., :length]
    return rows._replace(**cut)


def fixed_head_rows(rows: StudentRows, head_weights: Sequence[float]) -> StudentRows:
    """Rows cached for SMaT (pooled teacher attention, (N, L, H, T)) turned into the static
    teacher scores of Eq. 11 with `head_weights` frozen: sum over heads of weight x pooled
    logit, 0 at padding (uniform weights give ``attention_all``'s scores).

    Raises:
      ValueError: rows without teacher attention, or a weight count other than L x H.
    """
    features = rows.teacher_features
    if features.ndim != 4:
        raise ValueError(f"the {FIXED_HEADS!r} setting needs rows cached with the teacher's "
                         "pooled attention (cache_teacher(..., setting='smat'))")
    weights = np.asarray(head_weights, np.float32)
    if weights.size != features.shape[1] * features.shape[2]:
        raise ValueError(f"StudentTrainConfig.head_weights has {weights.size} coefficients; "
                         f"the teacher has {features.shape[1]} layers x {features.shape[2]} "
                         f"heads = {features.shape[1] * features.shape[2]}")
    mask = rows.attention_mask != 0
    masked = np.where(mask[:, None, None, :], features, np.float32(0))
    scores = np.einsum("lh,nlht->nt", weights.reshape(features.shape[1:3]), masked)
    return rows._replace(teacher_scores=np.where(mask, scores, 0).astype(np.float32),
                         teacher_features=np.zeros((len(rows.labels), 0), np.float32))


def split_pool_for_outer(rows: StudentRows) -> tuple[StudentRows, StudentRows]:
    """(inner rows, outer rows): the last :data:`POOL_OUTER_FRACTION` of a student's pool
    (at least one row) for SMaT's outer loss, the rest for its inner steps.

    Raises:
      ValueError: a pool of fewer than 2 rows.
    """
    num = len(rows.labels)
    if num < 2:
        raise ValueError(f"outer_rows='pool' splits the training pool; it has {num} row")
    cut = num - max(1, round(POOL_OUTER_FRACTION * num))
    return (StudentRows(*(field[:cut] for field in rows)),
            StudentRows(*(field[cut:] for field in rows)))


def as_batch(rows: StudentRows) -> dict[str, np.ndarray]:
    """The SMaT step's batch of `rows`: inputs and the teacher fields the setting cached."""
    batch = {"input_ids": rows.input_ids, "attention_mask": rows.attention_mask,
             "token_type_ids": rows.token_type_ids, "teacher_logits": rows.teacher_logits}
    if rows.teacher_features.shape[-1]:
        batch["teacher_features"] = rows.teacher_features
    if rows.teacher_scores.shape[-1]:
        batch["teacher_scores"] = rows.teacher_scores
    return batch


def explainer_configs(setting: str, *, num_layers: int, num_heads: int, normalizer: str
                      ) -> tuple[attention.AttentionExplainerConfig,
                                 attention.AttentionExplainerConfig]:
    """(SMaT teacher, student) attention-explainer configs of a setting (design §5).

    The student explainer covers the student's last layer when the teacher explainer is
    "attention_last", all its layers otherwise; the SMaT teacher explainer covers all the
    teacher's heads, combined by `normalizer` (Eq. 11).
    """
    teacher = attention.AttentionExplainerConfig(num_layers=num_layers, num_heads=num_heads,
                                                 normalizer=normalizer)
    # The student explainer combines its heads with the teacher's normalizer, as in the
    # authors' runs (one `normalize_head_coeffs` for both).
    student = attention.AttentionExplainerConfig(
        num_layers=num_layers, num_heads=num_heads, normalizer=normalizer,
        layer=-1 if setting == "attention_last" else None)
    return teacher, student


@dataclasses.dataclass(frozen=True)
class AttentionExplainerFn:
    """``(phi, pooled, mask) -> Saliency`` for the SMaT step, compared by value.

    Equal configs give equal functions, so the jitted step compiled for one student run is
    reused by the next (seeds, settings) instead of being traced and compiled again.

    Attributes:
      config: the attention explainer (paper Eq. 11).
      example_first: the pooled rows arrive as cached (B, L, H, T) teacher features rather
        than the model's (L, B, H, T).
    """

    config: attention.AttentionExplainerConfig
    example_first: bool = False

    def __call__(self, params, pooled, mask):
        if self.example_first:
            pooled = jnp.swapaxes(pooled, 0, 1)  # (L, B, H, T)
        return attention.apply(params, pooled, mask, config=self.config)


class _Setup(NamedTuple):
    """What one student run needs besides its data: the model, the step and its functions."""

    graphdef: nnx.GraphDef
    functions: scaffold.ScaffoldFunctions
    step_config: scaffold.ScaffoldConfig
    teacher_cfg: attention.AttentionExplainerConfig
    student_cfg: attention.AttentionExplainerConfig
    learned: bool
    beta: float


def _setup(model: nnx.Module, train: StudentRows, *, task: str,
           config: StudentTrainConfig) -> _Setup:
    setting, beta = config.explainer, config.resolved_beta
    learned = setting == "smat"
    if learned and not train.teacher_features.shape[-1]:
        raise ValueError(f"setting {setting!r} needs cached teacher attention features; build "
                         f"the rows with cache_teacher(..., setting={setting!r})")
    if setting not in ("none", "smat") and not train.teacher_scores.shape[-1]:
        raise ValueError(f"setting {setting!r} needs cached teacher scores; build the rows "
                         f"with cache_teacher(..., setting={setting!r})")
    encoder = model.encoder.config
    teacher_cfg, student_cfg = explainer_configs(
        setting, num_layers=encoder.num_layers, num_heads=encoder.num_heads,
        normalizer=config.normalizer)
    if learned:  # the SMaT explainer combines the teacher's heads, whatever the student's
        teacher_layers, teacher_heads = train.teacher_features.shape[1:3]
        teacher_cfg = dataclasses.replace(teacher_cfg, num_layers=teacher_layers,
                                          num_heads=teacher_heads)
    graphdef = functional.split(model)[0]
    functions = scaffold.ScaffoldFunctions(
        student_forward=scaffold.ClassifierForward(graphdef),
        student_explainer=AttentionExplainerFn(student_cfg) if beta > 0 else None,
        teacher_explainer=AttentionExplainerFn(teacher_cfg, example_first=True)
        if learned else None,
    )
    # The meta update's settings shape only SMaT's step; left at their defaults for the
    # other settings, whose step they do not change, so those students share one program.
    meta = dict(meta_interval=config.meta_interval,
                outer_learning_rate=(OUTER_LEARNING_RATE[task]
                                     if config.outer_learning_rate is None
                                     else config.outer_learning_rate)) if learned else {}
    step_config = scaffold.ScaffoldConfig(
        task=task, beta=beta, inner_learning_rate=config.inner_learning_rate, **meta)
    return _Setup(graphdef, functions, step_config, teacher_cfg, student_cfg, learned, beta)


def _init_state(setup: _Setup, model: nnx.Module, seed: int) -> scaffold.ScaffoldState:
    params = jax.tree.map(jnp.copy, functional.split(model)[1])  # the step donates its state
    return scaffold.init_state(
        setup.step_config, student_params=params,
        student_explainer_params=attention.init(None, setup.student_cfg)
        if setup.beta > 0 else None,
        teacher_explainer_params=attention.init(None, setup.teacher_cfg)
        if setup.learned else None,
        rng=jax.random.PRNGKey(seed))  # raw uint32 key data: checkpointable


def _step_batches(rows: list[StudentRows], validation: StudentRows, *, seeds: list[int],
                  step: int, config: StudentTrainConfig
                  ) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """Each seed's train batch and validation batch (outer step), cut to one length.

    The validation rows of seed s at step k are a draw seeded by (s, k), so a resumed or a
    vmapped run sees the rows a single uninterrupted run would.
    """
    num_valid = len(validation.labels)
    valids = []
    for seed in seeds:
        draw = np.random.default_rng([seed, step]).choice(
            num_valid, size=min(config.loop.batch_size, num_valid), replace=False)
        valids.append(StudentRows(*(field[draw] for field in validation)))
    length = max(_trim_rows(r, config.loop.length_multiple).input_ids.shape[1]
                 for r in [*rows, *valids])
    return ([as_batch(_trim_rows(r, config.loop.length_multiple, length)) for r in rows],
            [as_batch(_trim_rows(v, config.loop.length_multiple, length)) for v in valids])


def _predictions(graphdef: nnx.GraphDef, params: nnx.State, rows: StudentRows, *, task: str,
                 config: StudentTrainConfig, mesh) -> np.ndarray:
    """The student's predictions (N,) on `rows`."""
    logits = predict_logits(graphdef, params, Encoded(*rows[:5]),
                            length_multiple=config.loop.length_multiple, mesh=mesh)
    return predictions_from_logits(logits, task)


def _simulability(predictions: np.ndarray, rows: StudentRows, *,
                  task: str) -> dict[str, float]:
    """Agreement of the student's predictions with the teacher's (Eq. 1) on `rows`."""
    return task_metrics(task, predictions, predictions_from_logits(rows.teacher_logits, task))


def _best_of(state: scaffold.ScaffoldState) -> dict:
    return {"student": state.student_params, "teacher_explainer": state.teacher_explainer_params}


def _seed_of_group(on_epoch_end: Callable, group: list[int], i: int, epoch: int,
                   state: scaffold.ScaffoldState) -> None:
    on_epoch_end(group[i], epoch, state)


def train_student(
    models: nnx.Module | Sequence[nnx.Module],
    train: StudentRows,
    validation: StudentRows,
    test: StudentRows,
    *,
    task: str,
    config: StudentTrainConfig,
    output_dir: str | Path | Sequence[str | Path],
    seeds: Sequence[int] | None = None,
    progress: bool = True,
    mesh: jax.sharding.Mesh | None = None,
    on_epoch_end: Callable[[int, int, scaffold.ScaffoldState], None] | None = None,
) -> list[StudentResult]:
    """Train one student per seed to simulate the teacher whose outputs are cached in the rows.

    Each seed early-stops on validation simulability (agreement with the teacher's
    predictions, Eq. 1) with its own batch order, dropout key and validation draws, and
    reports the test simulability of its best student. With ``config.loop.parallel_seeds`` the
    seeds step together in one program (the SMaT step over a leading seed axis), otherwise
    one after another; both give the same results. Resumable like the teacher
    (:func:`smat.training.loop.fit`): one seed uses `output_dir`, several
    ``output_dir/seed{s}``.

    Args:
      models: one student ``SequenceClassifier`` per seed (initialised from the pretrained
        encoder), all of one architecture; a single module for a single seed.
      train, validation, test: student splits from :func:`cache_teacher` (shared by seeds).
      task: "classification" or "regression".
      config: the setting and its hyperparameters; ``config.loop.seed`` is the seed when
        `seeds` is None.
      output_dir: run folder, or one folder per seed.
      seeds: distinct non-negative seeds, one per model (default: ``(config.loop.seed,)``).
      progress: show a progress bar.
      mesh: data parallelism (:mod:`smat.parallel`): train and validation batches sharded
        over the mesh's devices, the SMaT states replicated; None uses the ambient mesh.
      on_epoch_end: ``(i, epoch, state_i)`` after every epoch of seed i (its index in
        `seeds`), e.g. to trace the SMaT coefficients (:func:`smat.training.loop.fit`).

    Returns:
      One :class:`StudentResult` per seed (with the learned SMaT head coefficients when the
      setting is "smat").

    Raises:
      ValueError: repeated or negative seeds, a model count that differs from the seed
        count, or a setting whose cached teacher fields are missing from the rows.
    """
    models, seeds, groups = seed_groups(models, seeds, default_seed=config.loop.seed,
                                        parallel=config.loop.parallel_seeds)
    if config.explainer == FIXED_HEADS:
        train = fixed_head_rows(train, config.head_weights)
    outer = validation
    if config.outer_rows == "pool":
        train, outer = split_pool_for_outer(train)
    setup = _setup(models[0], train, task=task, config=config)
    if config.explainer in STATIC:  # the teacher's scores at its explainer's temperature
        temperature = STATIC[config.explainer].teacher_temperature
        train = train._replace(teacher_scores=train.teacher_scores / np.float32(temperature))
    mesh = resolve_mesh(mesh)
    predictions = functools.partial(_predictions, setup.graphdef, task=task, config=config,
                                    mesh=mesh)

    def simulability(params, rows: StudentRows) -> dict[str, float]:
        return _simulability(predictions(params, rows), rows, task=task)

    folders = seed_folders(output_dir, seeds)
    results = []
    for group in groups:
        group_seeds = [seeds[i] for i in group]

        def stack(rows, step, group_seeds=group_seeds):
            train_batches, valid_batches = _step_batches(rows, outer, seeds=group_seeds,
                                                         step=step, config=config)

            def stacked(batches):
                return {key: np.stack([b[key] for b in batches]) for key in batches[0]}

            return stacked(train_batches), stacked(valid_batches) if setup.learned else None

        def step(states, batch):
            return scaffold.scaffold_seed_step(states, *batch, config=setup.step_config,
                                               functions=setup.functions)

        results += fit(
            stack_seeds([_init_state(setup, models[i], seeds[i]) for i in group]), step,
            [train] * len(group), stack=stack,
            evaluate=lambda k, state: simulability(state.student_params, validation),
            metric=primary_metric(task), best_of=_best_of, settings=config.loop,
            seeds=group_seeds, output_dirs=[folders[i] for i in group], progress=progress,
            on_epoch_end=None if on_epoch_end is None else functools.partial(
                _seed_of_group, on_epoch_end, group),
            desc=f"student {config.explainer} n={len(train.labels)} seeds "
                 f"{','.join(map(str, group_seeds))}", mesh=mesh)
    tested = [predictions(r.best["student"], test) for r in results]
    return [StudentResult(r.best["student"], r.best["teacher_explainer"], r.best_scores,
                          _simulability(p, test, task=task), r.best_step, r.steps, r.seconds,
                          test_predictions=p) for r, p in zip(results, tested, strict=True)]
