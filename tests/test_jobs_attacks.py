"""Tests for smat.jobs.attacks and `smat attack` on conftest's tiny teacher."""

import json

from smat.cli import main


def test_attack_command(tiny_teacher, tmp_path, capsys):
    """`smat attack` (smat.jobs.attacks) on the tiny teacher: every measure per row, the
    perturbation bounded, and invalid settings refused."""
    model = str(tiny_teacher / "model")
    assert main(["attack", "--model", model, "--explainers", "gradient", "input_x_gradient",
                 "--steps", "5", "--epsilon", "0.5", "--num-examples", "6",
                 "--output-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "attack_unconstrained.json").read_text())
    assert report["num_examples"] == 6 and set(report["explainers"]) == {
        "gradient", "input_x_gradient"}
    for summary in report["explainers"].values():
        assert len(summary["per_row"]["rank_change"]) == 6
        assert all(0 <= v <= 1 for v in summary["per_row"]["rank_change"])
        assert 1 <= summary["steps"] <= 5
    assert "| gradient |" in capsys.readouterr().out
    assert main(["attack", "--model", model, "--explainers", "lime"]) == 2
    assert "['lime'] are not among" in capsys.readouterr().err
    assert main(["attack", "--model", model, "--explainers", "gradient", "--epsilon",
                 "-1"]) == 2
    assert "epsilon must be > 0, got -1.0" in capsys.readouterr().err
