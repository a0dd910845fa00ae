"""Why SMaT does or does not beat static attention: SMaT students with one setting changed.

A question about Table 1 of Fernandes et al, "Learning to Scaffold" (2022): when
the learned explainer does not teach better than the static all-layers attention it starts
from, is it because its head coefficients hardly move (too few or too small outer steps),
because the outer update moves them the wrong way, or because the students stop before
the explanation loss matters? This file trains students at one size of a finished
``smat_table1.py`` run (same teacher, same seeds, same student settings) with one setting
changed at a time, and compares each change's SMaT students, paired by seed, with static
attention and no-explainer students trained under the same change (or Table 1's, where the
change does not alter them: :data:`AFFECTS`), with the diagnostics of
:func:`smat_table1.smat_diagnostics`.

    python experiments/smat_table1.py --variant cpu --seeds 0 1 2 3 4 \\
        --explainers none attention_all smat --sizes 64 --output-dir runs/smat_table1_cpu5
    python experiments/smat_sweep.py --table1 runs/smat_table1_cpu5 --size 64 \\
        --explainers none attention_all smat --output-dir runs/smat_sweep_cpu5

The changes (:func:`changes`): the outer (Adam) learning rate x10 and x100, beta 1 instead of 5,
twice the epochs (twice the meta steps), and the meta update every 2nd step. Writes
``table.md`` and ``results.json``; resumable. Measured runtime: docs/reproduce/smat.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime, earlier_run_file
from smat.evaluation.statistics import format_median_iqr, iqr_above_baseline
from smat.jobs.grid import cell_dir, run_grid
from smat.jobs.shares import join_shares, parse_share
from smat.jobs.simulability_report import diagnostics_table, paired_comparisons, smat_diagnostics
from smat.parallel import JOIN_TIMEOUT
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig, with_loop
from smat.training.scaffold import ScaffoldConfig
from smat.training.student import OUTER_LEARNING_RATE, StudentTrainConfig

# SMaT and the settings its students are compared with
COMPARED = ("none", "attention_all", "smat")


def changes(student: StudentTrainConfig) -> dict[str, StudentTrainConfig]:
    """The settings tried, each one change from the Table 1 student config."""
    outer = student.outer_learning_rate or OUTER_LEARNING_RATE["classification"]
    return {
        "outer_lr_x10": dataclasses.replace(student, outer_learning_rate=10 * outer),
        "outer_lr_x100": dataclasses.replace(student, outer_learning_rate=100 * outer),
        "beta_1": dataclasses.replace(student, beta=1.0),
        "epochs_x2": with_loop(student, max_epochs=2 * student.loop.max_epochs),
        "meta_interval_2": dataclasses.replace(student, meta_interval=2),
    }


# The settings each change can alter: the outer rate and the meta interval act only on the
# learned explainer's coefficients, beta on every explanation loss (not on "none", whose
# beta is 0), the epochs on every student. A setting a change leaves alone keeps its
# Table 1 students as its control, rather than training identical ones again.
AFFECTS = {"outer_lr_x10": ("smat",), "outer_lr_x100": ("smat",),
           "meta_interval_2": ("smat",), "beta_1": ("attention_all", "smat"),
           "epochs_x2": COMPARED}


def run(table1_dir: str | Path, *, size: int, output_dir: str | Path,
        names: Sequence[str] | None = None, explainers: Sequence[str] = ("smat",),
        progress: bool = True, share: tuple[int, int] = (0, 1),
        join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Train the changed students (or reuse them) and write the comparison.

    ``explainers`` are the settings each change is applied to where it alters them
    (:data:`AFFECTS`): SMaT by default; add ``none`` and ``attention_all`` to compare each
    change's SMaT students with controls trained under the same change (twice the epochs
    help every student, say). Each change's SMaT students are paired by seed with its
    static-attention and no-explainer students, changed or Table 1's.

    With ``share=(i, n)`` the changes that train students are dealt out to n processes
    over a shared `output_dir` (the k-th to share k mod n); each trains its changes' students
    and share 0 then waits (at most `join_timeout` seconds) for the others', reads them back
    and writes the comparison. A share other than 0 returns ``{"share", "changes"}``.
    """
    table1_dir, output_dir = Path(table1_dir), Path(output_dir)
    config = earlier_run_file(table1_dir, "config.json", flag="--table1")
    student = StudentTrainConfig(**{**config["student"],
                                    "loop": LoopConfig(**config["student"]["loop"])})
    tried = changes(student)
    names = list(tried) if names is None else list(names)
    unknown = sorted(set(names) - set(tried))
    if unknown:
        raise ValueError(f"unknown changes {unknown}; choose from {list(tried)}")
    seeds, teacher_dir = config["seeds"], config["teacher_dir"]
    start = time.perf_counter()

    def changed_of(name: str) -> list[str]:
        return [e for e in explainers if e in AFFECTS[name]]

    def grid(name: str) -> list[dict[str, Any]]:
        return run_grid(teacher_dir, sizes=[size], explainers=changed_of(name), seeds=seeds,
                        student=tried[name], output_dir=output_dir / name, progress=progress)

    if share[1] > 1:
        training = [name for name in names if changed_of(name)]
        mine = training[share[0]::share[1]]
        for name in mine:
            grid(name)
        if share[0] != 0:
            return {"share": f"{share[0]}/{share[1]}", "changes": mine}
        join_shares(training, lambda name: all(
            (cell_dir(output_dir / name, num_examples=size, explainer=e, seed=seed)
             / "result.json").is_file() for e in changed_of(name) for seed in seeds),
            share=share, timeout=join_timeout,
            describe=lambda left: f"the students of {', '.join(left)}")
    table1 = run_grid(teacher_dir, sizes=[size], explainers=list(COMPARED), seeds=seeds,
                      student=student, output_dir=table1_dir / "students", progress=progress)
    cells = {"table1": {e: [r for r in table1 if r["explainer"] == e] for e in COMPARED}}
    trained = {"table1": set(COMPARED)}
    for name in names:
        changed = changed_of(name)
        records = grid(name) if changed else []
        cells[name] = {e: [r for r in records if r["explainer"] == e] if e in changed
                       else cells["table1"][e] for e in COMPARED}
        trained[name] = set(changed)
    # each change's SMaT students live in its folder when it trained them, else in Table 1's
    diagnostics = {name: smat_diagnostics(
        cell["smat"], output_dir / name if name != "table1" and "smat" in trained[name]
        else table1_dir / "students", outer_clip_norm=ScaffoldConfig().outer_clip_norm)
        for name, cell in cells.items()}
    comparisons = {name: paired_comparisons([r for e in COMPARED for r in cell[e]])
                   for name, cell in cells.items()}
    table = sweep_table(size, cells, trained, comparisons, diagnostics)
    details = "\n\n".join(f"{name}:\n\n{diagnostics_table(rows)}"
                          for name, rows in diagnostics.items())
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "table.md").write_text(f"{table}\n\n{details}\n")
    summary = {"size": size, "table": table, "cells": cells,
               "trained": {name: sorted(settings) for name, settings in trained.items()},
               "paired_over_seeds": comparisons, "diagnostics": diagnostics,
               "changes": {name: dataclasses.asdict(tried[name]) for name in names},
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def sweep_table(size: int, cells: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]],
                trained: Mapping[str, set[str]],
                comparisons: Mapping[str, Sequence[Mapping[str, Any]]],
                diagnostics: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """One row per change: each setting's simulability (``=`` marks Table 1's students, used
    where the change does not alter or train that setting), SMaT against its own controls
    paired over seeds, and how far its head coefficients moved."""
    lines = [f"| change (n={size}) | none | attention_all | smat | smat - attention_all: "
             "median, wins, p | smat IQR above attention_all's | smat - none: median, wins | "
             "mean non-zero heads | mean L1 from uniform |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, cell in cells.items():
        values = {e: [r["test"]["accuracy"] for r in cell[e]] for e in COMPARED}
        shown = [format_median_iqr(values[e], scale=100.0)
                 + ("" if name == "table1" or e in trained[name] else " =") for e in COMPARED]
        paired = {row["baseline"]: row for row in comparisons[name]
                  if row["candidate"] == "smat"}
        static, bare = paired["attention_all"], paired["none"]
        rows = diagnostics[name]
        above = "yes" if iqr_above_baseline(values["smat"], values["attention_all"]) else "no"
        lines.append(
            f"| {name} | {' | '.join(shown)} | {100 * static['median_difference']:+.2f}, "
            f"{static['wins']}/{static['num_models']}, {static['p_value']:.3f} | {above} | "
            f"{100 * bare['median_difference']:+.2f}, {bare['wins']}/{bare['num_models']} | "
            f"{sum(d['nonzero_heads'] for d in rows) / len(rows):.1f}/{rows[0]['num_heads']} | "
            f"{sum(d['head_l1_from_uniform'] for d in rows) / len(rows):.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table1", required=True, help="a finished smat_table1.py folder")
    parser.add_argument("--size", type=int, required=True, help="student training size")
    parser.add_argument("--changes", nargs="+", default=None,
                        help="which changes to train (default: all of changes())")
    parser.add_argument("--explainers", nargs="+", default=["smat"],
                        choices=COMPARED,
                        help="the settings each change is applied to where it alters them "
                             "(default: smat; add none attention_all for controls trained "
                             "under the same change)")
    parser.add_argument("--output-dir", default="runs/smat_sweep")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument("--share", default="0/1", metavar="I/N",
                        help="train only the changes of share I of N (every N-th change that "
                             "trains students, from the I-th), one share per process or host "
                             "over a shared --output-dir; share 0 waits for the others' "
                             "students and writes the comparison")
    parser.add_argument("--join-timeout", type=float, default=JOIN_TIMEOUT,
                        help="seconds share 0 waits for the other shares' students")
    args = parser.parse_args(argv)
    with command_runtime(parser, driver=__file__):
        summary = run(args.table1, size=args.size, output_dir=args.output_dir,
                      names=args.changes, explainers=args.explainers,
                      progress=not args.no_progress, share=parse_share(args.share),
                      join_timeout=args.join_timeout)
    if "share" in summary:
        print(f"share {summary['share']}: the students of "
              f"{', '.join(summary['changes']) or 'no change'} are finished; share 0 writes "
              "the comparison")
        return
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
