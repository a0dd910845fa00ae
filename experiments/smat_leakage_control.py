"""The shuffled-text leakage control of a Table 1 cell against the cell's own students.

A guardrail: a learned explainer could raise simulability by writing the
teacher's label into where it puts its mass rather than by explaining. Students trained
with SMaT on the teacher's explanations of each row's tokens in a *shuffled* order
(``smat_table1.py --explanation-source shuffled_text``, same teacher, same seeds, same
shared initialisation) keep such a leak but lose the explanation. This driver pairs those
students by seed with the cell's none / static attention / SMaT students of the same size
and asks, one-sided over seeds: does SMaT beat its own control (then the gain goes with
the text, as an explanation's would), and does the control beat no explainer (what a leak
alone is worth)?

    python experiments/smat_leakage_control.py \\
        --control docs/results/smat_table1_sst2/control_n500_smat.json \\
        --cells docs/results/smat_table1_sst2/n500_none.json \\
            docs/results/smat_table1_sst2/n500_attention_all.json \\
            docs/results/smat_table1_sst2/n500_smat.json \\
        --output-dir runs/smat_leakage_control_sst2

Each file is the ``results.json`` of a `smat_table1.py` call (or its copy under
docs/results). Writes ``table.md`` and ``results.json`` into the output folder.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime
from smat.jobs.simulability_report import cells_report, check_one_teacher, joined_records
from smat.json_files import read_json
from smat.store.run_log import write_json_atomic

CONTROL = "smat_shuffled_text"
# (candidate, baseline): SMaT against its control; the control against the static
# explainer and no explainer (a leak alone would lift it above both)
COMPARISONS = (("smat", CONTROL), (CONTROL, "attention_all"), (CONTROL, "none"),
               ("smat", "attention_all"), ("smat", "none"))


def control_records(control: Mapping[str, Any], cells: Mapping[str, Mapping[str, Any]]
                    ) -> list[dict[str, Any]]:
    """The cells' students (`cells` by file name) of the control's sizes, then the
    control's (as :data:`CONTROL`).

    Raises:
      ValueError: `control` is not a shuffled-text run, the runs used different teachers
        (their students would not be comparable), or a student is in two cell files.
    """
    if control.get("explanation_source") != "shuffled_text":
        raise ValueError("--control must be a smat_table1.py run with --explanation-source "
                         f"shuffled_text; it records {control.get('explanation_source')!r}")
    check_one_teacher({"--control": control, **cells})
    sizes = {record["num_examples"] for record in control["records"]}
    return [*(record for record in joined_records(cells) if record["num_examples"] in sizes),
            *({**record, "explainer": CONTROL} for record in control["records"])]


def run(control_file: str | Path, cell_files: Sequence[str | Path], *,
        output_dir: str | Path) -> dict[str, Any]:
    """Compare, write ``table.md`` and ``results.json``; returns the summary."""
    control = read_json(control_file)
    records = control_records(control, {str(path): read_json(path) for path in cell_files})
    table, comparisons, text = cells_report(records, COMPARISONS)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "table.md").write_text(
        f"Teacher test accuracy {100 * control['teacher_test']['accuracy']:.2f}%. "
        f"`{CONTROL}`: SMaT students trained on the teacher's explanations of each row's "
        "tokens in a shuffled order (a label written into where the mass sits survives; "
        f"the explanation does not).\n\n{text}")
    summary = {"control": str(control_file), "cells": [str(path) for path in cell_files],
               "teacher_test": control["teacher_test"], "table": table,
               "paired_over_seeds": comparisons, "records": records}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", required=True,
                        help="results.json of the shuffled-text control run")
    parser.add_argument("--cells", nargs="+", required=True,
                        help="results.json files of the same teacher's Table 1 cells")
    parser.add_argument("--output-dir", default="runs/smat_leakage_control",
                        help="results folder (default runs/smat_leakage_control)")
    args = parser.parse_args(argv)
    with command_runtime(parser, driver=__file__, resumes=False):
        run(args.control, args.cells, output_dir=args.output_dir)
    print((Path(args.output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
