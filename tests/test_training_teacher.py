import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import smat.training.teacher as train_module
from smat.models import functional
from smat.training.loop import LoopConfig, with_loop
from smat.training.teacher import (
    TeacherTrainConfig,
    evaluate,
    train_teacher,
)
from tests.helpers import interrupted_then_resumed, synthetic_encoded, tiny_classifier

FAST = TeacherTrainConfig(learning_rate=3e-3, warmup_steps=5, loop=LoopConfig(
    batch_size=16, max_epochs=6, patience=10, evals_per_epoch=2, length_multiple=16))


def _leaves_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b),
                                                    strict=True))


def test_teacher_learns_synthetic_task(tmp_path):
    train, valid = synthetic_encoded(256, seed=0), synthetic_encoded(64, seed=1)
    model = tiny_classifier()
    (result,) = train_teacher(model, train, valid, task="classification",
                           config=FAST, output_dir=tmp_path,
                           progress=False)
    graphdef = functional.split(model)[0]
    assert result.best_validation["accuracy"] >= 0.9
    assert evaluate(graphdef, result.params, valid, task="classification") == pytest.approx(
        result.best_validation)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert {"loss", "grad_norm", "validation_accuracy"} <= set(rows[0])


@pytest.mark.parametrize("seeds,parallel", [((0,), False), ((0, 3), True), ((0, 3), False)])
def test_resume_after_interruption_gives_identical_params(seeds, parallel, tmp_path,
                                                          monkeypatch):
    """Killed after a checkpoint, rerun: the same parameters, steps and metrics lines as an
    uninterrupted run, for one seed and for two (vmapped or one after another)."""
    train, valid = synthetic_encoded(96, seed=0), synthetic_encoded(32, seed=1)
    config = with_loop(FAST, max_epochs=2, parallel_seeds=parallel)

    def run(folder):
        return train_teacher([tiny_classifier(seed=s) for s in seeds], train, valid,
                             task="classification", config=config, seeds=seeds,
                             output_dir=folder, progress=False)

    reference = run(tmp_path / "a")
    # killed mid-epoch 2 (of the first seed), after the step-6 checkpoint
    resumed = interrupted_then_resumed(monkeypatch, train_module, "teacher_seed_step",
                                       on_call=7, run=lambda: run(tmp_path / "b"))
    for got, want in zip(resumed, reference, strict=True):
        assert got.steps == want.steps == 12 and got.best_step == want.best_step
        assert got.best_validation == want.best_validation
        assert _leaves_equal(got.params, want.params)
    for folder in ([""] if len(seeds) == 1 else [f"seed{s}" for s in seeds]):
        lines = (tmp_path / "b" / folder / "metrics.jsonl").read_text().splitlines()
        reference_lines = (tmp_path / "a" / folder / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(x)["step"] for x in lines] == [3, 6, 9, 12]
        strip = [{k: v for k, v in json.loads(x).items()} for x in lines]
        assert strip == [json.loads(x) for x in reference_lines]


def test_early_stopping_and_finished_run_is_not_retrained(tmp_path):
    train, valid = synthetic_encoded(64, seed=0), synthetic_encoded(32, seed=1)
    config = dataclasses.replace(with_loop(FAST, patience=1, max_epochs=50),
                                 learning_rate=1e-12)
    (first,) = train_teacher(tiny_classifier(), train, valid, task="classification",
                             config=config, output_dir=tmp_path, progress=False)
    # Evaluations every 2 steps; those at steps 4 and 6 do not improve: 2 > patience.
    assert first.steps == 6 and first.best_step == 2
    (again,) = train_teacher(tiny_classifier(), train, valid, task="classification",
                             config=config, output_dir=tmp_path, progress=False)
    assert again.steps == first.steps and again.best_step == first.best_step


@pytest.mark.parametrize("schedule", ["constant", "linear_decay"])
def test_learning_rate_after_warmup(schedule):
    """With zero gradients AdamW moves a parameter by -lr_t * weight_decay * p: read lr_t."""
    config = dataclasses.replace(FAST, learning_rate=1.0, warmup_steps=2, weight_decay=0.5,
                                 schedule=schedule)
    optimizer = train_module.teacher_optimizer(config, total_steps=6)
    params = {"w": jnp.ones(())}
    state, rates = optimizer.init(params), []
    for _ in range(6):
        updates, state = optimizer.update({"w": jnp.zeros(())}, state, params)
        rates.append(round(-float(updates["w"]) / 0.5, 6))
    expected = ([0.0, 0.5, 1.0, 1.0, 1.0, 1.0] if schedule == "constant"
                else [0.0, 0.5, 1.0, 0.75, 0.5, 0.25])
    assert rates == expected
    # one optimizer object per distinct program: the step compiles once for runs of other
    # lengths when their rate does not depend on the length
    longer = train_module.teacher_optimizer(config, total_steps=60)
    assert (longer is optimizer) == (schedule == "constant")


def test_regression_teacher_runs(tmp_path):
    train = synthetic_encoded(64, seed=0)
    train = train._replace(labels=train.labels.astype(np.float32))
    (result,) = train_teacher(tiny_classifier(task="regression"), train, train,
                              task="regression",
                              config=with_loop(FAST, max_epochs=2),
                              output_dir=tmp_path, progress=False)
    assert set(result.best_validation) == {"pearson", "rmse"}


def test_config_and_split_errors(tmp_path):
    with pytest.raises(ValueError, match="LoopConfig.batch_size must be >= 1, got 0"):
        LoopConfig(batch_size=0)
    with pytest.raises(ValueError, match="learning_rate must be > 0, got 0"):
        TeacherTrainConfig(learning_rate=0)
    with pytest.raises(ValueError, match="fewer than one batch of 16"):
        train_teacher(tiny_classifier(), synthetic_encoded(8), synthetic_encoded(8),
                      task="classification", config=FAST,
                      output_dir=tmp_path, progress=False)


def test_training_dynamics_put_a_planted_split_into_easy_and_hard(tmp_path):
    """A learning rate of 1e-12 keeps the initial predictions for every epoch: rows labelled
    with the initial prediction are correct at every epoch's end (easy), rows labelled with
    the other class never (hard), for each of two vmapped seeds."""
    from smat.evaluation.cartography import cartography
    from smat.models.inference import predict_logits
    from smat.training import dynamics

    data, valid = synthetic_encoded(64, seed=0), synthetic_encoded(16, seed=1)
    seeds = (0, 1)
    models = [tiny_classifier(seed=s) for s in seeds]
    initial = [np.argmax(predict_logits(*functional.split(m), data), axis=-1) for m in models]
    planted = np.arange(64) % 2 == 0  # even rows easy, odd rows hard
    # one label set for both seeds: rows on which the two initial models agree
    agree = initial[0] == initial[1]
    labels = np.where(planted, initial[0], 1 - initial[0]).astype(np.int32)
    train = data._replace(labels=labels)
    config = dataclasses.replace(
        FAST, learning_rate=1e-12, training_dynamics=True,
        loop=dataclasses.replace(FAST.loop, max_epochs=3, parallel_seeds=True))
    train_teacher(models, train, valid, task="classification", config=config, seeds=seeds,
                  output_dir=tmp_path, progress=False)
    for seed in seeds:
        probability, correct = dynamics.load(tmp_path / f"seed{seed}")
        assert probability.shape == correct.shape == (3, 64)
        groups = cartography(probability, correct).group
        assert (groups[planted & agree] == "easy").all()
        assert (groups[~planted & agree] == "hard").all()
    assert agree.sum() >= 16  # the check above covered enough rows


def test_training_dynamics_need_classification():
    config = dataclasses.replace(FAST, training_dynamics=True)
    with pytest.raises(ValueError, match="need a classification task"):
        train_teacher(tiny_classifier(task="regression"), synthetic_encoded(32),
                      synthetic_encoded(16), task="regression", config=config,
                      output_dir="unused", progress=False)
