"""The resumable epoch loop shared by teacher and student training.

One loop, whatever the step: batches in an order fixed by (seed, epoch), periodic
validation, early stopping with patience on a metric to maximise, JSON-lines metrics, a
tqdm bar and a ``last/`` checkpoint (full state + best parameters + counters) written at
every evaluation. Rerunning with the same folder resumes from that checkpoint and sees
exactly the batches an uninterrupted run would have seen; a finished run is not redone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from tqdm.auto import tqdm

from smat import checkpoint
from smat.data import iterate_batches, num_batches
from smat.data.batching import num_rows
from smat.parallel import replicate, resolve_mesh, shard_batch
from smat.run_log import MetricsWriter, check_finite, mean_metrics

PyTree = Any


class LoopResult(NamedTuple):
    """Outcome of :func:`fit`."""

    best: PyTree  # what `best_of(state)` returned at the best evaluation
    best_scores: dict[str, float]
    best_step: int
    steps: int  # steps taken in total (over all resumed runs)
    seconds: float  # wall time of this call (0 when a finished run was reloaded)


def fit(
    state: PyTree,
    step: Callable[[PyTree, Any], tuple[PyTree, dict[str, jax.Array]]],
    train: NamedTuple,
    *,
    prepare: Callable[[NamedTuple], Any],
    evaluate: Callable[[PyTree], dict[str, float]],
    metric: str,
    best_of: Callable[[PyTree], PyTree],
    batch_size: int,
    max_epochs: int,
    patience: int,
    evals_per_epoch: int,
    seed: int,
    output_dir: str | Path,
    progress: bool = True,
    desc: str = "train",
    mesh: jax.sharding.Mesh | None = None,
) -> LoopResult:
    """Run `step` over epochs of `train` with early stopping on `evaluate(state)[metric]`.

    Args:
      state: initial training state; a NamedTuple with a scalar ``step`` field. The step
        may donate it: ``fit`` keeps its own copy of the best parameters.
      step: ``(state, batch) -> (state, metrics)``, usually jitted.
      train: training rows (NamedTuple of equally long arrays), batched by
        :func:`smat.data.iterate_batches` with ``drop_last=True`` so shapes stay fixed.
      prepare: turns a batch of rows into what `step` takes (e.g. trims padding).
      evaluate: validation scores of a state (higher `metric` is better).
      metric: the key of `evaluate`'s result that early stopping maximises.
      best_of: what to keep of the best state (e.g. its parameters).
      batch_size, max_epochs, patience, evals_per_epoch, seed: loop settings.
      output_dir: holds ``metrics.jsonl`` and the ``last/`` checkpoint.
      progress: show a tqdm bar.
      desc: the bar's label.
      mesh: data parallelism (:mod:`smat.parallel`): the state is replicated over the
        mesh (also after resuming) and every prepared batch is sharded over its "data" axis
        on the leading (example) axis. None uses JAX's ambient mesh (``jax.set_mesh``) if it
        has a "data" axis, else runs unplaced.

    Returns:
      :class:`LoopResult`.

    Raises:
      ValueError: fewer training rows than one batch, or a batch that does not divide over
        the mesh's devices.
      RuntimeError: a non-finite metric (naming the step range).
    """
    output_dir = Path(output_dir)
    steps_per_epoch = num_batches(num_rows(train), batch_size=batch_size, drop_last=True)
    if steps_per_epoch == 0:
        raise ValueError(f"the training split has {num_rows(train)} examples, fewer than one "
                         f"batch of {batch_size}")
    total_steps = steps_per_epoch * max_epochs
    eval_every = max(steps_per_epoch // evals_per_epoch, 1)

    best, best_scores, best_step, bad_evals = best_of(state), None, 0, 0
    if (output_dir / "last").is_dir():
        restored, meta = checkpoint.restore(output_dir / "last",
                                            target={"state": state, "best": best})
        state, best = restored["state"], restored["best"]
        best_scores, best_step, bad_evals = meta["best"], meta["best_step"], meta["bad_evals"]
        if meta["finished"]:
            return LoopResult(best, best_scores, best_step, int(state.step), 0.0)
    mesh = resolve_mesh(mesh)
    if mesh is not None:
        state = replicate(state, mesh)
    writer = MetricsWriter(output_dir / "metrics.jsonl", resume_step=int(state.step))

    start = int(state.step)
    began = time.perf_counter()
    bar = tqdm(total=total_steps, initial=start, disable=not progress, desc=desc)
    window: list[dict[str, Any]] = []
    stopped = False
    for epoch in range(start // steps_per_epoch, max_epochs):
        batches = iterate_batches(train, batch_size=batch_size, seed=seed, epoch=epoch,
                                  drop_last=True,
                                  start_batch=int(state.step) - epoch * steps_per_epoch)
        for rows in batches:
            batch = prepare(rows)
            if mesh is not None:
                batch = shard_batch(batch, mesh)
            state, step_metrics = step(state, batch)
            window.append(step_metrics)
            bar.update(1)
            current = int(state.step)
            if current % eval_every and current != total_steps:
                continue
            window = jax.device_get(window)
            check_finite(window, first_step=current - len(window) + 1, last_step=current)
            logged, window = mean_metrics(window), []
            scores = evaluate(state)
            bar.set_postfix({metric: f"{scores[metric]:.4f}"})
            if best_scores is None or scores[metric] > best_scores[metric]:
                best = jax.tree.map(jnp.copy, best_of(state))  # survives donation of `state`
                best_scores, best_step, bad_evals = scores, current, 0
            else:
                bad_evals += 1
            writer.write({"step": current, "epoch": epoch, **logged,
                          **{f"validation_{k}": v for k, v in scores.items()}})
            stopped = bad_evals >= patience or current == total_steps
            checkpoint.save(output_dir / "last", {"state": state, "best": best}, overwrite=True,
                            metadata={"best": best_scores, "best_step": best_step,
                                      "bad_evals": bad_evals, "finished": stopped})
            if stopped:
                break
        if stopped:
            break
    bar.close()
    return LoopResult(best, best_scores, best_step, int(state.step), time.perf_counter() - began)


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


def fit_seeds(
    state: PyTree,
    step: Callable[[PyTree, Any], tuple[PyTree, dict[str, jax.Array]]],
    trains: Sequence[NamedTuple],
    *,
    stack: Callable[[list[NamedTuple], int], Any],
    evaluate: Callable[[int, PyTree], dict[str, float]],
    metric: str,
    best_of: Callable[[PyTree], PyTree],
    batch_size: int,
    max_epochs: int,
    patience: int,
    evals_per_epoch: int,
    seeds: Sequence[int],
    output_dir: str | Path | None = None,
    progress: bool = True,
    desc: str = "train",
    mesh: jax.sharding.Mesh | None = None,
) -> list[LoopResult]:
    """:func:`fit` for several seeds at once: one vmapped `step` over a stacked state.

    Seed ``seeds[i]`` sees the batches :func:`fit` would give it (order fixed by its seed
    and the epoch, from ``trains[i]``), is evaluated at the same steps, and keeps its own
    best state and patience; a seed that has stopped keeps its best while the others go
    on. Not resumable: nothing but ``seed{s}/metrics.jsonl`` is written.

    Args:
      state: the stacked training state (a leading seed axis on every leaf).
      step: ``(state, batch) -> (state, metrics)``; every metric has shape ``(S,)``.
      trains: one training split per seed, all of one size.
      stack: ``(rows, step) -> batch``: the seeds' batches of rows (one per seed) at the
        given step (steps taken so far) as `step`'s batch, each leaf with a leading seed axis.
      evaluate: ``(i, state_i) -> scores`` of seed i's slice of the state.
      metric, batch_size, max_epochs, patience, evals_per_epoch: as :func:`fit`.
      best_of: what to keep of one seed's state slice.
      seeds: one seed per split.
      output_dir: if given, ``seed{s}/metrics.jsonl`` per seed.
      progress / desc: the tqdm bar.
      mesh: the stacked state is replicated and each batch sharded on its example axis
        (axis 1 of every leaf); None uses the ambient mesh, if any.

    Returns:
      One :class:`LoopResult` per seed; ``steps`` is the step the seed stopped at and
      ``seconds`` the shared wall time.

    Raises:
      ValueError: fewer rows than one batch; RuntimeError: a non-finite metric.
    """
    steps_per_epoch = num_batches(num_rows(trains[0]), batch_size=batch_size, drop_last=True)
    if steps_per_epoch == 0:
        raise ValueError(f"the training split has {num_rows(trains[0])} examples, fewer than "
                         f"one batch of {batch_size}")
    total_steps = steps_per_epoch * max_epochs
    eval_every = max(steps_per_epoch // evals_per_epoch, 1)
    mesh = resolve_mesh(mesh)
    if mesh is not None:
        state = replicate(state, mesh)
    writers = [None if output_dir is None else
               MetricsWriter(Path(output_dir) / f"seed{seed}" / "metrics.jsonl", resume_step=0)
               for seed in seeds]

    def seed_slice(tree: PyTree, i: int) -> PyTree:
        return jax.tree.map(lambda leaf: leaf[i], tree)  # a copy: survives donation

    best = [best_of(seed_slice(state, i)) for i in range(len(seeds))]
    best_scores: list[dict[str, float] | None] = [None] * len(seeds)
    best_step, bad_evals = [0] * len(seeds), [0] * len(seeds)
    stopped_at: list[int | None] = [None] * len(seeds)
    began, current, window = time.perf_counter(), 0, []
    bar = tqdm(total=total_steps, disable=not progress, desc=f"{desc} x{len(seeds)}")
    for epoch in range(max_epochs):
        orders = [iterate_batches(data, batch_size=batch_size, seed=seed, epoch=epoch,
                                  drop_last=True) for data, seed in zip(trains, seeds, strict=True)]
        for rows in zip(*orders, strict=True):
            batch = stack(list(rows), current)
            if mesh is not None:
                batch = shard_batch(batch, mesh, axis=1)
            state, step_metrics = step(state, batch)
            window.append(step_metrics)
            current += 1
            bar.update(1)
            if current % eval_every and current != total_steps:
                continue
            window = jax.device_get(window)  # each metric (S,)
            check_finite(window, first_step=current - len(window) + 1, last_step=current)
            for i in (i for i, stop in enumerate(stopped_at) if stop is None):
                candidate = seed_slice(state, i)
                scores = evaluate(i, candidate)
                if best_scores[i] is None or scores[metric] > best_scores[i][metric]:
                    best[i], best_scores[i], best_step[i], bad_evals[i] = (
                        best_of(candidate), scores, current, 0)
                else:
                    bad_evals[i] += 1
                if writers[i] is not None:
                    logged = mean_metrics([{k: v[i] for k, v in r.items()} for r in window])
                    writers[i].write({"step": current, "epoch": epoch, **logged,
                                      **{f"validation_{k}": v for k, v in scores.items()}})
                if bad_evals[i] >= patience or current == total_steps:
                    stopped_at[i] = current
            window = []
            if all(stop is not None for stop in stopped_at):
                break
        if all(stop is not None for stop in stopped_at):
            break
    bar.close()
    seconds = time.perf_counter() - began
    return [LoopResult(best[i], best_scores[i], best_step[i], stopped_at[i], seconds)
            for i in range(len(seeds))]
