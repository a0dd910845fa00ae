"""Tests for smat.training.loop's seed helpers (the loop itself is exercised, killed and
resumed through teacher and student training in test_training_teacher / _student)."""

import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat.training.loop import (
    STOP,
    LoopConfig,
    check_seeds,
    checkpoint_dir,
    fit,
    over_seeds,
    seed_folders,
    seed_groups,
    seed_slice,
    stack_seeds,
    stop_on_interrupt,
)


def test_stop_on_interrupt_raises_marks_the_loops_and_restores_the_handler():
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), stop_on_interrupt():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises before this ends
        pytest.fail("SIGINT did not interrupt")
    assert not STOP.is_set()  # cleared on exit: the next job starts unmarked
    assert signal.getsignal(signal.SIGINT) is before
    with stop_on_interrupt():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        assert STOP.is_set()  # a loop raises it again at its next step if Python dropped it


def test_seed_folders_and_checkpoint_dirs(tmp_path):
    assert seed_folders(tmp_path, [3]) == [tmp_path]
    assert seed_folders(tmp_path, [0, 1]) == [tmp_path / "seed0", tmp_path / "seed1"]
    given = [tmp_path / "a", tmp_path / "b"]
    assert seed_folders(given, [0, 1]) == given
    with pytest.raises(ValueError, match="one output folder per seed: got 1 for seeds"):
        seed_folders(given[:1], [0, 1])
    assert checkpoint_dir([tmp_path], [0]) == tmp_path
    # Two groups of seeds under one parent (e.g. two ROAR cells) never share a checkpoint.
    cell_a = [tmp_path / "seed0" / "r20", tmp_path / "seed1" / "r20"]
    cell_b = [tmp_path / "seed0" / "r40", tmp_path / "seed1" / "r40"]
    assert checkpoint_dir(cell_a, [0, 1]) != checkpoint_dir(cell_b, [0, 1])
    assert checkpoint_dir(cell_a, [0, 1]) != checkpoint_dir(cell_a[:1] + [Path("x")], [0, 2])


def test_seed_groups_and_checks():
    assert seed_groups("model", None, default_seed=4, parallel=False) == (["model"], (4,), [[0]])
    assert seed_groups(["a", "b"], [0, 5], default_seed=4, parallel=True) == (
        ["a", "b"], (0, 5), [[0, 1]])
    assert seed_groups(("a", "b"), [0, 5], default_seed=4, parallel=False)[2] == [[0], [1]]
    for seeds, models, message in (((1, 1), 2, "distinct"), ((-1,), 1, "distinct"),
                                   ((), 0, "at least one"), ((0, 1), 1, "one model per seed")):
        with pytest.raises(ValueError, match=message):
            check_seeds(seeds, models)


def test_over_seeds_equals_the_plain_update_and_vmap():
    def update(state, x):
        # A branch that vmap turns into a select: with one seed it must stay a cond.
        return jax.lax.cond(x.sum() > 0, lambda s: s * 2.0 + x, lambda s: s - x, state), x.sum()

    xs = jnp.asarray([[1.0, 2.0], [-3.0, 0.5]])
    states = jnp.asarray([[0.5, 1.0], [2.0, -1.0]])
    lifted = over_seeds(update)
    one_state, one_metric = lifted(states[:1], xs[:1])
    plain_state, plain_metric = update(states[0], xs[0])
    np.testing.assert_array_equal(one_state, plain_state[None])
    assert one_metric.shape == (1,) and float(one_metric[0]) == float(plain_metric)
    two = lifted(states, xs)
    np.testing.assert_array_equal(two[0], jax.vmap(update)(states, xs)[0])
    text = jax.jit(lifted).lower(states[:1], xs[:1]).as_text()
    assert "stablehlo.case" in text  # one seed keeps the branch (vmap would make a select)
    assert "stablehlo.case" not in jax.jit(lifted).lower(states, xs).as_text()


def test_stack_and_slice_round_trip():
    trees = [{"w": jnp.full((2,), float(i)), "b": jnp.asarray(i)} for i in range(3)]
    stacked = stack_seeds(trees)
    assert stacked["w"].shape == (3, 2) and stacked["b"].shape == (3,)
    for i, tree in enumerate(trees):
        np.testing.assert_array_equal(seed_slice(stacked, i)["w"], tree["w"])


class _Rows(NamedTuple):
    x: np.ndarray


class _State(NamedTuple):
    w: jax.Array
    step: jax.Array


def test_fit_compiles_its_step_once_when_the_state_starts_uncommitted(tmp_path):
    """jit keys its programs on whether each argument is committed to a device; a step's
    outputs are, a fresh state often only in part (here the parameters, as after loading,
    not the counter): without fit committing it, step 2 compiled again."""
    state = _State(jax.device_put(jnp.zeros((1, 3)), jax.devices()[0]),
                   jnp.zeros((1,), jnp.int32))
    assert state.w.committed and not state.step.committed

    @jax.jit
    def step(state, batch):
        w = state.w + 0.1 * batch.mean(axis=1)
        return _State(w, state.step + 1), {"loss": jnp.sum(w ** 2, axis=1)}

    rows = _Rows(np.arange(12, dtype=np.float32).reshape(4, 3))
    results = fit(state, step, [rows], stack=lambda batches, _: np.stack([b.x for b in batches]),
                  evaluate=lambda i, s: {"score": float(s.w.sum())}, metric="score",
                  best_of=lambda s: s.w, settings=LoopConfig(batch_size=1, max_epochs=1),
                  seeds=[0], output_dirs=[tmp_path], progress=False)
    assert results[0].steps == 4
    assert step._cache_size() == 1


def test_a_resumed_fit_reports_the_training_time_of_every_call(tmp_path):
    """The seconds a run reports include what the interrupted call spent up to its last
    checkpoint, not only the call that finished it."""

    @jax.jit
    def step(state, batch):
        w = state.w + 0.1 * batch.mean(axis=1)
        return _State(w, state.step + 1), {"loss": jnp.sum(w ** 2, axis=1)}

    def slow_then_interrupted(state, batch):
        if int(state.step[0]) == 2:  # after two steps, each followed by a checkpoint
            raise KeyboardInterrupt
        time.sleep(1.0)
        return step(state, batch)

    def run(step):
        state = _State(jnp.zeros((1, 3)), jnp.zeros((1,), jnp.int32))
        return fit(state, step, [_Rows(np.ones((4, 3), np.float32))],
                   stack=lambda batches, _: np.stack([b.x for b in batches]),
                   evaluate=lambda i, s: {"score": float(s.w.sum())}, metric="score",
                   best_of=lambda s: s.w,
                   settings=LoopConfig(batch_size=1, max_epochs=1, evals_per_epoch=4),
                   seeds=[0], output_dirs=[tmp_path], progress=False)

    with pytest.raises(KeyboardInterrupt):
        run(slow_then_interrupted)
    (result,) = run(step)
    assert result.steps == 4
    assert result.seconds >= 2.0  # the interrupted call's two one-second steps


def test_fit_keeps_at_most_one_step_queued_behind_the_running_one(tmp_path):
    """Without waiting, asynchronous dispatch let the loop queue every step up to the next
    evaluation (15 steps of 34 s on SST-2), which an interrupted run then computed before
    it could exit. A slow step makes the queue visible: when step k is dispatched, step k-2
    must have finished."""

    @jax.jit
    def step(state, batch):
        w = jax.lax.fori_loop(0, 20, lambda _, w: jnp.tanh(w @ w.mT @ w), state.w)
        return _State(w, state.step + 1), {"loss": jnp.sum(w, axis=(1, 2)) + batch.sum()}

    outputs, finished_two_back = [], []

    def watched(state, batch):
        if len(outputs) >= 2:
            finished_two_back.append(outputs[-2]["loss"].is_ready())
        state, metrics = step(state, batch)
        outputs.append(metrics)
        return state, metrics

    state = _State(jnp.full((1, 400, 400), 0.01), jnp.zeros((1,), jnp.int32))
    step(state, np.zeros((1, 1, 3), np.float32))[0].w.block_until_ready()  # compiled
    fit(state, watched, [_Rows(np.ones((8, 3), np.float32))],
        stack=lambda batches, _: np.stack([b.x for b in batches]),
        evaluate=lambda i, s: {"score": 0.0}, metric="score", best_of=lambda s: s.step,
        settings=LoopConfig(batch_size=1, max_epochs=1), seeds=[0], output_dirs=[tmp_path],
        progress=False)
    assert len(finished_two_back) == 6 and all(finished_two_back)


def _fit_with_signals(tmp_path, *, sigint_at=(), on_step=None):
    """A 12-step run (evaluations every 4 steps) that sends itself SIGINT when about to take
    each step in `sigint_at` (steps taken so far), inside stop_on_interrupt as a command."""

    @jax.jit
    def step(state, batch):
        w = jnp.tanh(state.w + 0.1 * batch.mean(axis=1))
        return _State(w, state.step + 1), {"loss": jnp.sum(w ** 2, axis=1),
                                           "count": state.step + 1}

    def signalled(state, batch):
        taken = int(state.step[0])
        if on_step is not None:
            on_step(taken)
        for _ in range(sum(taken == k for k in sigint_at)):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here
        return step(state, batch)

    state = _State(jnp.zeros((1, 3)), jnp.zeros((1,), jnp.int32))
    rows = _Rows(np.arange(36, dtype=np.float32).reshape(12, 3) / 36)
    with stop_on_interrupt():
        return fit(state, signalled, [rows],
                   stack=lambda batches, _: np.stack([b.x for b in batches]),
                   evaluate=lambda i, s: {"score": float(s.w.sum())}, metric="score",
                   best_of=lambda s: s.w,
                   settings=LoopConfig(batch_size=1, max_epochs=1, evals_per_epoch=3,
                                       patience=10),
                   seeds=[0], output_dirs=[tmp_path], progress=False)


def test_ctrl_c_mid_run_checkpoints_the_running_step_and_resumes_bit_identically(
        tmp_path, capfd):
    """The first Ctrl-C lets the running step finish and checkpoints it (with the training
    metrics since the last evaluation), so the rerun takes only the steps left and writes
    the same metrics and parameters as an uninterrupted run."""
    (reference,) = _fit_with_signals(tmp_path / "reference")
    taken = []
    with pytest.raises(KeyboardInterrupt):
        _fit_with_signals(tmp_path / "run", sigint_at=[6], on_step=taken.append)
    assert taken == list(range(7))  # the step under way at Ctrl-C ran; no step after it
    assert "checkpointing after the running step" in capfd.readouterr().err
    assert not STOP.is_set()
    taken.clear()
    (resumed,) = _fit_with_signals(tmp_path / "run", on_step=taken.append)
    assert taken == list(range(7, 12))  # not from the evaluation at step 4
    np.testing.assert_array_equal(resumed.best, reference.best)
    assert (resumed.best_step, resumed.steps, resumed.best_scores) == (
        reference.best_step, reference.steps, reference.best_scores)
    assert ((tmp_path / "run" / "metrics.jsonl").read_text()
            == (tmp_path / "reference" / "metrics.jsonl").read_text())


def test_a_second_ctrl_c_stops_at_once_from_the_last_evaluation(tmp_path):
    taken = []
    with pytest.raises(KeyboardInterrupt):
        _fit_with_signals(tmp_path, sigint_at=[6, 6], on_step=taken.append)
    assert taken == list(range(7))
    taken.clear()
    _fit_with_signals(tmp_path, on_step=taken.append)
    assert taken == list(range(4, 12))  # the step under way was not checkpointed
