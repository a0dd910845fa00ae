"""Tests for smat.jobs.roar: the ROAR / Recursive ROAR driver, its on-disk cell cache and
resume, per-seed programs, explanations of the gold label, the model preset and the
command line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from smat import cli as roar_cli
from smat.jobs import roar as roar_job
from smat.training.loop import LoopConfig, with_loop
from smat.training.teacher import TeacherResult, TeacherTrainConfig
from tests.helpers import synthetic_encoded, tiny_classifier


def _runner(tmp_path, *, recursive, explainers=("gradient",), ratios=(0.0, 0.5, 1.0),
            seeds=(0,), parallel_seeds=False):
    data = synthetic_encoded(48, seed=0)
    splits = roar_job.Splits(data, synthetic_encoded(16, seed=1), synthetic_encoded(16, seed=2))
    config = roar_job.RoarConfig(explainers=explainers, ratios=ratios, seeds=seeds,
                                 recursive=recursive, metric="accuracy", explain_batch_size=16)
    train = TeacherTrainConfig(warmup_steps=1, learning_rate=1e-3, loop=LoopConfig(
        batch_size=16, max_epochs=1, patience=1, length_multiple=16,
        parallel_seeds=parallel_seeds))
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


def test_shares_train_their_own_seeds_and_share_zero_reads_the_others_back(tmp_path,
                                                                           count_training):
    kwargs = dict(recursive=True, seeds=(0, 1, 2))
    alone = roar_job.run_cells(_runner(tmp_path / "alone", **kwargs))
    trained = len(count_training)
    assert roar_job.run_cells(_runner(tmp_path / "shared", **kwargs), share=(1, 2)) is None
    # share 1 of 2 trains the 4 cells of seed 1 (the second seed), nothing else
    assert sorted(call["seed"] for call in count_training[trained:]) == [1] * 4
    runner = _runner(tmp_path / "shared", **kwargs)
    joined = roar_job.run_cells(runner, share=(0, 2), join_timeout=1)
    assert sorted(call["seed"] for call in count_training[trained + 4:]) == [0] * 4 + [2] * 4
    np.testing.assert_array_equal(joined.curves["gradient"], alone.curves["gradient"])
    np.testing.assert_array_equal(joined.baseline, alone.baseline)
    assert len(runner.seed_cells(1)) == 4 and all(
        (folder / "result.json").is_file() for folder in runner.seed_cells(1))


def test_share_zero_names_the_unfinished_seeds_and_the_share_to_rerun(tmp_path,
                                                                      count_training):
    kwargs = dict(recursive=False, seeds=(0, 1, 2))
    roar_job.run_cells(_runner(tmp_path, **kwargs), share=(1, 3))
    with pytest.raises(TimeoutError) as waited:
        roar_job.run_cells(_runner(tmp_path, **kwargs), share=(0, 3), join_timeout=0.2)
    assert str(waited.value) == (
        "--share 0/3: after 0 s, the ROAR cells of seeds 2 are unfinished; run --share 2/3 "
        "again (finished cells are reused), then this command")


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


def test_roar_explains_batch_independent_explainers_as_smat_explain_does():
    """SmoothGrad draws its noise per row from the row's index on the uncut rows: ROAR's
    importance is smat explain's (same target and rule) and does not depend on the batch
    size (before, ROAR ran it on cut batches, so its draws followed the batching)."""
    from smat.jobs.explain import explain_encoded

    model = tiny_classifier(seed=3)
    graphdef, params = roar_job.functional.split(model)
    data = synthetic_encoded(9, seed=5)
    by_size = [roar_job.explain(graphdef, params, data, explainer="smoothgrad",
                                task="classification", batch_size=size) for size in (4, 16)]
    np.testing.assert_allclose(by_size[0], by_size[1], rtol=1e-5, atol=1e-7)
    reference, _, _ = explain_encoded(graphdef, params, data, ["smoothgrad"],
                                      task="classification", batch_size=8, length_multiple=16,
                                      target="gold", ig_method="riemann_right")
    np.testing.assert_allclose(by_size[0], reference["smoothgrad"], rtol=1e-5, atol=1e-7)


def test_small_preset_keeps_minilm_first_two_layers():
    from smat.models import ModelSource, from_pretrained, minilm_path

    small, tokenizer = roar_job.PRESETS["small"].model.load(task="classification",
                                                           num_labels=2, seed=0)
    full, _ = from_pretrained(minilm_path(), task="classification", num_labels=2,
                              pooling="mean")
    assert small.encoder.config.num_layers == 2 and tokenizer.mask_token_id == 103
    np.testing.assert_array_equal(small.encoder.layers.intermediate.kernel[...],
                                  full.encoder.layers.intermediate.kernel[...][:2])
    np.testing.assert_array_equal(small.encoder.word_embeddings[...],
                                  full.encoder.word_embeddings[...])
    from smat.models import keep_first_layers

    assert keep_first_layers(full, 6) is full
    with pytest.raises(ValueError, match="cannot keep 7 layers of an encoder with 6"):
        keep_first_layers(full, 7)
    with pytest.raises(ValueError, match="--num-layers: .*cannot keep 7 layers"):
        ModelSource(num_layers=7).load(task="classification", num_labels=2, seed=0)
    recorded = roar_job.PRESETS["small"].model.settings()
    assert ModelSource.from_settings(recorded).settings() == recorded
    assert recorded == {"model_source": str(minilm_path()), "pooling": "mean", "num_layers": 2}
    # a whole encoder's record is what runs recorded before num_layers existed
    assert set(ModelSource().settings()) == {"model_source", "pooling"}


def test_config_and_command_line():
    with pytest.raises(ValueError, match="explainers must be distinct names"):
        roar_job.RoarConfig(explainers=("random",))
    command, config = roar_cli.parse_command([
        "roar", "--recursive", "--explainers", "attention", "gradient", "--ratios", "0:100:10",
        "--seeds", "3", "--seed", "2", "--preset", "small", "--max-epochs", "5",
        "--max-len", "32"])
    assert command.name == "roar"
    data, roar, train = config.data, config.job_roar(), config.train
    assert roar.recursive and roar.explainers == ("attention", "gradient")
    assert roar.ratios == tuple(i / 10 for i in range(11)) and roar.seeds == (2, 3, 4)
    preset = roar_job.PRESETS["small"].train
    # The training flags given change the preset; the others keep its values.
    assert train == with_loop(preset, max_epochs=5, seed=2)
    assert data.max_len == 32 and data.source == "movie-snippets"
    parallel = roar_cli.parse_command(["roar", "--parallel-seeds"])[1].train
    assert parallel == with_loop(preset, parallel_seeds=True)
    # The model flags given change the preset's pretrained start; the others keep it.
    small = roar_job.PRESETS["small"].model
    assert config.model == small
    moved = roar_cli.parse_command(["roar", "--encoder", "ckpt", "--num-layers", "1"])[1]
    assert moved.model == dataclasses.replace(small, encoder="ckpt", num_layers=1)
    assert roar_cli.parse_command(["roar", "--preset", "minilm"])[1].model \
        == roar_job.PRESETS["minilm"].model
    with pytest.raises(SystemExit):  # argparse rejects a name outside the registry
        roar_cli.parse_command(["roar", "--explainers", "taylor"])


