"""One Table 1 from cells trained in separate calls of `smat_table1.py`, from one teacher.

A call with ``--explainers X --sizes N`` trains one cell (the SST-2 queue trains a cell a
call, hours each), and its ``results.json`` pairs only the settings it trained. This driver
joins the cells' students, refuses cells of different teachers (their test scores differ,
or their records name other teacher weights), and writes the table, each setting's seeds
(a setting still being trained, such as gradient, may have fewer), the paired tests over
seeds (SMaT against static attention and no explainer, static attention against no
explainer; each student one observation), the steps and training time each student took,
and Figure 5 (the median SMaT student's head coefficients):

    python experiments/smat_table1_cells.py \\
        --cells docs/results/smat_table1_sst2/n1000/teacher_742acae66bdb9b61/*.json \\
        --output-dir runs/smat_table1_sst2_n1000

Each file is the ``results.json`` of a `smat_table1.py` call (or its copy under
docs/results). Writes ``table.md``, ``results.json`` and (with SMaT students)
``head_weights.png`` into the output folder.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from command_line import command_runtime
from smat_table1 import COMPARISONS, comparisons_table, per_student_table, plot_figure5

from smat.evaluation.simulability import paired_seed_comparison, simulability_table
from smat.json_files import read_json
from smat.store.run_log import write_json_atomic


def check_one_teacher(runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse runs (by file name) whose students learned from different teachers: the
    teachers' test scores differ, or the students' records name different teacher weights
    (``teacher_params``; records written before it was kept name none).

    Raises:
      ValueError: naming each file's teacher test accuracy and weights.
    """
    def weights(run: Mapping[str, Any]) -> set[str]:
        return {record["teacher_params"] for record in run["records"]
                if record.get("teacher_params")}

    scores = {repr(run.get("teacher_test")) for run in runs.values()}
    if len(scores) > 1 or len(set().union(*map(weights, runs.values()))) > 1:
        listed = "; ".join(
            f"{name}: test accuracy {run.get('teacher_test', {}).get('accuracy')}, weights "
            f"{', '.join(sorted(weights(run))) or 'not recorded'}" for name, run in runs.items())
        raise ValueError(f"the runs were trained from different teachers ({listed}); pair "
                         "only the cells of one teacher")


def joined_records(runs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every student of `runs` (by file name), once.

    Raises:
      ValueError: a student (setting, size, seed) in two files, or twice in one.
    """
    seen: dict[tuple[str, int, int], str] = {}
    records = []
    for name, run in runs.items():
        for record in run["records"]:
            key = (record["explainer"], record["num_examples"], record["seed"])
            if key in seen:
                raise ValueError(f"the {key[0]} student of n={key[1]}, seed {key[2]} is in "
                                 f"{seen[key]} and in {name}: list each cell once")
            seen[key] = name
            records.append(record)
    return records


def seeds_per_setting(records: Sequence[Mapping[str, Any]]) -> str:
    """One line per size naming each setting's seeds: the table's medians do not say that a
    setting still being trained (a cell a call) has fewer students than the others."""
    seeds: dict[int, dict[str, list[int]]] = {}
    for record in records:
        seeds.setdefault(record["num_examples"], {}).setdefault(
            record["explainer"], []).append(record["seed"])
    return "\n".join(
        f"Seeds at n={size}: " + "; ".join(f"{explainer} {', '.join(map(str, sorted(found)))}"
                                         for explainer, found in sorted(by_setting.items())) + "."
        for size, by_setting in sorted(seeds.items()))


def cells_report(records: Sequence[Mapping[str, Any]],
                 comparisons: Sequence[tuple[str, str]] = COMPARISONS
                 ) -> tuple[str, list[dict[str, Any]], str]:
    """(the simulability table, the paired tests of `comparisons` (candidate, baseline)
    whose two settings both have students, and the three as markdown with the steps)."""
    present = {record["explainer"] for record in records}
    paired = [{"candidate": candidate, "baseline": baseline, **row}
              for candidate, baseline in comparisons if {candidate, baseline} <= present
              for row in paired_seed_comparison(records, candidate=candidate,
                                                baseline=baseline)]
    table = simulability_table(records)
    hours = sum(record["train_seconds"] for record in records) / 3600
    text = (f"Test simulability, median [q25:q75] over seeds (`*`: IQR above no explainer's):"
            f"\n\n{table}\n\n"
            f"{seeds_per_setting(records)}\n\nPaired over "
            f"seeds (one-sided Wilcoxon signed-rank, one trained student per seed):\n\n"
            f"{comparisons_table(paired)}\n\nTraining steps per student (median "
            f"[min:max]):\n\n{per_student_table(records)}\n\nTraining time per student, "
            f"seconds (median [min:max]; {hours:.1f} h for all {len(records)}, each on "
            f"the machine that trained it):\n\n{per_student_table(records, 'train_seconds')}\n")
    return table, paired, text


def run(cell_files: Sequence[str | Path], *, output_dir: str | Path) -> dict[str, Any]:
    """Join, check, compare; write ``table.md`` and ``results.json``; returns the summary."""
    runs = {str(path): read_json(path) for path in cell_files}
    check_one_teacher(runs)
    records = joined_records(runs)
    table, paired, text = cells_report(records)
    teacher_test = next(iter(runs.values()))["teacher_test"]
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    figure5 = plot_figure5(records, output_dir / "head_weights.png")
    if figure5:
        text += (f"\nFigure 5 (`head_weights.png`): the median SMaT student (seed "
                 f"{figure5['figure5_seed']}) keeps {figure5['figure5_nonzero_heads']} heads, "
                 f"the largest coefficient {figure5['figure5_max_weight']:.3f}.\n")
    (output_dir / "table.md").write_text(
        f"Teacher test accuracy {100 * teacher_test['accuracy']:.2f}%.\n\n{text}")
    summary = {"cells": list(runs), "teacher_test": teacher_test, "table": table,
               "paired_over_seeds": paired, **figure5, "records": records}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", required=True,
                        help="results.json files of one teacher's Table 1 cells")
    parser.add_argument("--output-dir", default="runs/smat_table1_cells",
                        help="results folder (default runs/smat_table1_cells)")
    args = parser.parse_args(argv)
    with command_runtime(parser, resumes=False):
        run(args.cells, output_dir=args.output_dir)
    print((Path(args.output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
