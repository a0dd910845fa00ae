"""Why SMaT does or does not beat static attention: SMaT students with one setting changed.

Issue 18's question about Table 1 of Fernandes et al, "Learning to Scaffold" (2022): when
the learned explainer does not teach better than the static all-layers attention it starts
from, is it because its head coefficients hardly move (too few or too small outer steps),
because the outer update moves them the wrong way, or because the students stop before
the explanation loss matters? This file trains SMaT students at one size of a finished
``smat_table1.py`` run (same teacher, same seeds, same student settings) with one setting
changed at a time, and tabulates them beside that run's no-explainer, static-attention and
SMaT students, with the diagnostics of :func:`smat_table1.smat_diagnostics`.

    python experiments/smat_sweep.py --table1 runs/smat_table1_cpu --size 128 \\
        --output-dir runs/smat_sweep_cpu

The changes (:func:`changes`): the outer (Adam) learning rate x10 and x100, beta 1 instead of 5,
twice the epochs (twice the meta steps), and the meta update every 2nd step. Writes
``table.md`` and ``results.json``; resumable. Measured runtime: docs/reproduce/smat.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat_table1 import diagnostics_table, smat_diagnostics

from smat.evaluation.statistics import format_median_iqr, iqr_above_baseline
from smat.jobs.grid import run_grid
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig, with_loop
from smat.training.scaffold import ScaffoldConfig
from smat.training.student import OUTER_LEARNING_RATE, StudentTrainConfig


def changes(student: StudentTrainConfig) -> dict[str, StudentTrainConfig]:
    """The SMaT settings tried, each one change from the Table 1 student config."""
    smat = dataclasses.replace(student, explainer="smat")
    outer = student.outer_learning_rate or OUTER_LEARNING_RATE["classification"]
    return {
        "outer_lr_x10": dataclasses.replace(smat, outer_learning_rate=10 * outer),
        "outer_lr_x100": dataclasses.replace(smat, outer_learning_rate=100 * outer),
        "beta_1": dataclasses.replace(smat, beta=1.0),
        "epochs_x2": with_loop(smat, max_epochs=2 * student.loop.max_epochs),
        "meta_interval_2": dataclasses.replace(smat, meta_interval=2),
    }


def run(table1_dir: str | Path, *, size: int, output_dir: str | Path,
        names: Sequence[str] | None = None, explainers: Sequence[str] = ("smat",),
        progress: bool = True) -> dict[str, Any]:
    """Train the changed students (or reuse them) and write the comparison.

    ``explainers`` are the settings each change is applied to: SMaT by default; add
    ``none`` and ``attention_all`` to tell whether a change (more epochs, say) helps SMaT or
    every student alike.
    """
    table1_dir, output_dir = Path(table1_dir), Path(output_dir)
    config = json.loads((table1_dir / "config.json").read_text())
    student = StudentTrainConfig(**{**config["student"],
                                    "loop": LoopConfig(**config["student"]["loop"])})
    tried = changes(student)
    names = list(tried) if names is None else list(names)
    unknown = sorted(set(names) - set(tried))
    if unknown:
        raise ValueError(f"unknown changes {unknown}; choose from {list(tried)}")
    seeds, teacher_dir = config["seeds"], config["teacher_dir"]
    start = time.perf_counter()
    reference = run_grid(teacher_dir, sizes=[size], explainers=["none", "attention_all", "smat"],
                         seeds=seeds, student=student, output_dir=table1_dir / "students",
                         progress=progress)
    records = {"table1 " + r["explainer"]: [] for r in reference}
    for r in reference:
        records["table1 " + r["explainer"]].append(r)
    diagnostics = {"table1 smat": smat_diagnostics(
        records["table1 smat"], table1_dir / "students",
        outer_clip_norm=ScaffoldConfig().outer_clip_norm)}
    for name in names:
        trained = run_grid(teacher_dir, sizes=[size], explainers=list(explainers), seeds=seeds,
                           student=tried[name], output_dir=output_dir / name,
                           progress=progress)
        for explainer in explainers:
            # the SMaT row keeps the change's bare name, as in the first sweeps
            row = name if explainer == "smat" else f"{name} {explainer}"
            records[row] = [r for r in trained if r["explainer"] == explainer]
        if "smat" in explainers:
            diagnostics[name] = smat_diagnostics(
                records[name], output_dir / name,
                outer_clip_norm=ScaffoldConfig().outer_clip_norm)
    static = [r["test"]["accuracy"] for r in records["table1 attention_all"]]
    lines = [f"| setting (n={size}) | test simulability | above attention_all IQR | "
             "mean non-zero heads | mean L1 from uniform |", "|---|---|---|---|---|"]
    for name, cell in records.items():
        values = [r["test"]["accuracy"] for r in cell]
        rows = diagnostics.get(name, [])
        heads = (f"{sum(d['nonzero_heads'] for d in rows) / len(rows):.1f}/"
                 f"{rows[0]['num_heads']}" if rows else "–")
        moved = f"{sum(d['head_l1_from_uniform'] for d in rows) / len(rows):.3f}" if rows else "–"
        above = "–" if name == "table1 attention_all" else (
            "yes" if iqr_above_baseline(values, static) else "no")
        lines.append(f"| {name} | {format_median_iqr(values, scale=100.0)} | {above} | "
                     f"{heads} | {moved} |")
    table = "\n".join(lines)
    details = "\n\n".join(f"{name}:\n\n{diagnostics_table(rows)}"
                          for name, rows in diagnostics.items())
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "table.md").write_text(f"{table}\n\n{details}\n")
    summary = {"size": size, "table": table, "records": records, "diagnostics": diagnostics,
               "changes": {name: dataclasses.asdict(tried[name]) for name in names},
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table1", required=True, help="a finished smat_table1.py folder")
    parser.add_argument("--size", type=int, required=True, help="student training size")
    parser.add_argument("--changes", nargs="+", default=None,
                        help="which changes to train (default: all of changes())")
    parser.add_argument("--explainers", nargs="+", default=["smat"],
                        choices=("none", "attention_all", "attention_last", "smat"),
                        help="the settings each change is applied to (default: smat)")
    parser.add_argument("--output-dir", default="runs/smat_sweep")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    args = parser.parse_args(argv)
    summary = run(args.table1, size=args.size, output_dir=args.output_dir, names=args.changes,
                  explainers=args.explainers, progress=not args.no_progress)
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
