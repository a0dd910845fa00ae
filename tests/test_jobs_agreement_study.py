"""Tests for smat.jobs.agreement_study (Jukić et al. Tables 2 and 4) on conftest's tiny
teacher."""

import json

import numpy as np
import pytest

from smat.cli import main
from smat.jobs.agreement import agreement_report
from smat.jobs.agreement_study import (
    agreement_comparison,
    compare_variants,
    comparison_tables,
    row_agreement,
)
from smat.jobs.explain import ExplainConfig
from smat.jobs.inputs import held_out_split
from smat.store.model_store import load


@pytest.fixture(scope="module")
def trained(tiny_teacher):
    return load(tiny_teacher / "model")


def test_compare_variants_by_hand():
    """Rows of one model per variant: the paper's row-level test finds tying above both,
    but one model per variant is no evidence about a training setting."""
    rows = np.arange(10) / 10
    defined = np.ones(10, bool)
    summary = compare_variants({"base": (rows, defined), "tying": (rows + 0.1, defined),
                                "conicity": (rows + 0.05 * (-1) ** np.arange(10), defined)})
    # tying above both on all 10 rows: exact one-sided p = 1/1024 each, Holm-adjusted < .05
    assert summary["tying"]["above_by_rows"] == ["base", "conicity"]
    row_tests = {(t["variant"], t["over"]): t for t in summary["row_tests"]}
    assert len(row_tests) == 6 and row_tests[("tying", "base")]["p_value"] == pytest.approx(
        1 / 1024)
    assert summary["tying"]["mean"] == pytest.approx(0.55)
    assert not any(summary[v]["marked"] for v in ("base", "tying", "conicity"))
    assert summary["tying"]["num_models"] == 1
    assert {t["test"] for t in summary["tests"]} == {"fewer than 2 models: no test"}
    undefined = compare_variants({"a": (rows, ~defined), "b": (rows, ~defined)})
    assert np.isnan(undefined["a"]["mean"]) and undefined["row_tests"][0]["p_value"] == 1.0
    with pytest.raises(ValueError, match="same rows"):
        compare_variants({"a": (rows, defined), "b": (rows[:3], defined[:3])})


def test_significance_is_over_trained_models_not_pooled_rows():
    """Five seeds per variant. "steady" is above base by 0.02 in every model: marked over
    models. "lucky" has one model far above and four below base: its pooled rows are above
    base on every row (the row test says significant), the models say no."""
    rng = np.random.default_rng(0)
    base = 0.4 + 0.05 * rng.standard_normal((5, 1)) + 0.01 * rng.standard_normal((5, 40))
    steady = base + 0.02
    lucky = base - 0.01
    lucky[0] += 0.5
    defined = np.ones((5, 40), bool)
    summary = compare_variants({"base": (base, defined), "steady": (steady, defined),
                                "lucky": (lucky, defined)})
    assert "base" in summary["steady"]["above"]
    assert compare_variants({"base": (base, defined), "steady": (steady, defined)})[
        "steady"]["marked"]
    assert "base" not in summary["lucky"]["above"]
    assert "base" in summary["lucky"]["above_by_rows"]  # what pooled rows would have claimed
    tests = {(t["variant"], t["over"]): t for t in summary["tests"]}
    assert tests[("steady", "base")]["test"] == "t-test paired by seed"
    assert tests[("steady", "base")]["num_models"] == [5, 5]
    assert len(summary["base"]["model_means"]) == 5


def test_row_agreement_averages_to_the_agreement_report(trained):
    data = held_out_split(trained, num_examples=16)
    explain = ExplainConfig(explainers=("gradient", "attention_all"))
    values, defined = row_agreement([trained], data, explain, metrics=["pearson"])["pearson"]
    report = agreement_report([trained], data, explain, metrics=["pearson"])
    assert values[defined].mean() == pytest.approx(
        report["metrics"]["pearson"]["matrix"][0][1], abs=1e-4)
    with pytest.raises(ValueError, match="unknown agreement metrics"):
        row_agreement([trained], data, explain, metrics=["cosine"])


def test_identical_variants_tie_and_groups_split_rows(trained):
    data = held_out_split(trained, num_examples=16)
    groups = np.array(["easy", "hard"] * 8)
    explain = ExplainConfig(explainers=("gradient", "attention_all", "input_x_gradient"))
    result = agreement_comparison({"base": [trained], "copy": [trained]}, data, explain,
                                  metrics=["pearson"], groups=groups)
    assert list(result["groups"]) == ["all", "easy", "hard"]
    for part in result["groups"].values():
        summary = part["pearson"]
        assert summary["base"]["mean"] == summary["copy"]["mean"]
        assert not summary["base"]["marked"] and not summary["copy"]["marked"]
    assert result["groups"]["easy"]["pearson"]["base"]["num_rows"] <= 8
    table = comparison_tables(result)
    assert "| metric | base | copy |" in table and "pearson by group:" in table
    with pytest.raises(ValueError, match="two or more model variants"):
        agreement_comparison({"base": [trained]}, data, explain)
    with pytest.raises(ValueError, match="without models"):
        agreement_comparison({"base": [trained], "none": []}, data, explain)


def test_agreement_command_compares_variants(tiny_teacher, tmp_path, capsys):
    model = str(tiny_teacher / "model")
    assert main(["agreement", "--variant", "base", model, "--variant", "again", model, model,
                 "--explainers", "gradient", "attention_all", "--metrics", "kendall",
                 "pearson", "--num-examples", "8", "--output-dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "comparison.json").read_text())
    assert result["variants"] == ["base", "again"] and result["num_rows"] == 8
    assert "| kendall |" in (tmp_path / "comparison.md").read_text()
    capsys.readouterr()
    assert main(["agreement", "--model", model, "--variant", "x", model,
                 "--explainers", "gradient", "random"]) == 2
    assert "either --model" in capsys.readouterr().err
    assert main(["agreement", "--variant", "x", "--variant", "y", model,
                 "--explainers", "gradient", "random"]) == 2
    assert "--variant x names no model folder" in capsys.readouterr().err
