"""Tests for smat.jobs.thesis_report: the committed cpu result of the thesis's evaluations
(docs/results/thesis_cpu.json) regenerates its verdicts and tables."""

import json
from pathlib import Path

from smat.jobs import thesis_report

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results" / "thesis_cpu.json"


def test_committed_result_regenerates_its_verdicts():
    summary = json.loads(RESULTS.read_text())
    for result in summary["models"].values():
        def claims(verdicts):
            return sorted(verdicts, key=lambda v: v["claim"])

        # the JSON keeps the epsilons sorted as text, so the verdicts' order may differ
        assert claims(thesis_report.verdicts(result)) == claims(result["verdicts"])


def test_committed_result_regenerates_its_tables():
    summary = json.loads(RESULTS.read_text())
    lines = thesis_report.tables(summary).splitlines()
    expected = [
        "| model | layers | held-out phrase accuracy | dev-sentence accuracy | train seconds |",
        "|---|---|---|---|---|",
        "| minilm | 6 | 100.0% | 100.0% | 145.2 |",
        "| small | 2 | 100.0% | 100.0% | 58.6 |",
        "## minilm (6 layers)",
        "(a, c) Ground truth and AOPC (50 dev sentences, 23.8 tokens on average; 95% bootstrap "
        "CIs):",
        "| method | GT overlap ↑ | mean rank (% of tokens) ↓ | comprehensiveness ↑ | "
        "sufficiency ↓ |",
        "| Gradients (`gradient`) | 0.920 [0.840, 0.980] | 0.060 [0.050, 0.072] | "
        "0.509 [0.416, 0.598] | 0.028 [0.005, 0.059] |",
        "| random | 0.040 [0.000, 0.100] | 0.572 [0.493, 0.649] | 0.069 [0.035, 0.110] | "
        "0.472 [0.363, 0.575] |",
        "| Ensemble (Top 3, shift) | 1.000 [1.000, 1.000] | 0.055 [0.047, 0.064] | "
        "0.601 [0.502, 0.691] | 0.001 [0.000, 0.001] |",
        "(b) cascading randomization, Spearman rho with the trained model's explanation "
        "(20 sentences):",
        "(d) constrained attack, epsilon 2 (8 sentences, at most 50 steps):",
        "## small (2 layers)",
        f"Thesis: {thesis_report.THESIS['attacks']}",
    ]
    assert [line for line in expected if line not in lines] == []
    # every model: its four tables' sections and one line per verdict, as results.json has
    assert lines.count("Verdicts:") == 2 and sum(line.startswith("(d) ") for line in lines) == 8
    for result in summary["models"].values():
        for verdict in result["verdicts"]:
            assert (f"- {'holds' if verdict['holds'] else 'does not hold'}: {verdict['claim']} "
                    f"({verdict['criterion']}; {verdict['evidence']})") in lines
    assert len(lines) == 166
