"""The one resumable training loop, for any number of seeds, shared by teachers and students.

The training state always carries a leading seed axis (S = 1 for a single run): one step
updates every seed at once (:func:`over_seeds` lifts a single-seed update). Each seed sees
the batches of its own order, fixed by (seed, epoch), is evaluated at the same steps, and
keeps its own best parameters and patience; a seed that has stopped keeps its best while
the others go on. Metrics go to one JSON-lines file per seed, progress to a tqdm bar, and
at every evaluation one checkpoint of the whole stacked state (best parameters and
counters included) replaces the last. Ctrl-C inside :func:`stop_on_interrupt` lets the
running step finish and checkpoints it too, so an interrupted run loses no finished step (a
second Ctrl-C stops at once, keeping the last evaluation's checkpoint). Rerunning with the
same folders resumes from that checkpoint, for any S, and ends bit-identical to an
uninterrupted run; a finished run is not redone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from smat.data import DataShards, batches_per_epoch, epoch_batches, split_size
from smat.parallel import commit, replicate, resolve_mesh, shard_batch
from smat.store import checkpoint
from smat.store.run_log import MetricsWriter, check_finite, mean_metrics

PyTree = Any


class LoopResult(NamedTuple):
    """Outcome of :func:`fit` for one seed."""

    best: PyTree  # what `best_of(state)` returned at the seed's best evaluation
    best_scores: dict[str, float]
    best_step: int
    steps: int  # the step the seed stopped at
    # training wall time shared by the seeds: this call's, plus what the calls it resumed
    # spent up to their last checkpoint (a killed call's work after it is redone, not counted)
    seconds: float


STOP = threading.Event()
"""Set by the Ctrl-C handler of :func:`stop_on_interrupt`: a training loop checkpoints its
last step and raises KeyboardInterrupt before its next one. Outside a loop's steps the
handler also raises KeyboardInterrupt at once; Python drops an exception raised while it
runs a finalizer or a callback ("Exception ignored in ..."), so an interrupt can be lost,
and the loop then raises it too."""

_STEPPING = threading.Event()
"""Set while :func:`fit` runs its steps in the main thread of a single process: there the
first Ctrl-C only sets :data:`STOP`, so the step under way finishes and is checkpointed."""


def _interrupt(signum, frame) -> None:
    if _STEPPING.is_set() and not STOP.is_set():
        STOP.set()
        # os.write, not print: a handler that prints while the interrupted code is writing
        # to stderr (a progress bar) would make Python's buffered writer raise
        os.write(2, b"\ninterrupted: checkpointing after the running step (Ctrl-C again "
                    b"stops at once, from the last evaluation's checkpoint)\n")
        return
    STOP.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[None]:
    """Inside, Ctrl-C (SIGINT) stops a job with its work kept: a training loop finishes
    its running step, checkpoints it and raises KeyboardInterrupt (:data:`STOP`);
    elsewhere, or at a second Ctrl-C, KeyboardInterrupt is raised at once. On exit the
    previous handler is back and STOP is cleared. Outside the main thread (where no handler
    can be set) it does nothing."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _interrupt) if in_main_thread else None
    try:
        yield
    finally:
        STOP.clear()
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoopConfig:
    """How the loop walks the data, evaluates, stops and runs its seeds; embedded as the
    ``loop`` field of the teacher and student configs.

    Attributes:
      batch_size: examples per step.
      max_epochs: upper bound on passes over the training split.
      patience: stop once more than this many evaluations in a row brought no better
        validation metric (the SMaT authors' rule).
      evals_per_epoch: validation evaluations per epoch (>= 1).
      seed: data order, dropout and validation-draw seed (the first of --seeds); a
        teacher's head is initialised from it too (a student's from its ``init_seed``).
      length_multiple: batches are cut to their longest sequence rounded up to this
        multiple (at most max_len / length_multiple compiled shapes; results are unchanged
        because the cut columns are padding).
      parallel_seeds: train several seeds in one vmapped program instead of one after
        another (same results; faster on accelerators).
    """

    batch_size: int = 32
    max_epochs: int = 3
    patience: int = 5
    evals_per_epoch: int = 1
    seed: int = 0
    length_multiple: int = 16
    parallel_seeds: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_epochs", "patience", "evals_per_epoch",
                     "length_multiple"):
            if not getattr(self, name) >= 1:
                raise ValueError(f"LoopConfig.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.seed < 0:
            raise ValueError(f"LoopConfig.seed must be >= 0, got {self.seed!r}")


def with_loop(config: Any, **changes: Any) -> Any:
    """`config` (a dataclass with a ``loop`` field) with some of its loop settings changed,
    e.g. ``with_loop(config, seed=3)``."""
    return dataclasses.replace(config, loop=dataclasses.replace(config.loop, **changes))


def check_seeds(seeds: Sequence[int], num_models: int) -> tuple[int, ...]:
    """The seeds as ints, checked: distinct, >= 0, at least one, one per model.

    Raises:
      ValueError: naming the seeds (and the model count when it differs).
    """
    seeds = tuple(int(seed) for seed in seeds)
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"seeds must be distinct ints >= 0 (at least one); got {seeds}")
    if num_models != len(seeds):
        raise ValueError(f"one model per seed: got {num_models} models for seeds {seeds}")
    return seeds


def seed_groups(models: Any, seeds: Sequence[int] | None, *, default_seed: int,
                parallel: bool) -> tuple[list[Any], tuple[int, ...], list[list[int]]]:
    """The models and checked seeds of a run, and the groups of seed indices trained in one
    program each: all seeds together when `parallel`, else one group per seed.

    Args:
      models: one model per seed, or a single model (not a list or tuple) for one seed.
      seeds: the seeds, or None for ``(default_seed,)``.
      default_seed: the config's seed.
      parallel: vmapped seeds (the config's ``parallel_seeds``).

    Raises:
      ValueError: from :func:`check_seeds`.
    """
    models = list(models) if isinstance(models, list | tuple) else [models]
    seeds = check_seeds((default_seed,) if seeds is None else seeds, len(models))
    indices = list(range(len(seeds)))
    return models, seeds, [indices] if parallel else [[i] for i in indices]


# Both are jitted: one program per pytree structure instead of one eager operation per leaf
# shape (a model's training state has hundreds of leaves).
@jax.jit
def stack_seeds(trees: Sequence[PyTree]) -> PyTree:
    """One pytree per seed -> one pytree with a leading seed axis (fresh arrays)."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


@jax.jit
def seed_slice(tree: PyTree, i: int | jax.Array) -> PyTree:
    """Seed i's slice of a stacked pytree (a copy: it survives donation of `tree`)."""
    return jax.tree.map(lambda leaf: leaf[i], tree)


def over_seeds(update: Callable[..., Any]) -> Callable[..., Any]:
    """`update` lifted to arguments that all carry a leading seed axis.

    Several seeds run under ``jax.vmap``; one seed runs the plain update on the squeezed
    arguments, so a single run compiles exactly the single-seed program (a ``lax.cond``
    stays a branch instead of becoming a select under ``vmap``).
    """

    @functools.wraps(update)
    def lifted(*args):
        num_seeds = jax.tree.leaves(args)[0].shape[0]
        if num_seeds == 1:
            out = update(*jax.tree.map(lambda leaf: leaf[0], args))
            return jax.tree.map(lambda leaf: leaf[None], out)
        return jax.vmap(update)(*args)

    return lifted


def seed_folders(output_dir: str | Path | Sequence[str | Path],
                 seeds: Sequence[int]) -> list[Path]:
    """The run folder of each seed: one folder per seed as given, or for a single folder:
    the folder itself for one seed, else ``output_dir/seed{s}``.

    Raises:
      ValueError: a list of folders whose length differs from the number of seeds.
    """
    if not isinstance(output_dir, str | Path):
        folders = [Path(folder) for folder in output_dir]
        if len(folders) != len(seeds):
            raise ValueError(f"one output folder per seed: got {len(folders)} for seeds "
                             f"{list(seeds)}")
        return folders
    if len(seeds) == 1:
        return [Path(output_dir)]
    return [Path(output_dir) / f"seed{seed}" for seed in seeds]


def checkpoint_dir(output_dirs: Sequence[Path], seeds: Sequence[int]) -> Path:
    """Where a group of seeds keeps its ``last`` checkpoint: the run folder of a single seed,
    else ``seeds-{s0}-{s1}...`` inside the first seed's folder (so two groups never share
    one, and a rerun with other seeds starts afresh)."""
    if len(output_dirs) == 1:
        return Path(output_dirs[0])
    return Path(output_dirs[0]) / ("seeds-" + "-".join(str(s) for s in seeds))


def fit(
    state: PyTree,
    step: Callable[[PyTree, Any], tuple[PyTree, dict[str, jax.Array]]],
    trains: Sequence[NamedTuple],
    *,
    stack: Callable[[list[NamedTuple], int], Any],
    evaluate: Callable[[int, PyTree], dict[str, float]],
    metric: str,
    best_of: Callable[[PyTree], PyTree],
    settings: LoopConfig,
    seeds: Sequence[int],
    output_dirs: Sequence[str | Path],
    progress: bool = True,
    desc: str = "train",
    mesh: jax.sharding.Mesh | None = None,
    on_epoch_end: Callable[[int, int, PyTree], None] | None = None,
) -> list[LoopResult]:
    """Run `step` over epochs of every seed's split, early-stopping each seed on its metric.

    Args:
      state: the stacked training state: a leading seed axis on every leaf (S = 1 for one
        run) and a ``step`` field of shape (S,). The step may donate it: ``fit`` keeps its
        own copies of the best parameters.
      step: ``(state, batch) -> (state, metrics)``, usually jitted; every metric has shape
        (S,).
      trains: one training split per seed (NamedTuples of equally long arrays, or this
        process's :class:`smat.data.DataShards` of it), all of one size, in the full
        batches of :func:`smat.data.epoch_batches`.
      stack: ``(rows, step) -> batch``: the seeds' batches of rows (one per seed) at the
        given step (steps taken so far) as `step`'s batch, each leaf with a leading seed
        axis (e.g. trimmed to one length and stacked).
      evaluate: ``(i, state_i) -> scores`` of seed i's slice of the state (higher `metric`
        is better).
      metric: the key of `evaluate`'s result that early stopping maximises.
      best_of: what to keep of one seed's state slice (e.g. its parameters).
      settings: batch size, epochs, patience and evaluations per epoch (its seed and
        parallel switch are the caller's: see `seeds`).
      seeds: one seed per split; seed i's batch order is a function of (seeds[i], epoch).
      output_dirs: one folder per seed for ``metrics.jsonl``; the checkpoint goes to
        :func:`checkpoint_dir` ``/ last``.
      progress / desc: the tqdm bar.
      mesh: data parallelism (:mod:`smat.parallel`): the state is replicated over the mesh
        (also after resuming) and every batch sharded over its "data" axis on the example
        axis (axis 1 of every leaf). None uses JAX's ambient mesh (``jax.set_mesh``) if it
        has a "data" axis, else runs unplaced.
      on_epoch_end: ``(i, epoch, state_i)``, called after the last step of every epoch for
        each seed still running, before that step's checkpoint (e.g. to record training
        dynamics). A resumed run calls it again for an epoch whose end it replays, so it
        should overwrite what it writes.

    Returns:
      One :class:`LoopResult` per seed, in order.

    Raises:
      ValueError: fewer training rows than one batch, or a batch that does not divide over
        the mesh's devices.
      RuntimeError: a non-finite metric (naming the step range).
    """
    seeds, output_dirs = list(seeds), [Path(d) for d in output_dirs]
    steps_per_epoch = batches_per_epoch(trains[0], batch_size=settings.batch_size)
    if steps_per_epoch == 0:
        raise ValueError(f"the training split has {split_size(trains[0])} examples, fewer "
                         f"than one batch of {settings.batch_size}")
    process_local = isinstance(trains[0], DataShards)
    total_steps = steps_per_epoch * settings.max_epochs
    eval_every = max(steps_per_epoch // settings.evals_per_epoch, 1)
    last = checkpoint_dir(output_dirs, seeds) / "last"

    best = stack_seeds([best_of(seed_slice(state, i)) for i in range(len(seeds))])
    counters = {"best": [None] * len(seeds), "best_step": [0] * len(seeds),
                "bad_evals": [0] * len(seeds), "stopped_at": [None] * len(seeds)}
    earlier = 0.0  # seconds the resumed calls spent up to the last checkpoint
    window = []  # each step's metrics since the last evaluation
    if last.is_dir():
        restored, meta = checkpoint.restore(last, target={"state": state, "best": best})
        state, best = restored["state"], restored["best"]
        counters = {key: meta[key] for key in counters}
        earlier = meta.get("seconds", 0.0)  # absent from checkpoints written before it
        window = _window_from_json(meta.get("window", []))  # saved by an interrupted call
        if all(stop is not None for stop in counters["stopped_at"]):
            return _results(best, counters, earlier)
        tqdm.write(f"{desc}: resuming from {last} at step {int(state.step[0])} of "
                   f"{total_steps} (best so far at steps {counters['best_step']})",
                   file=sys.stderr)
    mesh = resolve_mesh(mesh)
    state = commit(state) if mesh is None else replicate(state, mesh)  # one compile of `step`
    current = saved = int(state.step[0])  # saved: the step of the checkpoint on disk
    writers = [MetricsWriter(d / "metrics.jsonl", resume_step=current) for d in output_dirs]

    began = time.perf_counter()

    def save_checkpoint(window_left: list) -> None:
        checkpoint.save(last, {"state": state, "best": best}, overwrite=True,
                        metadata={**counters, "window": _window_to_json(window_left),
                                  "seconds": earlier + time.perf_counter() - began})

    bar = tqdm(total=total_steps, initial=current, disable=not progress,
               desc=desc if len(seeds) == 1 else f"{desc} x{len(seeds)}")
    # A Ctrl-C between steps is taken at the next one (STOP); multi-host processes must save
    # together, so there it raises at once, as elsewhere.
    stepping = (threading.current_thread() is threading.main_thread()
                and jax.process_count() == 1)
    try:
        if stepping:
            _STEPPING.set()
        for epoch in range(current // steps_per_epoch, settings.max_epochs):
            skip = current - epoch * steps_per_epoch
            orders = [epoch_batches(data, batch_size=settings.batch_size, seed=seed,
                                    epoch=epoch, start_batch=skip)
                      for data, seed in zip(trains, seeds, strict=True)]
            for rows in zip(*orders, strict=True):
                if STOP.is_set():
                    if current != saved:
                        window = jax.device_get(window)
                        save_checkpoint(window)
                    raise KeyboardInterrupt
                batch = stack(list(rows), current)
                if mesh is not None:
                    batch = shard_batch(batch, mesh, axis=1, process_local=process_local)
                state, step_metrics = step(state, batch)
                # JAX dispatches asynchronously: unchecked, the loop would queue every step up
                # to the next evaluation, and Ctrl-C (and the progress bar) would wait them all
                # out. Waiting for the previous step keeps one step queued behind the running
                # one.
                if window:
                    jax.block_until_ready(window[-1])
                window.append(step_metrics)
                current += 1
                bar.update(1)
                if on_epoch_end is not None and current % steps_per_epoch == 0:
                    for i in (i for i, stop in enumerate(counters["stopped_at"]) if stop is None):
                        on_epoch_end(i, epoch, seed_slice(state, i))
                if current % eval_every and current != total_steps:
                    continue
                window = jax.device_get(window)  # each metric (S,)
                check_finite(window, first_step=current - len(window) + 1, last_step=current)
                best = _evaluate_seeds(state, best, counters, window, evaluate=evaluate,
                                       metric=metric, best_of=best_of, writers=writers,
                                       step=current, epoch=epoch, patience=settings.patience,
                                       final=current == total_steps)
                window = []
                if len(seeds) == 1:
                    bar.set_postfix({metric: f"{counters['best'][0][metric]:.4f}"})
                save_checkpoint(window)
                saved = current
                if all(stop is not None for stop in counters["stopped_at"]):
                    break
            if all(stop is not None for stop in counters["stopped_at"]):
                break
    finally:
        _STEPPING.clear()
    bar.close()
    if STOP.is_set():  # Ctrl-C during the run's last step: it is checkpointed, now stop
        raise KeyboardInterrupt
    return _results(best, counters, earlier + time.perf_counter() - began)


def _evaluate_seeds(state, best, counters, window, *, evaluate, metric, best_of, writers,
                    step, epoch, patience, final) -> PyTree:
    """One evaluation of every seed still running: best state, patience and a metrics line."""
    best = [seed_slice(best, i) for i in range(len(writers))]
    for i in (i for i, stop in enumerate(counters["stopped_at"]) if stop is None):
        candidate = seed_slice(state, i)
        scores = evaluate(i, candidate)
        if counters["best"][i] is None or scores[metric] > counters["best"][i][metric]:
            best[i] = best_of(candidate)
            counters["best"][i], counters["best_step"][i], counters["bad_evals"][i] = (
                scores, step, 0)
        else:
            counters["bad_evals"][i] += 1
        logged = mean_metrics([{k: v[i] for k, v in record.items()} for record in window])
        writers[i].write({"step": step, "epoch": epoch, **logged,
                          **{f"validation_{k}": v for k, v in scores.items()}})
        if counters["bad_evals"][i] > patience or final:
            counters["stopped_at"][i] = step
    return stack_seeds(best)


def _window_to_json(window: Sequence[dict[str, Any]]) -> list[dict[str, list]]:
    """Steps' metrics (host arrays) as JSON: per metric its dtype and values."""
    return [{name: [str(value.dtype), value.tolist()] for name, value in record.items()}
            for record in window]


def _window_from_json(records: Sequence[dict[str, list]]) -> list[dict[str, np.ndarray]]:
    """The inverse of :func:`_window_to_json`, in the same dtypes (so the logged means are
    bit-identical to an uninterrupted run's)."""
    return [{name: np.asarray(values, dtype=dtype) for name, (dtype, values) in record.items()}
            for record in records]


def _results(best: PyTree, counters: dict[str, list], seconds: float) -> list[LoopResult]:
    return [LoopResult(seed_slice(best, i), counters["best"][i], counters["best_step"][i],
                       counters["stopped_at"][i], seconds)
            for i in range(len(counters["best"]))]
