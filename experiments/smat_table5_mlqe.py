"""Table 5 of the SMaT paper: simulability (Pearson) on MT quality estimation, MLQE-PE.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§5.3 and **Table 5**: a regression teacher (XLM-R-base) reads a source sentence and its
machine translation as a text pair and predicts the translation's direct-assessment score;
students trained on 2,100 / 4,200 / 8,400 pairs (5% / 10% / 20% of the 42,000 training
pairs of six language pairs, sampled from the teacher's own training set) with no
explainer, the static explainers and SMaT; simulability is the Pearson correlation between
student and teacher outputs on the test set; ``median [q25:q75]`` over 5 seeds.

What smat has offline, and what that changes (stated in every table this file writes):

- data: ``--data-dir`` (``data/mlqe_pe``) holds three of the paper's six pairs
  (en-de, et-en, ro-en; 7,000 training pairs each). The texts are the post-editing
  release's tokenized source / MT lines (the words the word-level tags of Table 6 refer
  to) and the target is the DA ``z_mean`` of the same line.
- split: the teacher trains on every MLQE training pair (10% of them for its early
  stopping); the students' pool is the teacher's training rows
  (``StudentTrainConfig.student_pool = "teacher_train"``, the paper's protocol for this
  task), their validation and test rows come from MLQE's dev and test20 pairs, which the
  teacher never saw (its test metric is read on the same test rows).
- encoder: all-MiniLM-L6-v2 (6 layers x 12 heads, English vocabulary), not XLM-R-base
  (12 x 12, multilingual), which is not available offline. It reads the English side of
  each pair (the source of en-de, the translation of et-en and ro-en) and splits German,
  Estonian and Romanian words into word pieces it has no pretrained meaning for, so its
  teacher is weaker than the paper's (0.63 Pearson).

Variants (``get_config``):

- ``paper`` (for a GPU): the three pairs (21,000 training pairs), max length 128, student
  sizes 1,050 / 2,100 / 4,200 (the paper's 5% / 10% / 20%), 5 seeds, the seven settings;
  the authors' regression recipe (batch 16, patience 5, no practical epoch cap; outer Adam
  2e-4, ``smat.training.student.OUTER_LEARNING_RATE``).
- ``cpu`` (2 CPU cores): en-de only, max length 96, sizes 350 / 700 (5% / 10% of its 7,000
  training pairs), 3 seeds trained as one vmapped program, settings none /
  attention_all / smat, at most 4 student epochs with SGD 0.05 as in Table 1's cpu variant.
- ``smoke``: the cpu layout shrunk to one size, two seeds and one epoch, for the tests.

Commands (resumable: a killed run restarts at the first unfinished student):

    python experiments/smat_table5_mlqe.py --variant cpu --data-dir data/mlqe_pe
    python experiments/smat_table5_mlqe.py --variant paper --data-dir data/mlqe_pe

Writes into the output folder: ``data/`` (the pairs as CSV files the teacher run reads),
``config.json``, ``table.md`` (measured and paper tables), ``results.json`` and
``simulability.png``; ``students/n{SIZE}/smat/seed{S}/explainer`` are the learned
explainers that Table 6's plausibility reads.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from command_line import command_runtime, parse_variant_args, variant_parser
from smat_table1 import (
    comparisons_table,
    paired_comparisons,
    paper_table,
    per_student_table,
    plot_figure5,
)

from smat.data.mlqe import load_mlqe
from smat.data.protocol import DataConfig
from smat.evaluation.simulability import plot_simulability, simulability_table
from smat.jobs.grid import run_grid
from smat.jobs.teacher_run import run_teacher
from smat.models import ModelSource
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

SETTINGS = ("none", "gradient", "input_x_gradient", "integrated_gradients", "attention_all",
            "attention_last", "smat")
VARIANTS = ("paper", "cpu", "smoke")
METRIC = "pearson"

# Table 5 of the paper (MLQE-PE, six pairs, XLM-R-base), median [q25:q75] Pearson at
# 2,100 / 4,200 / 8,400 students' training pairs.
PAPER_TABLE5 = {
    "none": (".7457 [.7366:.7528]", ".7719 [.7660:.7802]", ".7891 [.7860:.7964]"),
    "gradient": (".8065 [.8038:.8268]", ".8535 [.7117:.8544]", ".8638 [.8411:.8657]"),
    "input_x_gradient": (".6846 [.6781:.6894]", ".6922 [.6885:.6965]", ".7141 [.7136:.7147]"),
    "integrated_gradients": (".6686 [.6677:.6694]", ".7086 [.6994:.7101]",
                             ".7036 [.6976:.7037]"),
    "attention_all": (".8120 [.7955:.8125]", ".8193 [.8186:.8280]", ".8467 [.8464:.8521]"),
    "attention_last": (".7486 [.7484:.7534]", ".7720 [.7672:.7726]", ".7798 [.7717:.7814]"),
    "smat": (".8156 [.8096:.8183]", ".8630 [.8412:.8724]", ".8561 [.8512:.8689]"),
}

# The authors' regression students: batch 16, patience 5, no practical epoch cap.
PAPER_STUDENT = StudentTrainConfig(
    ig_steps=10, student_pool="teacher_train",
    loop=LoopConfig(batch_size=16, max_epochs=100, patience=5, parallel_seeds=True))
# Students scaled to 2 cores, as Table 1's cpu variant: a few epochs, SGD 0.05.
CPU_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, ig_steps=10, student_pool="teacher_train",
    loop=LoopConfig(batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))
CPU_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=50,
                                 schedule="linear_decay",
                                 loop=LoopConfig(batch_size=32, max_epochs=3, patience=2,
                                                 evals_per_epoch=2))


def write_pair_files(data_dir: str | Path, language_pairs: Sequence[str],
                     folder: Path) -> tuple[Path, Path]:
    """MLQE-PE as the two CSV files (columns source, mt, score) a teacher run reads: the
    training pairs, and the dev + test20 pairs the students' validation and test rows come
    from. Written atomically (a killed run never leaves half a file); the teacher run's
    data fingerprint notices any change.

    Raises:
      FileNotFoundError / ValueError: as :func:`smat.data.mlqe.load_mlqe`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    parts = {"train.csv": [load_mlqe(data_dir, language_pairs=language_pairs, split="train")],
             "held_out.csv": [load_mlqe(data_dir, language_pairs=language_pairs, split=split)
                              for split in ("dev", "test")]}
    for name, datasets in parts.items():
        partial = folder / f".{name}.partial"
        with partial.open("w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream)
            writer.writerow(["source", "mt", "score"])
            for dataset in datasets:
                data = dataset.data
                writer.writerows(zip(data.texts, data.text_pairs, data.labels.tolist(),
                                     strict=True))
        os.replace(partial, folder / name)
    return folder / "train.csv", folder / "held_out.csv"


def get_config(variant: str) -> dict[str, Any]:
    """The language pairs, data sizes, teacher and student grid of one variant.

    Raises:
      ValueError: an unknown variant.
    """
    if variant == "paper":
        return {"pairs": ["en-de", "et-en", "ro-en"], "max_len": 128,
                "student_validation_size": 1000, "student_test_size": 3000,
                "teacher": TeacherTrainConfig(loop=LoopConfig(batch_size=16, max_epochs=100,
                                                              patience=5)),
                "sizes": [1050, 2100, 4200], "seeds": [0, 1, 2, 3, 4],
                "explainers": list(SETTINGS), "student": PAPER_STUDENT}
    if variant == "cpu":
        return {"pairs": ["en-de"], "max_len": 96, "student_validation_size": 500,
                "student_test_size": 1000, "teacher": CPU_TEACHER, "sizes": [350, 700],
                "seeds": [0, 1, 2], "explainers": ["none", "attention_all", "smat"],
                "student": CPU_STUDENT}
    if variant == "smoke":
        return {"pairs": ["en-de"], "max_len": 32, "student_validation_size": 16,
                "student_test_size": 24, "teacher": dataclasses.replace(
                    CPU_TEACHER, warmup_steps=2, loop=dataclasses.replace(
                        CPU_TEACHER.loop, batch_size=16, max_epochs=1)),
                "sizes": [32], "seeds": [0, 1], "explainers": ["none", "attention_all", "smat"],
                "student": dataclasses.replace(CPU_STUDENT, loop=dataclasses.replace(
                    CPU_STUDENT.loop, max_epochs=1, patience=1))}
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


def data_config(config: dict[str, Any], train: Path, held_out: Path) -> DataConfig:
    """The teacher run's data: every training pair for the teacher (10% of them for its
    early stopping), the students' validation and test rows from the held-out pairs."""
    return DataConfig(source=str(train), student_source=(str(held_out),), task="regression",
                      text_column="source", text_pair_column="mt", label_column="score",
                      max_len=config["max_len"], teacher_fraction=1.0,
                      student_validation_size=config["student_validation_size"],
                      student_test_size=config["student_test_size"])


def run(variant: str, *, data_dir: str | Path, output_dir: str | Path,
        encoder: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Write the pair files, train (or reuse) the teacher and every student of the grid,
    write the tables. Returns the summary written to ``results.json``.

    `encoder`: the pretrained encoder (default: the offline all-MiniLM-L6-v2).
    """
    config = get_config(variant)
    output_dir = Path(output_dir)
    train, held_out = write_pair_files(data_dir, config["pairs"], output_dir / "data")
    data = data_config(config, train, held_out)
    teacher_dir = output_dir / "teacher"
    write_json_atomic(output_dir / "config.json", {
        "variant": variant, "data_dir": str(data_dir), "pairs": config["pairs"],
        "data": data.settings(), "teacher": dataclasses.asdict(config["teacher"]),
        "student": dataclasses.asdict(config["student"]),
        **{key: config[key] for key in ("sizes", "seeds", "explainers")}})
    start = time.perf_counter()
    (teacher,) = run_teacher(data=data, train=config["teacher"], output_dir=teacher_dir,
                             model=ModelSource(encoder), progress=progress)
    records = run_grid(teacher_dir, sizes=config["sizes"], explainers=config["explainers"],
                       seeds=config["seeds"], student=config["student"],
                       output_dir=output_dir / "students", progress=progress)
    table = simulability_table(records, metric=METRIC, scale=1.0, digits=4)
    plot_simulability(records, output_dir / "simulability.png", metric=METRIC)
    comparisons = paired_comparisons(records, metric=METRIC)
    figure5 = plot_figure5(records, output_dir / "head_weights.png", task="MLQE-PE",
                           metric=METRIC)
    figure = {"median_smat_seed": figure5["figure5_seed"]} if figure5 else {}
    text = (f"Teacher test Pearson {teacher['test']['pearson']:.4f} (paper: 0.63 with "
            f"XLM-R-base).\n\nMeasured ({variant}; {', '.join(config['pairs'])}; Pearson "
            f"with the teacher on held-out pairs):\n\n{table}\n\nPaired over seeds "
            f"(one-sided Wilcoxon signed-rank, one trained student per seed; differences "
            f"in Pearson x 100):\n\n{comparisons_table(comparisons)}\n\nTraining steps per "
            f"student (median [min:max]):\n\n{per_student_table(records)}\n\nPaper (MLQE-PE, six "
            f"pairs, XLM-R-base):\n\n{paper_table(PAPER_TABLE5, (2100, 4200, 8400))}\n")
    (output_dir / "table.md").write_text(text)
    summary = {"variant": variant, "pairs": config["pairs"], "table": table,
               "teacher_test": teacher["test"], "records": records, **figure,
               "paired_over_seeds": comparisons,
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    # no --teacher: the experiment trains its own teacher on the MLQE-PE split it writes
    # (OUTPUT_DIR/teacher is reused when finished)
    parser = variant_parser(__doc__, name="smat_table5_mlqe",
                            variants=VARIANTS, data_dir_help="the MLQE-PE folder (holding "
                            "direct-assessments/ and post-editing/, e.g. data/mlqe_pe)")
    args = parse_variant_args(parser, argv)
    if args.data_dir is None:
        parser.error("--data-dir is required: the MLQE-PE folder (holding direct-assessments/ "
                     "and post-editing/, e.g. data/mlqe_pe)")
    with command_runtime(parser):
        summary = run(args.variant, data_dir=args.data_dir, output_dir=args.output_dir,
                      progress=not args.no_progress)
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
