"""Tests of the planted-mechanism experiment (experiments/smat_planted.py over
smat.jobs.planted): the task, its arms as student-trainer settings, a smoke run with the
direction diagnostic resumed from its cell files, and the committed result's tables."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from smat.evaluation.planted_task import (
    CLS,
    SEP,
    PlantedTask,
    planted_rows,
    static_coefficients,
)
from smat.jobs import planted, planted_report
from smat.training.student import fixed_head_rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

import smat_planted  # noqa: E402

RESULT = ROOT / "docs" / "results" / "smat_planted_cpu.json"
PAGE = ROOT / "docs" / "results" / "smat_planted_cpu.md"


def test_task_plants_the_deciding_token():
    task = PlantedTask()
    rows = planted_rows(task, 200, np.random.default_rng(0))
    key_start = 3
    n = np.arange(200)
    key_ids = rows.input_ids[n, rows.key_position]
    # the key token's set decides the label and the teacher's prediction
    np.testing.assert_array_equal((key_ids - key_start) // task.num_key, rows.labels)
    np.testing.assert_array_equal(np.argmax(rows.teacher_logits, axis=-1), rows.labels)
    assert np.all(rows.input_ids[:, 0] == CLS)
    assert np.all(rows.input_ids[:, -1] == SEP)
    # exactly one key token per sequence
    is_key = (rows.input_ids >= key_start) & (rows.input_ids < key_start + 2 * task.num_key)
    np.testing.assert_array_equal(is_key.sum(axis=1), 1)
    # the informative heads' pooled rows peak at the key token, the others elsewhere
    peaks = np.argmax(rows.teacher_features[:, 0], axis=-1)  # (N, H)
    for head in range(len(task.head_targets)):
        hits = np.mean(peaks[:, head] == rows.key_position)
        assert (hits > 0.95) == (head in task.informative_heads), (head, hits)


def test_static_arms_train_on_the_frozen_head_scores():
    """The static arms are the trainer's attention_heads setting; the scores it derives
    from the cached heads point at the key (oracle) or rank it below the decoy (mean)."""
    config = smat_planted.get_config("cpu")
    rows = planted.student_rows(planted_rows(config.task, 100, np.random.default_rng(1)))
    key = planted_rows(config.task, 100, np.random.default_rng(1)).key_position
    n = np.arange(100)
    scores = {}
    for arm in ("static_oracle", "static_mean"):
        settings = planted.arm_settings(config, arm)
        assert settings.explainer == "attention_heads"
        scores[arm] = fixed_head_rows(rows, settings.head_weights).teacher_scores
    assert np.mean(np.argmax(scores["static_oracle"], axis=-1) == key) > 0.95
    # the uniform mean ranks the key token below the decoy (three decoy heads, two key heads)
    mean = scores["static_mean"]
    assert np.mean(mean[n, key] < np.max(mean, axis=-1)) > 0.9
    assert static_coefficients(config.task, "static_oracle")[
        list(config.task.informative_heads)].sum() == pytest.approx(1.0)
    smat = planted.arm_settings(config, "smat_softmax_5e-03")
    assert (smat.explainer, smat.normalizer, smat.outer_learning_rate) == (
        "smat", "softmax", 5e-3)
    assert planted.arm_settings(config, "none").resolved_beta == 0.0


def test_config_validation():
    with pytest.raises(ValueError, match="head_targets"):
        PlantedTask(head_targets=("decoy", "cls"))
    with pytest.raises(ValueError, match="probe_epochs"):
        planted.PlantedConfig(epochs=10, probe_epochs=(0, 20))
    with pytest.raises(ValueError, match="probe_variants"):
        planted.PlantedConfig(probe_variants=("kl_reverse",))
    with pytest.raises(ValueError, match="unknown variant"):
        smat_planted.get_config("paper")
    with pytest.raises(ValueError, match="unknown arm"):
        planted.arm_settings(planted.PlantedConfig(), "smat_entmax_1e-03")
    assert len(smat_planted.get_config("cpu").arms) == 9


def test_smoke_run_and_resume(tmp_path):
    summary = smat_planted.run("smoke", output_dir=tmp_path, progress=False)
    config = smat_planted.get_config("smoke")
    assert {row["arm"] for row in summary["arms"]} == set(config.arms)
    for record in summary["records"]:
        assert len(record["final_test"]) == len(config.seeds)
        assert all(0.0 <= v <= 1.0 for v in record["final_test"] + record["best_valid_test"])
    smat = next(r for r in summary["records"] if r["arm"].startswith("smat_"))
    assert len(smat["informative_weight"]) == len(config.seeds)
    np.testing.assert_allclose(np.sum(smat["final_lambda"], axis=-1), 1.0, rtol=1e-5)
    # the cell file holds one evaluation per epoch (and the start) for every seed
    cell = json.loads((tmp_path / "cells" / smat["arm"] / "data0.json").read_text())
    assert [e["step"] for e in cell["evaluations"]] == [
        epoch * config.steps_per_epoch for epoch in range(config.epochs + 1)]
    assert all(None not in e["test"] for e in cell["evaluations"])
    directions = summary["directions"]
    assert {(d["arm"], d["step"]) for d in directions} == {
        ("static_mean", epoch * config.steps_per_epoch) for epoch in config.probe_epochs}
    assert all(np.isfinite(d["z_informative_mean"]) for d in directions)
    assert "Direction diagnostic" in (tmp_path / "table.md").read_text()
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["arms"] == summary["arms"]

    # A rerun reuses every finished cell: no training, same numbers.
    cell = tmp_path / "cells" / "none" / "data0.json"
    stamp = cell.stat().st_mtime_ns
    again = smat_planted.run("smoke", output_dir=tmp_path, progress=False)
    assert cell.stat().st_mtime_ns == stamp
    assert again["arms"] == summary["arms"]
    assert again["directions"] == summary["directions"]


def _quotable(result: dict) -> set[str]:
    """Every "median [IQR]" cell of a committed planted result."""
    return {row[key] for row in result["arms"] for key in ("final_test", "best_valid_test")} | {
        row[key] for row in result["smat_dynamics"]
        for key in ("test_informative_above_half", "test_informative_below_half")} | {
        value for row in result["arms"] for value in row["per_data_seed"].values()}


def test_committed_results_regenerate():
    """Each committed run's records give its arms table again, and the results page holds
    the tables the report code writes from each committed summary (the direction tables of
    the fan-in variant only for the SMaT step's own settings)."""
    page = PAGE.read_text()
    quotable = set()
    for path in (RESULT, RESULT.with_name("smat_planted_cpu_fan_in.json")):
        result = json.loads(path.read_text())
        config = smat_planted.get_config(result["variant"])
        assert result["config"] == json.loads(json.dumps(
            smat_planted.dataclasses.asdict(config)))
        assert planted_report.arm_rows(config, result["records"]) == result["arms"]
        own = [r for r in result["directions"] if r["variant"] in planted_report.OWN_VARIANTS]
        tables = [planted_report.arm_table(config, result["arms"]),
                  planted_report.dynamics_table(result["smat_dynamics"])]
        tables += ([planted_report.direction_by_target_table(result["directions"]),
                    planted_report.direction_table(own)] if result["variant"] == "cpu"
                   else [planted_report.direction_by_target_table(own)])
        for table in tables:
            assert table and table in page, (path.name, table.splitlines()[0])
        quotable |= _quotable(result)
    # the page's prose quotes the tables' numbers, not other ones
    assert set(re.findall(r"\d+\.\d \[\d+\.\d:\d+\.\d\]", page)) <= quotable
