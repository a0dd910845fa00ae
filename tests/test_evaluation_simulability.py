"""Tests for smat.evaluation.simulability: the Table 1 layout and the paired test over seeds."""

import pytest

from smat.evaluation.simulability import paired_seed_comparison, simulability_table


def _records(explainer, size, accuracies):
    return [{"explainer": explainer, "num_examples": size, "seed": seed,
             "test": {"accuracy": acc}} for seed, acc in enumerate(accuracies)]


def test_paired_comparison_counts_models_not_rows():
    records = (_records("none", 500, [0.80, 0.81, 0.79, 0.82, 0.80])
               + _records("smat", 500, [0.85, 0.86, 0.84, 0.83, 0.88])
               + _records("smat", 1000, [0.9] * 5))
    (row,) = paired_seed_comparison(records, candidate="smat", baseline="none")
    assert row["num_examples"] == 500 and row["num_models"] == 5 and row["wins"] == 5
    assert row["median_difference"] == pytest.approx(0.05)
    assert row["p_value"] == pytest.approx(1 / 32)  # the smallest p that 5 pairs allow
    # pairing matters: a candidate that wins on the median but loses seed by seed
    mixed = (_records("none", 500, [0.70, 0.90, 0.91, 0.92, 0.93])
             + _records("smat", 500, [0.95, 0.89, 0.90, 0.91, 0.92]))
    (row,) = paired_seed_comparison(mixed, candidate="smat", baseline="none")
    assert row["wins"] == 1 and row["p_value"] > 0.3
    with pytest.raises(ValueError, match="pair the same seeds"):
        paired_seed_comparison(records[:4] + records[5:10], candidate="smat", baseline="none")


def test_table_marks_cells_whose_iqr_lies_above_the_baseline():
    records = (_records("none", 64, [0.60, 0.61, 0.62])
               + _records("smat", 64, [0.70, 0.71, 0.72])
               + _records("attention_all", 64, [0.55, 0.61, 0.75]))
    table = simulability_table(records)
    assert "| smat | 71.00 [70.50:71.50] * |" in table
    assert "| attention_all | 61.00 [58.00:68.00] |" in table
