"""The evaluation registry: a new evaluation is its own module plus one entry of
smat.jobs.evaluators.EVALUATORS, and nothing else; `smat NAME` appears with its flags."""

import dataclasses
import json

import numpy as np
import pytest

from smat.cli import build_parser, main
from smat.cli.commands import commands
from smat.jobs import evaluators
from smat.jobs.explain import ExplainConfig, explain_data


# ---- place 1 of 2: the new evaluation's own module (here, in the test) ----
@dataclasses.dataclass(frozen=True, kw_only=True)
class MassConfig:
    """Settings of the toy evaluation.

    Attributes:
      top: how many tokens of each explanation are summed.
      explain: which explainers run and how (ExplainConfig).
    """

    top: int = 2
    explain: ExplainConfig


def mass_report(trained, rows, settings: MassConfig) -> dict:
    """Per explainer: the mean share of |score| on each row's `top` tokens."""
    shares = {}
    for name, values in explain_data(trained, rows, settings.explain).scores.items():
        magnitude = np.abs(np.asarray(values, np.float64)) * rows.attention_mask
        top = -np.sort(-magnitude, axis=-1)[:, :settings.top].sum(-1)
        shares[name] = float(np.mean(top / np.maximum(magnitude.sum(-1), 1e-12)))
    return {"rows": len(rows.labels), "top": settings.top, "share": shares}


def mass_table(report: dict) -> str:
    return "\n".join(f"{name}: {share:.3f}" for name, share in report["share"].items())


# ---- place 2 of 2: its registry entry ----
MASS = evaluators.Evaluator(
    "mass", "share of each explanation's mass on its top tokens", MassConfig,
    lambda model, rows, settings, output_dir: mass_report(model, rows, settings), mass_table)


def test_a_registered_evaluation_is_a_command_with_its_flags(tiny_teacher, tmp_path,
                                                             monkeypatch, capsys):
    assert "mass" not in {command.name for command in commands()}
    monkeypatch.setitem(evaluators.EVALUATORS, "mass", MASS)
    assert "mass" in {command.name for command in commands()}
    sub = build_parser()._subparsers._group_actions[0].choices["mass"]
    assert "--top" in sub.format_help() and "how many tokens" in sub.format_help()
    out = tmp_path / "mass"
    assert main(["mass", "--model", str(tiny_teacher / "model"), "--explainers", "gradient",
                 "random", "--top", "3", "--num-examples", "8", "--output-dir", str(out),
                 "--no-progress"]) == 0
    report = json.loads((out / "mass.json").read_text())
    assert report["rows"] == 8 and report["top"] == 3
    assert set(report["share"]) == {"gradient", "random"}
    assert all(0 < share <= 1 for share in report["share"].values())
    assert (out / "mass.md").read_text().strip() == mass_table(report)
    assert mass_table(report) in capsys.readouterr().out


def test_every_registered_evaluation_documents_its_settings():
    for name, evaluator in evaluators.EVALUATORS.items():
        assert name == evaluator.name
        fields = {field.name for field in dataclasses.fields(evaluator.settings)}
        assert "explain" in fields, name
        documented = evaluator.settings.__doc__.split("Attributes:")[1]
        for field_name in fields:
            assert f"{field_name}:" in documented, (name, field_name)


def test_an_evaluation_command_needs_its_model(capsys):
    with pytest.raises(SystemExit):
        main(["sanity", "--explainers", "gradient"])
    assert "--model" in capsys.readouterr().err
