"""Teacher training: fine-tune a pretrained encoder on gold labels, with early stopping.

The loop reads top to bottom (big_vision style): optimizer, one jitted update step, then
epochs of batches with periodic validation, best-model checkpoint, JSON-lines metrics and a
resumable "last" checkpoint. A run killed at any point resumes from its last evaluation and
sees exactly the batches it would have seen (the batch order is a function of seed and epoch).

Reference defaults (DESIGN 4, from the SMaT authors' code): AdamW lr 5e-5, 500 warmup steps
then linear decay, global-norm clipping at 1.0, early stopping on the validation metric.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from smat.data import Encoded, iterate_batches, num_batches, padded_length
from smat.evaluation.task_metrics import primary_metric, task_metrics
from smat.loop import check_seeds, fit, fit_seeds
from smat.losses import label_loss
from smat.models import functional
from smat.parallel import replicate, resolve_mesh, shard_batch


@dataclasses.dataclass(frozen=True, kw_only=True)
class TeacherTrainConfig:
    """Hyperparameters of teacher fine-tuning.

    Attributes:
      learning_rate: AdamW peak learning rate.
      warmup_steps: linear warmup steps, then linear decay to 0 at the last step.
      weight_decay: decoupled weight decay of AdamW.
      clip_norm: global gradient-norm clip.
      batch_size: examples per step.
      max_epochs: upper bound on passes over the training split.
      patience: stop after this many evaluations without improvement.
      evals_per_epoch: validation evaluations per epoch (>= 1).
      seed: data order, dropout and head initialisation seed.
      length_multiple: batches are cut to their longest sequence rounded up to this multiple
        (at most max_len / length_multiple compiled shapes; results are unchanged because
        the cut columns are padding).
    """

    learning_rate: float = 5e-5
    warmup_steps: int = 500
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    batch_size: int = 32
    max_epochs: int = 3
    patience: int = 5
    evals_per_epoch: int = 1
    seed: int = 0
    length_multiple: int = 16

    def __post_init__(self) -> None:
        positive = ("learning_rate", "batch_size", "max_epochs", "patience", "evals_per_epoch",
                    "length_multiple", "clip_norm")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"TeacherTrainConfig.{name} must be > 0, got "
                                 f"{getattr(self, name)!r}")
        for name in ("warmup_steps", "seed", "weight_decay"):
            if getattr(self, name) < 0:
                raise ValueError(f"TeacherTrainConfig.{name} must be >= 0, got "
                                 f"{getattr(self, name)!r}")


class TrainState(NamedTuple):
    """What an optimizer step reads and writes."""

    step: jax.Array  # () int32
    params: nnx.State
    opt_state: optax.OptState


class TeacherResult(NamedTuple):
    """Outcome of :func:`train_teacher`: the best parameters and their scores."""

    params: nnx.State
    best_validation: dict[str, float]
    best_step: int
    steps: int
    seconds: float


def teacher_optimizer(config: TeacherTrainConfig, total_steps: int) -> optax.GradientTransformation:
    """Clip, then AdamW on a warmup + linear-decay schedule (DESIGN 4).

    Equal hyperparameters return the *same* object, so the jitted step (which takes the
    optimizer as a static argument) compiles once for every run that shares them, e.g. the
    seeds and cells of a ROAR sweep.

    Warns:
      UserWarning: warmup_steps >= total_steps; the warmup is shortened to total_steps - 1.
    """
    warmup = config.warmup_steps
    if warmup >= total_steps:
        warmup = max(total_steps - 1, 0)
        warnings.warn(f"warmup_steps={config.warmup_steps} >= the {total_steps} training steps; "
                      f"warming up for {warmup} steps instead", stacklevel=2)
    return _adamw_with_warmup(config.learning_rate, warmup, total_steps, config.weight_decay,
                              config.clip_norm)


@functools.lru_cache(maxsize=32)
def _adamw_with_warmup(learning_rate: float, warmup: int, total_steps: int,
                       weight_decay: float, clip_norm: float) -> optax.GradientTransformation:
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, learning_rate, max(warmup, 1)),
         optax.linear_schedule(learning_rate, 0.0, max(total_steps - warmup, 1))],
        boundaries=[warmup],
    )
    return optax.chain(optax.clip_by_global_norm(clip_norm),
                       optax.adamw(schedule, weight_decay=weight_decay))


def trim_to_length(batch: Encoded, multiple: int) -> Encoded:
    """Cut every (N, T) field to the batch's longest sequence, rounded up to `multiple`.

    Only padding columns are removed, so any model output over real tokens is unchanged.
    """
    length = padded_length(batch.attention_mask, multiple)
    return batch._replace(
        input_ids=batch.input_ids[:, :length],
        attention_mask=batch.attention_mask[:, :length],
        token_type_ids=batch.token_type_ids[:, :length],
        special_tokens_mask=batch.special_tokens_mask[:, :length],
    )


def teacher_update(
    graphdef: nnx.GraphDef,
    state: TrainState,
    input_ids: jax.Array,
    attention_mask: jax.Array,
    token_type_ids: jax.Array,
    labels: jax.Array,
    key: jax.Array,
    *,
    optimizer: optax.GradientTransformation,
    task: str,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One supervised update on gold labels, with dropout keyed by fold_in(key, step).

    Jitted as :data:`teacher_step` (state donated) and, vmapped over seeds, as
    :data:`teacher_seed_step`. Sharded inputs (:mod:`smat.parallel`) make jit partition the
    update over the devices; the batch-mean loss makes the result that of one device.
    """

    def loss_fn(params):
        logits = functional.apply(
            graphdef, params, input_ids, attention_mask=attention_mask,
            token_type_ids=token_type_ids, attention="none",
            dropout_rng=jax.random.fold_in(key, state.step),
        ).logits
        return label_loss(logits, labels, task=task)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "grad_norm": optax.global_norm(grads),
               "param_norm": optax.global_norm(params), "update_norm": optax.global_norm(updates)}
    return TrainState(state.step + 1, params, opt_state), metrics


teacher_step = jax.jit(teacher_update, static_argnames=("graphdef", "optimizer", "task"),
                       donate_argnames=("state",))


def _teacher_seed_update(graphdef, states, input_ids, attention_mask, token_type_ids, labels,
                         keys, *, optimizer, task):
    """:func:`teacher_update` vmapped over a leading seed axis of every argument but the
    static ones: states (S, ...), batches (S, B, ...) and keys (S,)."""
    update = functools.partial(teacher_update, graphdef, optimizer=optimizer, task=task)
    return jax.vmap(update)(states, input_ids, attention_mask, token_type_ids, labels, keys)


teacher_seed_step = jax.jit(_teacher_seed_update,
                            static_argnames=("graphdef", "optimizer", "task"),
                            donate_argnames=("states",))


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _logits(graphdef, params, input_ids, attention_mask, token_type_ids):
    return functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids, attention="none").logits


def pad_rows(batch: NamedTuple, batch_size: int) -> NamedTuple:
    """`batch` with copies of its first row appended up to `batch_size` rows (fixed shapes)."""
    rows = len(batch[0])
    if rows >= batch_size:
        return batch
    pad = np.zeros(batch_size - rows, dtype=np.int64)
    return type(batch)(*(np.concatenate([f, f[pad]]) for f in batch))


def predict_logits(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *,
                   batch_size: int = 64, length_multiple: int = 16,
                   mesh: jax.sharding.Mesh | None = None) -> np.ndarray:
    """Model outputs (N, C) for every row of `data`, in order, in eval mode (no dropout).

    The last batch is padded to `batch_size` with copies of its first row (then sliced
    away) so every call reuses the same compiled shapes. With a `mesh` (or an ambient one,
    see :func:`smat.parallel.resolve_mesh`) every batch is sharded over its devices, so
    `batch_size` must be a multiple of their number.
    """
    mesh = resolve_mesh(mesh)
    outputs = []
    for batch in iterate_batches(data, batch_size=batch_size, seed=0, epoch=0, shuffle=False):
        rows = batch.input_ids.shape[0]
        batch = trim_to_length(pad_rows(batch, batch_size), length_multiple)
        inputs = (batch.input_ids, batch.attention_mask, batch.token_type_ids)
        if mesh is not None:
            inputs = shard_batch(inputs, mesh)
        logits = _logits(graphdef, params, *inputs)
        outputs.append(np.asarray(logits)[:rows])
    return np.concatenate(outputs)


def predictions_from_logits(logits: np.ndarray, task: str) -> np.ndarray:
    """Class ids (argmax) for classification, the single output for regression."""
    return np.argmax(logits, axis=-1) if task == "classification" else logits[:, 0]


def evaluate(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *, task: str,
             references: np.ndarray | None = None,
             mesh: jax.sharding.Mesh | None = None) -> dict[str, float]:
    """Task metrics of the model on `data` against its labels (or given `references`)."""
    predictions = predictions_from_logits(predict_logits(graphdef, params, data, mesh=mesh),
                                          task)
    return task_metrics(task, predictions, data.labels if references is None else references)


def _steps_per_epoch(train: Encoded, batch_size: int) -> int:
    """Full batches per epoch; ValueError (before any optimizer is built) when there are none."""
    steps = num_batches(len(train.labels), batch_size=batch_size, drop_last=True)
    if steps == 0:
        raise ValueError(f"the training split has {len(train.labels)} examples, fewer than one "
                         f"batch of {batch_size}")
    return steps


def train_teacher(
    model: nnx.Module,
    train: Encoded,
    validation: Encoded,
    *,
    task: str,
    config: TeacherTrainConfig,
    output_dir: str | Path,
    progress: bool = True,
    mesh: jax.sharding.Mesh | None = None,
) -> TeacherResult:
    """Fine-tune `model` on `train`, early-stopping on `validation`; resumable.

    Writes under `output_dir` (see :func:`smat.loop.fit`): `metrics.jsonl` (one JSON object
    per evaluation with the mean step metrics since the last one) and `last/` (the training
    state and best parameters at the latest evaluation, from which a rerun resumes).

    Args:
      model: a smat ``SequenceClassifier`` (its parameters are the initial point).
      train: tokenized training split with gold labels.
      validation: tokenized validation split (early stopping).
      task: "classification" or "regression".
      config: hyperparameters.
      output_dir: run folder; an existing ``last/`` checkpoint is resumed.
      progress: show a tqdm progress bar.
      mesh: data parallelism over the mesh's devices (:mod:`smat.parallel`): batches
        sharded, state replicated; None uses the ambient mesh, if any.

    Returns:
      :class:`TeacherResult` with the best parameters.

    Raises:
      ValueError: an empty split, a split smaller than one batch, or a batch size that
        does not divide over the mesh's devices.
      RuntimeError: a non-finite loss (naming the step range).
    """
    if len(validation.labels) == 0:
        raise ValueError("the validation split is empty; early stopping needs examples")
    steps_per_epoch = _steps_per_epoch(train, config.batch_size)
    optimizer = teacher_optimizer(config, steps_per_epoch * config.max_epochs)
    graphdef, params = functional.split(model)
    key = jax.random.key(config.seed)
    # The step donates its state: work on a copy so the module's own arrays stay valid.
    params = jax.tree.map(jnp.copy, params)

    def step(state: TrainState, batch: Encoded) -> tuple[TrainState, dict[str, jax.Array]]:
        return teacher_step(graphdef, state, batch.input_ids, batch.attention_mask,
                            batch.token_type_ids, batch.labels, key, optimizer=optimizer,
                            task=task)

    result = fit(
        TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params)), step, train,
        prepare=lambda rows: trim_to_length(rows, config.length_multiple),
        evaluate=lambda state: evaluate(graphdef, state.params, validation, task=task,
                                        mesh=mesh),
        metric=primary_metric(task), best_of=lambda state: state.params,
        batch_size=config.batch_size, max_epochs=config.max_epochs, patience=config.patience,
        evals_per_epoch=config.evals_per_epoch, seed=config.seed, output_dir=output_dir,
        progress=progress, desc="teacher", mesh=mesh,
    )
    return TeacherResult(result.best, result.best_scores, result.best_step, result.steps,
                         result.seconds)


def _stack_seed_batches(batches: Sequence[Encoded], multiple: int) -> Encoded:
    """One batch per seed -> fields stacked (S, B, ...), cut to the longest trimmed length."""
    length = max(trim_to_length(batch, multiple).input_ids.shape[1] for batch in batches)
    return Encoded(*(np.stack([field[:, :length] if field.ndim == 2 else field
                               for field in fields])
                     for fields in zip(*batches, strict=True)))


def _per_seed(data: Encoded | Sequence[Encoded], num_seeds: int, name: str) -> list[Encoded]:
    """One split per seed: `data` repeated, or checked to be one equal-size split per seed."""
    if isinstance(data, Encoded):
        return [data] * num_seeds
    data = list(data)
    if len(data) != num_seeds:
        raise ValueError(f"one {name} split per seed: got {len(data)} for {num_seeds} seeds")
    sizes = {len(d.labels) for d in data}
    if len(sizes) != 1:
        raise ValueError(f"the per-seed {name} splits must have one size, got {sorted(sizes)}")
    return data


def train_teacher_seeds(
    models: Sequence[nnx.Module],
    train: Encoded | Sequence[Encoded],
    validation: Encoded | Sequence[Encoded],
    *,
    task: str,
    config: TeacherTrainConfig,
    seeds: Sequence[int],
    output_dir: str | Path | None = None,
    progress: bool = True,
    mesh: jax.sharding.Mesh | None = None,
) -> list[TeacherResult]:
    """Train one teacher per seed in one program: :func:`teacher_update` vmapped over seeds.

    Seed ``seeds[i]`` follows :func:`train_teacher` with ``config.seed = seeds[i]`` from
    ``models[i]``: its own initial parameters, batch order (seed, epoch) and dropout key,
    and its own evaluations, best parameters and early stopping. All seeds step together
    (parameters and optimizer states stacked on a leading seed axis); a seed that has
    stopped keeps its best parameters while the others go on. Each step's batches are cut
    to the longest of the seeds' trimmed lengths, which only adds padding columns. With a
    mesh, the stacked state is replicated and each batch sharded on its example axis
    (axis 1 of ``(S, B, T)``), so seeds and data parallelism compose.

    Unlike :func:`train_teacher` this is not resumable (no checkpoints are written).

    Args:
      models: one smat ``SequenceClassifier`` per seed, all of the same architecture.
      train, validation: tokenized splits shared by every seed, or one per seed (e.g. the
        per-seed masked data of ROAR), all of one size.
      task: "classification" or "regression".
      config: hyperparameters; its ``seed`` is replaced by each of `seeds`.
      seeds: distinct non-negative seeds, one per model.
      output_dir: if given, ``seed{s}/metrics.jsonl`` per seed (as :func:`smat.loop.fit`).
      progress: show a tqdm progress bar.
      mesh: data parallelism (see :func:`train_teacher`); None uses the ambient mesh.

    Returns:
      One :class:`TeacherResult` per seed, in order; ``seconds`` is the shared wall time.

    Raises:
      ValueError: no seeds, repeated or negative seeds, a model or split count that differs
        from the seed count, per-seed splits of different sizes, models of different
        architectures, a split smaller than one batch, or a batch that does not divide over
        the mesh.
      RuntimeError: a non-finite step metric (naming the step range).
    """
    seeds = check_seeds(seeds, len(models))
    trains = _per_seed(train, len(seeds), "train")
    validations = _per_seed(validation, len(seeds), "validation")
    if len(validations[0].labels) == 0:
        raise ValueError("the validation split is empty; early stopping needs examples")
    train = trains[0]
    graphdef, first = functional.split(models[0])
    params = [first] + [functional.split(model)[1] for model in models[1:]]
    if any(functional.split(model)[0] != graphdef for model in models[1:]):
        raise ValueError("the models of train_teacher_seeds must share one architecture "
                         "(equal graphdefs); build them from the same config")
    steps_per_epoch = _steps_per_epoch(train, config.batch_size)
    total_steps = steps_per_epoch * config.max_epochs
    optimizer = teacher_optimizer(config, total_steps)
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *params)  # (S, ...) fresh arrays
    states = TrainState(jnp.zeros((len(seeds),), jnp.int32), stacked,
                        jax.vmap(optimizer.init)(stacked))
    keys = jnp.stack([jax.random.key(seed) for seed in seeds])  # (S,) as train_teacher's keys
    mesh = resolve_mesh(mesh)
    if mesh is not None:
        keys = replicate(keys, mesh)

    def step(states, batch):
        return teacher_seed_step(graphdef, states, *batch, keys, optimizer=optimizer, task=task)

    def stack(rows, step):
        batch = _stack_seed_batches(rows, config.length_multiple)
        return batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.labels

    results = fit_seeds(
        states, step, trains, stack=stack,
        evaluate=lambda i, state: evaluate(graphdef, state.params, validations[i], task=task,
                                           mesh=mesh),
        metric=primary_metric(task), best_of=lambda state: state.params,
        batch_size=config.batch_size, max_epochs=config.max_epochs, patience=config.patience,
        evals_per_epoch=config.evals_per_epoch, seeds=seeds, output_dir=output_dir,
        progress=progress, desc="teachers", mesh=mesh)
    return [TeacherResult(r.best, r.best_scores, r.best_step, r.steps, r.seconds)
            for r in results]
