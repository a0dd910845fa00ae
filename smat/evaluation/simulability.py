"""Simulability across data sizes: the grid of students behind the SMaT paper's Table 1.

Simulability (paper Eq. 1) is the agreement of a student with the teacher on held-out data:
accuracy against the teacher's predictions for classification, Pearson r for regression.
The grid of students itself is trained by :func:`smat.jobs.grid.run_grid`; here are the
pure summaries of its records. :func:`simulability_table` prints the paper's layout,
``median [q25:q75]`` over seeds, marking with ``*`` the cells whose IQR lies above the
no-explainer baseline's.

References:
  Fernandes et al, `Learning to Scaffold: Optimizing Model Explanations for Teaching
  <https://arxiv.org/abs/2204.10810>`_, 2022, **Eq. 1**, **Table 1**.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.evaluation.statistics import (
    format_median_iqr,
    iqr_above_baseline,
    median_iqr,
    wilcoxon_greater,
)

BASELINE = "none"


def _grouped(records: Sequence[Mapping[str, Any]], metric: str) -> dict[tuple[str, int],
                                                                       list[float]]:
    cells: dict[tuple[str, int], list[float]] = {}
    for record in records:
        key = (record["explainer"], record["num_examples"])
        cells.setdefault(key, []).append(float(record["test"][metric]))
    return cells


def simulability_table(records: Sequence[Mapping[str, Any]], *, metric: str = "accuracy",
                       scale: float = 100.0, digits: int = 2) -> str:
    """Markdown table: explainers x sizes, ``median [q25:q75]`` of test simulability.

    A ``*`` marks cells whose IQR lies entirely above that of the "none" baseline at the
    same size (the paper's Table 1 marking).

    Args:
      records: results of :func:`run_grid` (or :func:`smat.jobs.student_run.run_student`).
      metric: "accuracy" (classification) or "pearson" (regression).
      scale: factor applied before printing (100 prints percentages).
      digits: decimals.

    Raises:
      ValueError: no records.
    """
    if not records:
        raise ValueError("no results to tabulate")
    cells = _grouped(records, metric)
    sizes = sorted({size for _, size in cells})
    explainers = list(dict.fromkeys(explainer for explainer, _ in cells))
    lines = ["| explainer | " + " | ".join(f"n={size}" for size in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for explainer in explainers:
        row = []
        for size in sizes:
            values = cells.get((explainer, size))
            if values is None:
                row.append("–")
                continue
            baseline = cells.get((BASELINE, size))
            marked = (explainer != BASELINE and baseline is not None
                      and iqr_above_baseline(values, baseline))
            row.append(format_median_iqr(values, scale=scale, digits=digits)
                       + (" *" if marked else ""))
        lines.append(f"| {explainer} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def paired_seed_comparison(records: Sequence[Mapping[str, Any]], *, candidate: str,
                           baseline: str, metric: str = "accuracy") -> list[dict[str, Any]]:
    """Is `candidate` better than `baseline`, with trained models as the unit of evidence?

    A setting's claim is about how students are trained, so each student (one seed) is one
    observation: per size, the students of the two settings are paired by seed (with one
    shared initialisation the seed fixes the data order, dropout and validation draws, so
    a pair differs only in the setting) and a one-sided Wilcoxon signed-rank test asks
    whether the candidate's simulability is higher. With 5 seeds the smallest attainable
    p-value is 1/32.

    Returns:
      One row per size where both settings have students: ``num_examples``,
      ``num_models`` (pairs), ``median_difference`` (candidate - baseline), ``wins`` (pairs
      where the candidate is higher), ``p_value``.

    Raises:
      ValueError: a seed present in one setting only, at some size.
    """
    by_seed: dict[tuple[str, int], dict[int, float]] = {}
    for record in records:
        by_seed.setdefault((record["explainer"], record["num_examples"]), {})[
            int(record["seed"])] = float(record["test"][metric])
    rows = []
    for size in sorted({size for _, size in by_seed}):
        if (candidate, size) not in by_seed or (baseline, size) not in by_seed:
            continue
        ours, theirs = by_seed[candidate, size], by_seed[baseline, size]
        if set(ours) != set(theirs):
            raise ValueError(f"n={size}: {candidate!r} has seeds {sorted(ours)} but "
                             f"{baseline!r} has {sorted(theirs)}; pair the same seeds")
        seeds = sorted(ours)
        x = np.array([ours[s] for s in seeds])
        y = np.array([theirs[s] for s in seeds])
        rows.append({"num_examples": size, "num_models": len(seeds),
                     "median_difference": float(np.median(x - y)),
                     "wins": int((x > y).sum()), "p_value": wilcoxon_greater(x, y).p_value})
    return rows


def plot_simulability(records: Sequence[Mapping[str, Any]], path: str | Path, *,
                      metric: str = "accuracy") -> Path:
    """Plot median simulability against student data size with IQR bands, one line each."""
    from matplotlib.figure import Figure

    cells = _grouped(records, metric)
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for explainer in dict.fromkeys(explainer for explainer, _ in cells):
        sizes = sorted(size for name, size in cells if name == explainer)
        stats = [median_iqr(cells[(explainer, size)]) for size in sizes]
        median = np.array([float(s.median) for s in stats])
        axes.plot(sizes, median, marker="o", label=explainer)
        axes.fill_between(sizes, [float(s.q25) for s in stats], [float(s.q75) for s in stats],
                          alpha=0.2)
    axes.set_xlabel("student training examples")
    axes.set_ylabel(f"test simulability ({metric})")
    axes.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
