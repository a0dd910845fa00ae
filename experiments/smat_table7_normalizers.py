"""Table 7 of the SMaT paper: the head-coefficient normalizer of the attention explainers.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§6 and **Table 7** (MLQE, 4,200 training examples, Pearson r): students taught by the
static attention explainers and by SMaT with NORMALIZE (Eq. 11) = sparsemax, softmax,
1.5-entmax or none (identity). The paper finds sparsemax best and softmax / 1.5-entmax
clearly worse. The normalizer applies to the teacher explainer and to the student
explainer alike (the authors' code passes one value to both). With the uniform
initialization every normalizer gives the same static teacher explanation, so for the
static settings only the student explainer changes.

Variants: ``cpu`` uses the Table 1 cpu setup (offline movie-snippets teacher, the same
student settings) at its smallest size, 64 examples, 3 seeds; ``paper`` the Table 1 paper design
(IMDB) at 1,000 examples, 5 seeds (the paper's own Table 7 is on MLQE regression);
``smoke`` the Table 1 smoke layout at one size.

    python experiments/smat_table7_normalizers.py --variant cpu \\
        --table1 runs/smat_table1_cpu --output-dir runs/smat_table7_cpu

``--table1`` reuses the Table 1 run's teacher and its no-explainer and sparsemax students
at this size (same settings, same students); without it they are trained here.

Writes ``config.json``, ``table.md``, ``results.json`` and ``normalizers.png`` (median and
IQR per normalizer and setting). Resumable like Table 1. Measured runtime:
docs/reproduce/smat.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from table1_variants import DATA_DIR_HELP, HUB_DATA, get_config

from smat.cli.experiment import (
    check_data_files,
    command_runtime,
    data_dir_or_hub,
    earlier_run_file,
    parse_variant_args,
    variant_parser,
)
from smat.evaluation.statistics import format_median_iqr, iqr_above_baseline, median_iqr
from smat.jobs.grid import run_grid
from smat.jobs.teacher_run import run_teacher
from smat.markdown import markdown_table
from smat.store.run_log import write_json_atomic
from smat.store.run_record import reused_teacher

NORMALIZERS = ("sparsemax", "softmax", "entmax15", "identity")
SETTINGS = ("attention_all", "attention_last", "smat")
SIZE = {"paper": 1000, "cpu": 64, "smoke": 32}
SEEDS = {"paper": [0, 1, 2, 3, 4], "cpu": [0, 1, 2], "smoke": [0, 1]}

# Table 7 of the paper (MLQE, Pearson r), median [q25:q75].
PAPER_TABLE7 = {
    "none": (".7719 [.7660:.7802]",) * 4,
    "attention_all": (".8193 [.8186:.8280]", ".7345 [.7335:.7390]", ".7152 [.7111:.7161]",
                      ".7781 [.7762:.7791]"),
    "attention_last": (".7720 [.7672:.7726]", ".7697 [.7659:.7715]", ".7807 [.7652:.7821]",
                       ".7768 [.7764:.7807]"),
    "smat": (".8630 [.8412:.8724]", ".7439 [.7430:.7484]", ".7163 [.7130:.7239]",
             ".8002 [.7919:.8100]"),
}


def normalizer_table(records: Mapping[str, Sequence[Mapping[str, Any]]],
                     baseline: Sequence[Mapping[str, Any]], *, scale: float = 100.0) -> str:
    """Markdown table: settings x normalizers, ``median [q25:q75]`` of test accuracy, ``*``
    where the IQR lies above the no-explainer baseline's."""
    base = [r["test"]["accuracy"] for r in baseline]
    rows = [["none", *[format_median_iqr(base, scale=scale)] * len(NORMALIZERS)]]
    for setting in SETTINGS:
        row = [setting]
        for normalizer in NORMALIZERS:
            values = [r["test"]["accuracy"] for r in records[normalizer]
                      if r["explainer"] == setting]
            row.append(format_median_iqr(values, scale=scale)
                       + (" *" if iqr_above_baseline(values, base) else ""))
        rows.append(row)
    return markdown_table(["explainer", *NORMALIZERS], rows)


def plot_normalizers(records: Mapping[str, Sequence[Mapping[str, Any]]], path: Path) -> Path:
    """Median test accuracy with IQR whiskers, one group of bars per setting."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4))
    axes = figure.subplots()
    width = 0.8 / len(NORMALIZERS)
    for j, normalizer in enumerate(NORMALIZERS):
        stats = [median_iqr([100 * r["test"]["accuracy"] for r in records[normalizer]
                             if r["explainer"] == setting]) for setting in SETTINGS]
        median = [float(s.median) for s in stats]
        errors = [[m - float(s.q25) for m, s in zip(median, stats, strict=True)],
                  [float(s.q75) - m for m, s in zip(median, stats, strict=True)]]
        axes.bar([i + j * width for i in range(len(SETTINGS))], median, width, yerr=errors,
                 label=normalizer, capsize=3)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(SETTINGS))], SETTINGS)
    axes.set_ylabel("test simulability (accuracy %)")
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path


def run(variant: str, *, output_dir: str | Path, data_dir: str | None = None,
        teacher_dir: str | Path | None = None, table1_dir: str | Path | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Train (or reuse) the teacher and the students of every normalizer; write the table.

    With `table1_dir` (a ``smat_table1.py`` run of the same variant), the teacher is that
    run's and the no-explainer and sparsemax students are its students at the same size
    (the same settings, so the same students); only the other normalizers are trained.
    """
    config = get_config(variant, data_dir=data_dir)
    if data_dir is not None:
        check_data_files(config.data, data_dir)
    output_dir = Path(output_dir)
    shared = output_dir / "students"
    if table1_dir is not None:
        table1 = earlier_run_file(table1_dir, "config.json", flag="--table1")
        if table1["variant"] != variant:
            raise ValueError(f"{table1_dir} is a {table1['variant']!r} Table 1 run; this is "
                             f"the {variant!r} variant")
        teacher_dir, shared = table1["teacher_dir"], Path(table1_dir) / "students"
    reused = reused_teacher(teacher_dir) if teacher_dir is not None else None
    teacher_dir = Path(teacher_dir) if teacher_dir is not None else output_dir / "teacher"
    size, seeds = SIZE[variant], SEEDS[variant]
    write_json_atomic(output_dir / "config.json", {
        "variant": variant, "teacher_dir": str(teacher_dir), "size": size, "seeds": seeds,
        "normalizers": NORMALIZERS, "settings": SETTINGS, "shared_students": str(shared),
        "student": dataclasses.asdict(config.student)})
    start = time.perf_counter()
    (teacher,) = [reused] if reused else run_teacher(
        data=config.data, train=config.teacher, output_dir=teacher_dir,
        progress=progress)
    # the configuration's own normalizer (sparsemax) last: its students may be shared
    order = [n for n in NORMALIZERS if n != config.student.normalizer]
    records = {normalizer: run_grid(
        teacher_dir, sizes=[size], explainers=SETTINGS, seeds=seeds,
        student=dataclasses.replace(config.student, normalizer=normalizer),
        output_dir=output_dir / "students" / normalizer, progress=progress)
        for normalizer in order}
    records[config.student.normalizer] = run_grid(
        teacher_dir, sizes=[size], explainers=SETTINGS, seeds=seeds, student=config.student,
        output_dir=shared, progress=progress)
    records = {normalizer: records[normalizer] for normalizer in NORMALIZERS}
    baseline = run_grid(teacher_dir, sizes=[size], explainers=["none"], seeds=seeds,
                        student=config.student, output_dir=shared, progress=progress)
    table = normalizer_table(records, baseline)
    paper = markdown_table(["explainer", *NORMALIZERS],
                           [[name, *cells] for name, cells in PAPER_TABLE7.items()])
    (output_dir / "table.md").write_text(
        f"Teacher test accuracy {100 * teacher['test']['accuracy']:.2f}%.\n\n"
        f"Measured ({variant}, n={size}, accuracy %):\n\n{table}\n\n"
        f"Paper (MLQE, 4,200 examples, Pearson r):\n\n{paper}\n")
    plot_normalizers(records, output_dir / "normalizers.png")
    summary = {"variant": variant, "size": size, "table": table, "baseline": baseline,
               "records": records, "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_table7",
                            data_dir_help=DATA_DIR_HELP, reuses_teacher=True)
    parser.add_argument("--table1", default=None,
                        help="a smat_table1.py run of the same variant: reuse its teacher and "
                             "its no-explainer and sparsemax students")
    args = parse_variant_args(parser, argv)
    output_dir = args.output_dir
    with command_runtime(parser, driver=__file__):
        data_dir = data_dir_or_hub(args.data_dir, HUB_DATA.get(args.variant))
        summary = run(args.variant, output_dir=output_dir, data_dir=data_dir,
                      teacher_dir=args.teacher, table1_dir=args.table1,
                      progress=not args.no_progress)
    print((Path(output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
