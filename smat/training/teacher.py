"""Teacher training: fine-tune a pretrained encoder on gold labels, with early stopping.

The loop reads top to bottom (big_vision style): optimizer, one jitted update step, then
epochs of batches with periodic validation, best-model checkpoint, JSON-lines metrics and a
resumable "last" checkpoint. A run killed at any point resumes from its last evaluation and
sees exactly the batches it would have seen (the batch order is a function of seed and epoch).

Reference defaults (design §5, from the SMaT authors' code): AdamW lr 5e-5, 500 warmup steps
then a constant rate, global-norm clipping at 1.0, early stopping on the validation metric.
A linear decay to 0 after the warmup is a setting (the demo and ROAR presets use it).
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

from smat.data import DataShards, Encoded, batches_per_epoch, split_size
from smat.models import functional
from smat.models.inference import predict_logits, predictions_from_logits, trim_to_length
from smat.parallel import process_max, replicate, resolve_mesh
from smat.training import dynamics, regularizers
from smat.training.loop import (
    LoopConfig,
    fit,
    over_seeds,
    seed_folders,
    seed_groups,
    stack_seeds,
)
from smat.training.losses import label_loss
from smat.training.optimizers import standard_promotion
from smat.training.task_metrics import primary_metric, task_metrics

TYING_TARGETS = ("embedding_output", "word_embeddings")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TeacherTrainConfig:
    """Hyperparameters of teacher fine-tuning.

    Attributes:
      learning_rate: AdamW peak learning rate.
      warmup_steps: linear warmup steps from 0 to the learning rate (then `schedule`).
      weight_decay: decoupled weight decay of AdamW.
      clip_norm: global gradient-norm clip.
      schedule: the learning rate after the linear warmup: "constant" (the SMaT authors')
        or "linear_decay" (to 0 at the last step).
      conicity_weight: weight of the conicity penalty on the last layer's hidden states
        (Jukić et al. Eq. 2; 0 = unregularized, conicity is still logged).
      tying_weight: weight of the tying penalty between the last layer's hidden states and
        the embedded tokens (Jukić et al. Eq. 3; 0 = unregularized, still logged).
      tying_target: what "the embedded tokens" e_t = embed(x_t) are: "embedding_output",
        the embedding block's output (word + position + type embeddings, LayerNorm), the
        encoder's input as the word embeddings are a recurrent model's (Tutek and Šnajder
        tie a BiLSTM's states to its inputs), or "word_embeddings", the raw lookups.
      training_dynamics: at every epoch's end, record each training instance's gold-class
        probability and correctness (data cartography; classification only).
      data_shards: deal the training rows out over this many data shards (row i to shard
        i mod N), each batch taking batch_size / N rows of every shard; each process of a
        multi-process run tokenizes and holds only its block of shards. 1: every process
        holds every row. The batches depend on N, not on the process count, so one process
        with N shards reproduces N processes.
      loop: how the training loop batches, evaluates, stops and runs seeds (LoopConfig).
    """

    learning_rate: float = 5e-5
    warmup_steps: int = 500
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    schedule: str = dataclasses.field(default="constant",
                                      metadata={"choices": ("constant", "linear_decay")})
    conicity_weight: float = 0.0
    tying_weight: float = 0.0
    tying_target: str = dataclasses.field(default="embedding_output", metadata={
        "choices": TYING_TARGETS})
    training_dynamics: bool = False
    data_shards: int = 1
    loop: LoopConfig = LoopConfig(max_epochs=3, patience=5)

    def __post_init__(self) -> None:
        for name in ("learning_rate", "clip_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"TeacherTrainConfig.{name} must be > 0, got "
                                 f"{getattr(self, name)!r}")
        if self.schedule not in ("constant", "linear_decay"):
            raise ValueError(f"TeacherTrainConfig.schedule must be 'constant' or "
                             f"'linear_decay', got {self.schedule!r}")
        if self.tying_target not in TYING_TARGETS:
            raise ValueError(f"TeacherTrainConfig.tying_target must be one of {TYING_TARGETS}, "
                             f"got {self.tying_target!r}")
        if self.data_shards < 1 or self.loop.batch_size % self.data_shards:
            raise ValueError(f"TeacherTrainConfig.data_shards must be >= 1 and divide the batch "
                             f"size {self.loop.batch_size}, got {self.data_shards!r}")
        for name in ("warmup_steps", "weight_decay", "conicity_weight", "tying_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"TeacherTrainConfig.{name} must be >= 0, got "
                                 f"{getattr(self, name)!r}")


class TrainState(NamedTuple):
    """What an optimizer step reads and writes."""

    step: jax.Array  # () int32; (S,) when stacked over seeds
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
    """Clip, then AdamW with a linear warmup, then a constant or linearly decaying rate.

    Equal hyperparameters return the *same* object, so the jitted step (which takes the
    optimizer as a static argument) compiles once for every run that shares them, e.g. the
    seeds and cells of a ROAR sweep. With the constant schedule the run's length is not one
    of them (it changes nothing after the warmup), so runs of other lengths share the step.

    Warns:
      UserWarning: warmup_steps >= total_steps; the warmup is shortened to total_steps - 1.
    """
    warmup = config.warmup_steps
    if warmup >= total_steps:
        warmup = max(total_steps - 1, 0)
        warnings.warn(f"warmup_steps={config.warmup_steps} >= the {total_steps} training steps; "
                      f"warming up for {warmup} steps instead", stacklevel=2)
    decay = config.schedule == "linear_decay"
    return _adamw_with_warmup(config.learning_rate, warmup, total_steps if decay else None,
                              config.weight_decay, config.clip_norm)


@functools.lru_cache(maxsize=32)
def _adamw_with_warmup(learning_rate: float, warmup: int, decay_until: int | None,
                       weight_decay: float, clip_norm: float) -> optax.GradientTransformation:
    """`decay_until`: the step at which the rate has decayed linearly to 0 (None: constant)."""
    after_warmup = (optax.constant_schedule(learning_rate) if decay_until is None else
                    optax.linear_schedule(learning_rate, 0.0, max(decay_until - warmup, 1)))
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, learning_rate, max(warmup, 1)), after_warmup],
        boundaries=[warmup],
    )
    return standard_promotion(optax.chain(optax.clip_by_global_norm(clip_norm),
                                          optax.adamw(schedule, weight_decay=weight_decay)))


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
    conicity_weight: float = 0.0,
    tying_weight: float = 0.0,
    tying_target: str = "embedding_output",
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One supervised update on gold labels, with dropout keyed by fold_in(key, step).

    The loss adds ``conicity_weight * conicity + tying_weight * tying`` of the last layer's
    hidden states (:mod:`smat.training.regularizers`); both are returned as metrics.

    Jitted as :data:`teacher_step` (state donated) and, lifted over a leading seed axis
    (:func:`smat.training.loop.over_seeds`), as :data:`teacher_seed_step`. Sharded inputs
    (:mod:`smat.parallel`) make jit partition the update over the devices; the batch-mean
    loss makes the result that of one device.
    """

    def loss_fn(params):
        out = functional.apply(
            graphdef, params, input_ids, attention_mask=attention_mask,
            token_type_ids=token_type_ids, attention="none",
            dropout_rng=jax.random.fold_in(key, state.step),
        )
        hidden = out.encoder.last_hidden_state
        embeddings = (out.encoder.embedding_output if tying_target == "embedding_output"
                      else out.encoder.inputs_embeds)
        task_loss = label_loss(out.logits, labels, task=task)
        parts = {"task_loss": task_loss,
                 "conicity": jnp.mean(regularizers.conicity(hidden, attention_mask))}
        # tying needs hidden size = embedding size (ELECTRA's differ): logged when they
        # match, and with a weight it raises (naming both) when they do not
        if tying_weight or hidden.shape == embeddings.shape:
            parts["tying"] = jnp.mean(regularizers.tying(hidden, embeddings, attention_mask))
        loss = task_loss
        if conicity_weight:
            loss = loss + conicity_weight * parts["conicity"]
        if tying_weight:
            loss = loss + tying_weight * parts["tying"]
        return loss, parts

    (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, **parts, "grad_norm": optax.global_norm(grads),
               "param_norm": optax.global_norm(params), "update_norm": optax.global_norm(updates)}
    return TrainState(state.step + 1, params, opt_state), metrics


_STATIC = ("graphdef", "optimizer", "task", "conicity_weight", "tying_weight", "tying_target")

teacher_step = jax.jit(teacher_update, static_argnames=_STATIC, donate_argnames=("state",))


def _teacher_seed_update(graphdef, states, input_ids, attention_mask, token_type_ids, labels,
                         keys, *, optimizer, task, conicity_weight=0.0, tying_weight=0.0,
                         tying_target="embedding_output"):
    """:func:`teacher_update` over a leading seed axis of every argument but the static
    ones: states (S, ...), batches (S, B, ...) and keys (S,)."""
    update = functools.partial(teacher_update, graphdef, optimizer=optimizer, task=task,
                               conicity_weight=conicity_weight, tying_weight=tying_weight,
                               tying_target=tying_target)
    return over_seeds(update)(states, input_ids, attention_mask, token_type_ids, labels, keys)


teacher_seed_step = jax.jit(_teacher_seed_update, static_argnames=_STATIC,
                            donate_argnames=("states",))


def evaluate(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *, task: str,
             references: np.ndarray | None = None, length_multiple: int = 16,
             mesh: jax.sharding.Mesh | None = None) -> dict[str, float]:
    """Task metrics of the model on `data` against its labels (or given `references`);
    batches are cut to a multiple of `length_multiple` columns, so a run that trains on one
    batch shape (``length_multiple=max_len``) also evaluates on one compiled shape."""
    logits = predict_logits(graphdef, params, data, length_multiple=length_multiple, mesh=mesh)
    predictions = predictions_from_logits(logits, task)
    return task_metrics(task, predictions, data.labels if references is None else references)


def _steps_per_epoch(train: Encoded | DataShards, batch_size: int) -> int:
    """Full batches per epoch; ValueError (before any optimizer is built) when there are none."""
    steps = batches_per_epoch(train, batch_size=batch_size)
    if steps == 0:
        raise ValueError(f"the training split has {split_size(train)} examples, fewer than "
                         f"one batch of {batch_size}")
    return steps


def train_teacher(
    models: nnx.Module | Sequence[nnx.Module],
    train: Encoded | DataShards | Sequence[Encoded],
    validation: Encoded | Sequence[Encoded],
    *,
    task: str,
    config: TeacherTrainConfig,
    output_dir: str | Path | Sequence[str | Path],
    seeds: Sequence[int] | None = None,
    progress: bool = True,
    mesh: jax.sharding.Mesh | None = None,
) -> list[TeacherResult]:
    """Fine-tune one teacher per seed on `train`, early-stopping on `validation`; resumable.

    Seed ``seeds[i]`` trains ``models[i]`` with its own batch order (seed, epoch), dropout
    key, evaluations, best parameters and early stopping. With
    ``config.loop.parallel_seeds`` all seeds step together in one program (parameters and
    optimizer states stacked on a leading seed axis; each step's batches cut to the longest
    of the seeds' trimmed lengths, which only adds padding columns); otherwise they train
    one after another. Both give the same results. With a mesh, states are replicated and
    batches sharded on their example axis, so seeds and data parallelism compose.

    Writes (see :func:`smat.training.loop.fit`): ``metrics.jsonl`` per seed and a ``last/``
    checkpoint at every evaluation, from which a killed run resumes bit-identically. One
    seed uses `output_dir` itself; several use ``output_dir/seed{s}``. With
    ``config.training_dynamics``, ``training_dynamics/epoch{e}.npz`` per seed and epoch
    (:mod:`smat.training.dynamics`).

    Args:
      models: one smat ``SequenceClassifier`` per seed (their parameters are the initial
        points), all of one architecture; a single module for a single seed.
      train, validation: tokenized splits with gold labels, shared by every seed, or one per
        seed (e.g. the per-seed masked data of ROAR), all of one size. `train` may be this
        process's :class:`smat.data.DataShards` of the split (shared by every seed): each
        process then holds only its shards' rows, and the processes agree on each batch's
        cut length.
      task: "classification" or "regression".
      config: hyperparameters; ``config.loop.seed`` is the seed when `seeds` is None.
      output_dir: run folder, or one folder per seed.
      seeds: distinct non-negative seeds, one per model (default: ``(config.loop.seed,)``).
      progress: show a tqdm progress bar.
      mesh: data parallelism over the mesh's devices (:mod:`smat.parallel`); None uses the
        ambient mesh, if any.

    Returns:
      One :class:`TeacherResult` per seed, in order.

    Raises:
      ValueError: training dynamics asked for a regression task, an empty validation
        split, a split smaller than one batch, repeated or
        negative seeds, a model or split count that differs from the seed count, per-seed
        splits of different sizes, models of different architectures, or a batch that does
        not divide over the mesh's devices.
      RuntimeError: a non-finite loss (naming the step range).
    """
    if config.training_dynamics and task != "classification":
        raise ValueError(f"training dynamics (gold-class probabilities) need a classification "
                         f"task, got {task!r}")
    if config.training_dynamics and isinstance(train, DataShards):
        raise ValueError("training dynamics record every training row; with --data-shards "
                         "each process holds only its own (use --data-shards 1)")
    models, seeds, groups = seed_groups(models, seeds, default_seed=config.loop.seed,
                                        parallel=config.loop.parallel_seeds)
    trains = _per_seed(train, len(seeds), "train")
    validations = _per_seed(validation, len(seeds), "validation")
    if len(validations[0].labels) == 0:
        raise ValueError("the validation split is empty; early stopping needs examples")
    graphdef = functional.split(models[0])[0]
    if any(functional.split(model)[0] != graphdef for model in models[1:]):
        raise ValueError("the teachers of one run must share one architecture (equal "
                         "graphdefs); build them from the same config")
    steps_per_epoch = _steps_per_epoch(trains[0], config.loop.batch_size)
    optimizer = teacher_optimizer(config, steps_per_epoch * config.loop.max_epochs)
    folders = seed_folders(output_dir, seeds)
    mesh = resolve_mesh(mesh)
    results = []
    for group in groups:
        # Fresh stacked arrays: the step donates its state, the modules keep their own.
        params = stack_seeds([functional.split(models[i])[1] for i in group])
        state = TrainState(jnp.zeros((len(group),), jnp.int32), params,
                           jax.vmap(optimizer.init)(params))
        keys = jnp.stack([jax.random.key(seeds[i]) for i in group])  # (S,)
        if mesh is not None:
            keys = replicate(keys, mesh)

        def step(states, batch, keys=keys):
            return teacher_seed_step(graphdef, states, *batch, keys, optimizer=optimizer,
                                     task=task, conicity_weight=config.conicity_weight,
                                     tying_weight=config.tying_weight,
                                     tying_target=config.tying_target)

        def stack(rows, step):
            batch = _stack_seed_batches(rows, config.loop.length_multiple,
                                        agree=isinstance(trains[0], DataShards))
            return batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.labels

        def evaluate_seed(k, state, group=group):
            return evaluate(graphdef, state.params, validations[group[k]], task=task,
                            length_multiple=config.loop.length_multiple, mesh=mesh)

        def record_dynamics(k, epoch, state, group=group):
            dynamics.record_epoch(graphdef, state.params, trains[group[k]],
                                  folders[group[k]], epoch=epoch, mesh=mesh)

        results += fit(
            state, step, [trains[i] for i in group], stack=stack, evaluate=evaluate_seed,
            metric=primary_metric(task), best_of=lambda state: state.params,
            settings=config.loop, seeds=[seeds[i] for i in group],
            output_dirs=[folders[i] for i in group], progress=progress,
            desc="teacher" if len(seeds) == 1 else "teachers", mesh=mesh,
            on_epoch_end=record_dynamics if config.training_dynamics else None)
    return [TeacherResult(r.best, r.best_scores, r.best_step, r.steps, r.seconds)
            for r in results]


def _stack_seed_batches(batches: Sequence[Encoded], multiple: int, *,
                        agree: bool = False) -> Encoded:
    """One batch per seed -> fields stacked (S, B, ...), cut to the longest trimmed length
    (`agree`: the longest of every process's rows of the global batch)."""
    length = max(trim_to_length(batch, multiple).input_ids.shape[1] for batch in batches)
    if agree:
        length = process_max(length)
    return Encoded(*(np.stack([field[:, :length] if field.ndim == 2 else field
                               for field in fields])
                     for fields in zip(*batches, strict=True)))


def _per_seed(data: Encoded | DataShards | Sequence[Encoded], num_seeds: int,
              name: str) -> list[Encoded | DataShards]:
    """One split per seed: `data` repeated, or checked to be one equal-size split per seed."""
    if isinstance(data, Encoded | DataShards):
        return [data] * num_seeds
    data = list(data)
    if len(data) != num_seeds:
        raise ValueError(f"one {name} split per seed: got {len(data)} for {num_seeds} seeds")
    sizes = {len(d.labels) for d in data}
    if len(sizes) != 1:
        raise ValueError(f"the per-seed {name} splits must have one size, got {sorted(sizes)}")
    return data
