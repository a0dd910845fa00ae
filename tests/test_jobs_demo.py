"""The demo's configuration end to end at a smoke size (the tiny teacher, 32 students)."""

import dataclasses
import json

import numpy as np

from smat.jobs.demo import DEMO_STUDENT, run_demo, summary_markdown, top_heads
from smat.training.loop import with_loop


def test_the_demo_configuration_runs_and_reports_what_it_shows(tiny_teacher, tmp_path,
                                                                capsys):
    """DEMO_STUDENT as it is, cut to one epoch: the table, the paired comparisons, the median
    SMaT student's head coefficients (figure and largest heads) and the explanation page,
    where attention is drawn as a distribution."""
    student = with_loop(DEMO_STUDENT, max_epochs=1)
    assert dataclasses.replace(student, loop=DEMO_STUDENT.loop) == DEMO_STUDENT
    summary = run_demo(tmp_path / "demo", teacher_dir=tiny_teacher, num_examples=32,
                       seeds=(0, 1), student=student, progress=False)
    printed = capsys.readouterr().out
    assert summary["table"] in printed and "SMaT's largest head coefficients" in printed
    assert [(r["candidate"], r["baseline"], r["num_models"])
            for r in summary["paired_over_seeds"]] == [("smat", "attention_all", 2),
                                                       ("attention_all", "none", 2)]
    smat = {r["seed"]: r for r in summary["students"] if r["explainer"] == "smat"}
    median = smat[summary["median_smat_seed"]]
    assert median["test"]["accuracy"] == sorted(
        (r["test"]["accuracy"], r["seed"]) for r in smat.values())[0][0]
    assert summary["top_heads"] == top_heads(np.asarray(median["head_weights"]))
    assert (tmp_path / "demo" / "head_weights.png").stat().st_size > 0
    page = (tmp_path / "demo" / "explanations.html").read_text()
    assert "<b>attention_all, smat (learned)</b>: attention distribution" in page
    saved = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert (tmp_path / "demo" / "summary.md").read_text() == summary_markdown(saved)


def test_top_heads_are_the_largest_coefficients_in_order():
    weights = np.zeros((2, 3))
    weights[1, 2], weights[0, 1], weights[1, 0] = 0.5, 0.3, 0.2
    assert top_heads(weights, 2) == [{"layer": 1, "head": 2, "weight": 0.5},
                                     {"layer": 0, "head": 1, "weight": 0.3}]
