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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime
from smat.jobs.simulability_report import (
    cells_report,
    check_one_teacher,
    joined_records,
    plot_figure5,
)
from smat.json_files import read_json
from smat.store.run_log import write_json_atomic


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
    with command_runtime(parser, driver=__file__, resumes=False):
        run(args.cells, output_dir=args.output_dir)
    print((Path(args.output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
