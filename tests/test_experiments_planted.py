"""Tests of experiments/smat_planted.py: the planted-mechanism task, its arms and a
smoke run with the direction diagnostic, resumed from its cell files."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import smat_planted  # noqa: E402


def test_task_plants_the_deciding_token():
    config = smat_planted.get_config("cpu")
    rows = smat_planted.make_rows(config, 200, np.random.default_rng(0))
    key_start = 3
    n = np.arange(200)
    key_ids = rows.input_ids[n, rows.key_position]
    labels = np.argmax(rows.teacher_logits, axis=-1)
    # the key token's set decides the teacher's label
    np.testing.assert_array_equal((key_ids - key_start) // config.num_key, labels)
    assert np.all(rows.input_ids[:, 0] == smat_planted.CLS)
    assert np.all(rows.input_ids[:, -1] == smat_planted.SEP)
    # exactly one key token per sequence
    is_key = (rows.input_ids >= key_start) & (rows.input_ids < key_start + 2 * config.num_key)
    np.testing.assert_array_equal(is_key.sum(axis=1), 1)
    # the informative heads' pooled rows peak at the key token, the others elsewhere
    peaks = np.argmax(rows.teacher_features[:, 0], axis=-1)  # (N, H)
    for head in range(len(config.head_targets)):
        hits = np.mean(peaks[:, head] == rows.key_position)
        assert (hits > 0.95) == (head in config.informative_heads), (head, hits)


def test_static_explanations():
    config = smat_planted.get_config("cpu")
    rows = smat_planted.make_rows(config, 100, np.random.default_rng(1))
    n = np.arange(100)
    oracle = smat_planted.static_scores(config, rows, "static_oracle")
    mean = smat_planted.static_scores(config, rows, "static_mean")
    assert np.mean(np.argmax(oracle, axis=-1) == rows.key_position) > 0.95
    # the uniform mean ranks the key token below the decoy (three decoy heads, two key heads)
    assert np.mean(mean[n, rows.key_position] < np.max(mean, axis=-1)) > 0.9
    assert smat_planted.static_coefficients(config, "static_oracle")[
        list(config.informative_heads)].sum() == pytest.approx(1.0)


def test_config_validation():
    with pytest.raises(ValueError, match="head_targets"):
        smat_planted.PlantedConfig(head_targets=("decoy", "cls"))
    with pytest.raises(ValueError, match="probe_steps"):
        smat_planted.PlantedConfig(steps=10, probe_steps=(0, 20))
    with pytest.raises(ValueError, match="probe_variants"):
        smat_planted.PlantedConfig(probe_variants=("kl_reverse",))
    with pytest.raises(ValueError, match="unknown variant"):
        smat_planted.get_config("paper")
    assert len(smat_planted.get_config("cpu").arms) == 9


def test_smoke_run_and_resume(tmp_path):
    summary = smat_planted.run("smoke", output_dir=tmp_path, progress=False)
    config = smat_planted.get_config("smoke")
    assert {row["arm"] for row in summary["arms"]} == set(config.arms)
    for record in summary["records"]:
        assert len(record["final_test"]) == len(config.seeds)
        assert all(0.0 <= v <= 1.0 for v in record["final_test"])
    smat = next(r for r in summary["records"] if r["arm"].startswith("smat_"))
    assert len(smat["informative_weight"]) == len(config.seeds)
    np.testing.assert_allclose(np.sum(smat["final_lambda"], axis=-1), 1.0, rtol=1e-5)
    directions = summary["directions"]
    assert {(d["arm"], d["step"]) for d in directions} == {
        ("static_mean", step) for step in config.probe_steps}
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
