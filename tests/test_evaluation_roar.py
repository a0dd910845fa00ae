"""Tests of ROAR / Recursive ROAR: masking op, Eq. 3, plot, cache resume, synthetic validation."""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat import cli as roar_cli
from smat.evaluation.roar import (
    mask_input_ids,
    maskable_tokens,
    num_to_mask,
    plot_roar,
    roar_faithfulness,
    roar_mask,
    summarize_faithfulness,
)
from smat.evaluation.roar_synthetic import (
    ground_truth_curve,
    make_synthetic_problem,
    roar_curve,
)
from smat.jobs import roar as roar_job
from smat.training.teacher import TeacherResult, TeacherTrainConfig
from tests.helpers import synthetic_encoded, tiny_classifier

# ------------------------------------------------------------------ masking op

SPECIAL = np.array([[True, False, False, False, False, True, True]])  # [CLS] 4 tokens [SEP] pad
ATTENTION = np.array([[1, 1, 1, 1, 1, 1, 0]])


def _mask(scores, masked=None, **kwargs):
    maskable = maskable_tokens(ATTENTION, SPECIAL)
    return np.asarray(roar_mask(jnp.asarray([scores], jnp.float32), maskable,
                                None if masked is None else np.asarray([masked]), **kwargs))[0]


def test_ties_are_broken_by_position():
    assert _mask([0, 1, 1, 1, 1, 0, 0], count=2).tolist() == [0, 1, 1, 0, 0, 0, 0]
    assert _mask([0, 1, 5, 5, 1, 0, 0], count=1).tolist() == [0, 0, 1, 0, 0, 0, 0]


def test_special_and_padding_tokens_are_never_masked():
    scores = [100, 1, 2, 3, 4, 100, 100]
    assert _mask(scores, count=2).tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert _mask(scores, ratio=1.0).tolist() == [0, 1, 1, 1, 1, 0, 0]
    assert _mask(scores, count=99).tolist() == [0, 1, 1, 1, 1, 0, 0]  # clipped to n
    # A special token marked as masked is still not masked.
    assert _mask(scores, masked=[1, 0, 0, 0, 0, 0, 1], count=1).tolist() == [0, 0, 0, 0, 1, 0, 0]


def test_already_masked_tokens_rank_first_and_stay_masked():
    scores = [0, 9, 8, 7, 1, 0, 0]
    previous = [0, 0, 0, 0, 1, 0, 0]  # the lowest-scored token was masked before
    assert _mask(scores, previous, count=2).tolist() == [0, 1, 0, 0, 1, 0, 0]
    # Fewer tokens asked than already masked: they all stay masked, nothing is added.
    assert _mask(scores, [0, 0, 1, 0, 1, 0, 0], count=1).tolist() == [0, 0, 1, 0, 1, 0, 0]


def test_ratio_zero_and_one_and_rounding():
    scores = [0, 4, 3, 2, 1, 0, 0]
    assert _mask(scores, ratio=0.0).tolist() == [0] * 7
    assert _mask(scores, ratio=0.5).tolist() == [0, 1, 1, 0, 0, 0, 0]
    assert _mask(scores, ratio=0.3).tolist() == [0, 1, 0, 0, 0, 0, 0]  # 1.2 -> 1
    n = jnp.array([10, 5, 3, 0])
    assert num_to_mask(n, ratio=0.3).tolist() == [3, 2, 1, 0]  # exact: 0.3 * 10 = 3; 1.5 -> 2
    assert num_to_mask(n, ratio=0.5).tolist() == [5, 3, 2, 0]  # half up
    assert num_to_mask(n, count=jnp.array([4, 9, 1, 2])).tolist() == [4, 5, 1, 0]


def test_count_mode_is_traceable_and_masks_are_nested(key):
    maskable = jnp.asarray(synthetic_encoded(8, seed=1).special_tokens_mask == 0)
    scores = jax.random.normal(key, maskable.shape)
    masks = jax.jit(jax.vmap(lambda k: roar_mask(scores, maskable, count=k)))(jnp.arange(17))
    masks = np.asarray(masks)  # (17, B, T)
    assert np.all(masks[:-1] <= masks[1:])  # nested
    assert np.array_equal(masks.sum(axis=2)[:, 0],
                          np.minimum(np.arange(17), int(maskable[0].sum())))
    assert not np.any(masks & ~np.asarray(maskable)[None])
    by_ratio = [np.asarray(roar_mask(scores, maskable, ratio=r)) for r in (0.2, 0.5, 0.8)]
    assert all(np.all(a <= b) for a, b in zip(by_ratio, by_ratio[1:], strict=False))


def test_mask_input_ids_and_errors():
    ids = np.array([[2, 11, 12, 3]])
    out = mask_input_ids(ids, np.array([[False, True, False, False]]), mask_token_id=5)
    assert out.tolist() == [[2, 5, 12, 3]]
    with pytest.raises(ValueError, match="exactly one of ratio= or count="):
        _mask([0] * 7, ratio=0.5, count=1)
    with pytest.raises(ValueError, match=r"ratio must be in \[0, 1\]"):
        _mask([0] * 7, ratio=1.5)
    with pytest.raises(ValueError, match="masked has shape"):
        roar_mask(np.zeros((1, 7)), np.ones((1, 7), bool), np.ones((1, 6), bool), count=1)


# ------------------------------------------------------------------ Eq. 3


def _eq3_reference(p, b, x):
    p, b, x = map(np.asarray, (p, b, x))
    num = np.sum(0.5 * np.diff(x) * ((b - p)[:-1] + (b - p)[1:]))
    den = np.sum(0.5 * np.diff(x) * ((b - b[-1])[:-1] + (b - b[-1])[1:]))
    return num / den


def test_faithfulness_matches_eq3_and_clips():
    x = [0.0, 0.2, 0.5, 1.0]
    b = [0.9, 0.8, 0.7, 0.5]
    p = [0.9, 0.7, 0.6, 0.5]
    r = roar_faithfulness([p, [0.9, 1.0, 1.0, 0.9], [0.9, 0.3, 0.2, 0.5]], [b, b, b], x)
    assert float(r.values[0]) == pytest.approx(_eq3_reference(p, b, x), rel=1e-5)
    assert 0 < float(r.values[0]) < 1
    assert _eq3_reference([0.9, 1.0, 1.0, 0.9], b, x) < -1 and float(r.values[1]) == -1.0
    assert _eq3_reference([0.9, 0.3, 0.2, 0.5], b, x) > 1 and float(r.values[2]) == 1.0
    assert np.all(np.asarray(r.defined))


def test_faithfulness_flags_near_zero_denominator():
    x = [0.0, 0.5, 1.0]
    flat = [0.5, 0.5, 0.5]  # the random baseline never rises above the 100% model
    r = roar_faithfulness([[0.5, 0.4, 0.5], [0.9, 0.6, 0.5]],
                          [flat, [0.9, 0.8, 0.5]], x)
    assert np.asarray(r.defined).tolist() == [False, True]
    assert float(r.values[0]) == 0.0 and np.all(np.isfinite(np.asarray(r.values)))
    summary = summarize_faithfulness(r)
    assert summary.num_defined == 1 and summary.num_undefined == 1
    assert summary.mean == pytest.approx(float(r.values[1]))
    none = summarize_faithfulness(roar_faithfulness([[0.5, 0.4, 0.5]], [flat], x))
    assert none.num_defined == 0 and np.isnan(none.mean)


def test_faithfulness_summary_ci_and_shape_errors():
    x = [0.0, 0.5, 1.0]
    b = [[0.9, 0.8, 0.5]] * 4
    p = [[0.9, 0.6, 0.5], [0.9, 0.7, 0.5], [0.9, 0.65, 0.5], [0.9, 0.55, 0.5]]
    summary = summarize_faithfulness(roar_faithfulness(p, b, x))
    assert summary.low <= summary.mean <= summary.high and summary.num_defined == 4
    with pytest.raises(ValueError, match=r"performance must have shape \(seeds, 3\)"):
        roar_faithfulness([[0.9, 0.5]], [[0.9, 0.5]], x)
    with pytest.raises(ValueError, match="must start at 0.0 and end at 1.0"):
        roar_faithfulness([[0.9, 0.5]], [[0.9, 0.5]], [0.0, 0.5])


def test_plot_roar(tmp_path):
    x = [0.0, 0.5, 1.0]
    b = np.array([[0.9, 0.8, 0.5], [0.88, 0.75, 0.5]])
    fig = plot_roar({"gradient": b - 0.1}, b, x, metric="accuracy", path=tmp_path / "r.png")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["gradient", "random", "100% masked"]
    assert fig.axes[0].get_lines()[2].get_ydata()[0] == pytest.approx(0.5)
    assert (tmp_path / "r.png").stat().st_size > 0
    with pytest.raises(ValueError, match="curve 'gradient' has shape"):
        plot_roar({"gradient": b[:1]}, b, x)


# ------------------------------------------------------------------ driver and cache


def _runner(tmp_path, *, recursive, explainers=("gradient",), ratios=(0.0, 0.5, 1.0),
            seeds=(0,), parallel_seeds=False):
    data = synthetic_encoded(48, seed=0)
    splits = roar_job.Splits(data, synthetic_encoded(16, seed=1), synthetic_encoded(16, seed=2))
    config = roar_job.RoarConfig(explainers=explainers, ratios=ratios, seeds=seeds,
                                 recursive=recursive, metric="accuracy", explain_batch_size=16,
                                 parallel_seeds=parallel_seeds)
    train = TeacherTrainConfig(batch_size=16, max_epochs=1, patience=1, warmup_steps=1,
                               learning_rate=1e-3, length_multiple=16)
    return roar_job.RoarRunner(make_model=lambda seed: tiny_classifier(seed=seed),
                               splits=splits, mask_token_id=4, config=config, train=train,
                               task="classification", cache_dir=tmp_path, dataset="synthetic",
                               model="tiny")


@pytest.fixture
def count_training(monkeypatch):
    """Record every training call; the stand-in returns the initial parameters at once.

    Training itself is smat.training.teacher's (tested there, and end to end below under
    ``slow``); here only which cells train, on what, matters.
    """
    calls = []

    def stand_in(models, trains, validations, *, task, config, seeds, output_dir, progress):
        results = []
        for model, train, seed, folder in zip(models, trains, seeds, output_dir, strict=True):
            calls.append({"output_dir": folder, "train": train, "seed": seed})
            (folder / "train-started").parent.mkdir(parents=True, exist_ok=True)
            results.append(TeacherResult(roar_job.functional.split(model)[1],
                                         {"accuracy": 0.5}, 0, 0, 0.0))
        return results

    monkeypatch.setattr(roar_job, "train_teacher", stand_in)
    return calls


@pytest.fixture
def count_real_training(monkeypatch):
    calls = []
    real = roar_job.train_teacher

    def counted(*args, **kwargs):
        calls.extend({"output_dir": folder} for folder in kwargs["output_dir"])
        return real(*args, **kwargs)

    monkeypatch.setattr(roar_job, "train_teacher", counted)
    return calls


def test_recursive_run_resumes_from_cache_without_training(tmp_path, count_training):
    first = roar_job.run_cells(_runner(tmp_path, recursive=True,
                                       ratios=(0.0, 0.25, 0.5, 1.0)))
    # Cells: 0%, 100%, random at 25% and 50%, gradient at 25% and 50%.
    assert len(count_training) == 6
    runner = _runner(tmp_path, recursive=True, ratios=(0.0, 0.25, 0.5, 1.0))
    cells = sorted(runner.root.glob("gradient/recursive/seed0/*"))
    masks = [np.load(c / "masks.npz")["train"] for c in cells]
    maskable = runner.maskable.train
    assert np.all(masks[0] <= masks[1]) and not np.any(masks[1] & ~maskable)
    assert masks[1].sum() > masks[0].sum() > 0
    assert not any(runner.root.rglob("train"))  # optimizer checkpoints removed
    # The model of each cell trains on its masked data: [MASK] (id 4) exactly at the mask.
    last = count_training[-1]["train"]
    np.testing.assert_array_equal(last.input_ids == 4, masks[1])
    np.testing.assert_array_equal(last.labels, runner.splits.train.labels)
    second = roar_job.run_cells(runner)
    assert len(count_training) == 6 and runner.trained_cells == 0
    np.testing.assert_array_equal(second.curves["gradient"], first.curves["gradient"])
    np.testing.assert_array_equal(second.baseline, first.baseline)
    # A killed run: the last explainer cell never wrote its result; only it is redone.
    (cells[-1] / "result.json").unlink()
    roar_job.run_cells(_runner(tmp_path, recursive=True, ratios=(0.0, 0.25, 0.5, 1.0)))
    assert len(count_training) == 7 and count_training[-1]["output_dir"].parent == cells[-1]


def test_roar_shares_the_unmasked_full_and_random_cells(tmp_path, count_training):
    result = roar_job.run_cells(_runner(tmp_path, recursive=True))
    assert len(count_training) == 4
    plain = roar_job.run_cells(_runner(tmp_path, recursive=False))
    assert len(count_training) == 5  # only the ROAR gradient cell is new
    np.testing.assert_array_equal(plain.baseline, result.baseline)
    # With one middle ratio ROAR and Recursive ROAR mask the same tokens.
    root = _runner(tmp_path, recursive=False).root
    roar_masks = np.load(next(root.glob("gradient/roar/seed0/*")) / "masks.npz")["test"]
    rec_masks = np.load(next(root.glob("gradient/recursive/seed0/*")) / "masks.npz")["test"]
    np.testing.assert_array_equal(roar_masks, rec_masks)
    record = json.loads(next(root.glob("all-masked/roar/seed0/*/result.json")).read_text())
    assert record["masked_fraction"] == 1.0
    assert set(result.faithfulness) == {"gradient"} and len(result.faithfulness["gradient"]) == 1


@pytest.mark.slow
def test_real_training_run_and_resume(tmp_path, count_real_training):
    first = roar_job.run_cells(_runner(tmp_path, recursive=True))
    assert len(count_real_training) == 4
    record = json.loads(next(tmp_path.rglob("unmasked/roar/seed0/*/result.json")).read_text())
    assert record["steps"] == 3 and set(record["test"]) == {"accuracy", "macro_f1"}
    second = roar_job.run_cells(_runner(tmp_path, recursive=True))
    assert len(count_real_training) == 4
    np.testing.assert_array_equal(second.curves["gradient"], first.curves["gradient"])


def test_parallel_seeds_train_each_cell_of_all_seeds_in_one_program(tmp_path):
    """--parallel-seeds: the seeds' cells train vmapped, with the sequential results."""
    kwargs = dict(recursive=True, seeds=(0, 1))
    sequential = roar_job.run_cells(_runner(tmp_path / "seq", **kwargs))
    runner = _runner(tmp_path / "vmap", parallel_seeds=True, **kwargs)
    together = roar_job.run_cells(runner)
    assert runner.trained_cells == 8  # 4 cells x 2 seeds
    np.testing.assert_allclose(together.curves["gradient"], sequential.curves["gradient"],
                               atol=1e-6)
    np.testing.assert_allclose(together.baseline, sequential.baseline, atol=1e-6)
    for path in (tmp_path / "seq").rglob("masks.npz"):
        twin = tmp_path / "vmap" / path.relative_to(tmp_path / "seq")
        np.testing.assert_array_equal(np.load(twin)["train"], np.load(path)["train"])


def test_explain_targets_the_gold_label():
    model = tiny_classifier(seed=3)
    graphdef, params = roar_job.functional.split(model)
    data = synthetic_encoded(5, seed=4)
    flipped = data._replace(labels=1 - data.labels)
    a = roar_job.explain(graphdef, params, data, explainer="input_x_gradient",
                         task="classification", batch_size=4)
    b = roar_job.explain(graphdef, params, flipped, explainer="input_x_gradient",
                         task="classification", batch_size=4)
    assert a.shape == data.input_ids.shape
    assert not np.allclose(a, b)  # different target, different attributions
    for name in ("attention", "gradient", "integrated_gradients"):
        scores = roar_job.explain(graphdef, params, data, explainer=name,
                                  task="classification", ig_steps=3, batch_size=8)
        assert scores.shape == data.input_ids.shape and np.all(np.isfinite(scores))


def test_small_preset_keeps_minilm_first_two_layers():
    small, tokenizer = roar_job.load_preset_model("small", task="classification",
                                                  num_labels=2, seed=0)
    full, _ = roar_job.from_pretrained(roar_job.minilm_path(), task="classification",
                                       num_labels=2, pooling="mean")
    assert small.encoder.config.num_layers == 2 and tokenizer.mask_token_id == 103
    np.testing.assert_array_equal(small.encoder.layers.intermediate.kernel[...],
                                  full.encoder.layers.intermediate.kernel[...][:2])
    np.testing.assert_array_equal(small.encoder.word_embeddings[...],
                                  full.encoder.word_embeddings[...])


def test_config_and_command_line():
    assert roar_cli.parse_ratios("0:100:20") == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert roar_cli.parse_ratios("0,50,100") == (0.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="start:stop:step"):
        roar_cli.parse_ratios("0-100")
    with pytest.raises(ValueError, match="explainers must be distinct names"):
        roar_job.RoarConfig(explainers=("random",))
    parser = argparse.ArgumentParser()
    roar_cli._add_roar_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["roar", "--recursive", "--explainers", "attention", "gradient",
                              "--ratios", "0:100:10", "--seeds", "3", "--preset", "small"])
    assert args.recursive and args.seeds == 3 and args.explainers == ["attention", "gradient"]
    assert args.run is roar_cli._roar_command and not args.parallel_seeds
    assert parser.parse_args(["roar", "--parallel-seeds"]).parallel_seeds


# ------------------------------------------------------------------ synthetic validation


def test_recursive_roar_recovers_the_ground_truth_order_of_eq1():
    """Madsen et al. (2022) §3.3 / Figure 3: with |weights| as importance, Recursive ROAR
    masks the 4 informative (redundant) features first, like the ground truth; ROAR,
    ranking once by the weights of the unmasked model, does not."""
    roar_first4, recursive_first4, gap = [], [], []
    for seed in range(6):
        problem = make_synthetic_problem(jax.random.key(seed))
        informative = np.asarray(problem.informative)
        plain = roar_curve(problem, recursive=False)
        recursive = roar_curve(problem, recursive=True)
        truth = ground_truth_curve(problem)
        roar_first4.append(np.array_equal(np.asarray(plain.masked[4]), informative))
        recursive_first4.append(np.array_equal(np.asarray(recursive.masked[4]), informative))
        assert float(recursive.accuracy[4]) == pytest.approx(float(truth.accuracy[4]))
        assert float(truth.accuracy[0]) > 0.75 and float(truth.accuracy[4]) < 0.55
        gap.append(float(plain.accuracy[4] - recursive.accuracy[4]))
        assert np.all(np.diff(np.asarray(recursive.masked).sum(axis=1)) == 1)
    assert all(recursive_first4)
    assert sum(roar_first4) <= 4  # ROAR misses the informative set on some problems
    assert np.mean(gap) > 0.02  # ...so its curve stays above Recursive ROAR's
