"""The simulability grid behind the SMaT paper's Table 1: one student per cell.

:func:`run_grid` trains one student per (size, explainer setting, seed) cell, each in its
own folder with its own ``result.json``, so a killed grid resumes at the first unfinished
cell; :mod:`smat.evaluation.simulability` summarises the records.

References:
  Fernandes et al, `Learning to Scaffold: Optimizing Model Explanations for Teaching
  <https://arxiv.org/abs/2204.10810>`_, 2022, **Eq. 1**, **Table 1**.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.jobs.student_run import run_student
from smat.registry import STUDENT_SETTINGS
from smat.store.run_record import student_pool_size
from smat.training.student import StudentTrainConfig


def cell_dir(output_dir: str | Path, *, num_examples: int, explainer: str, seed: int) -> Path:
    """The folder of one grid cell."""
    return Path(output_dir) / f"n{num_examples}" / explainer / f"seed{seed}"


def run_grid(
    teacher_dir: str | Path,
    *,
    sizes: Sequence[int],
    explainers: Sequence[str],
    seeds: Sequence[int],
    student: StudentTrainConfig,
    output_dir: str | Path,
    progress: bool = True,
    overwrite: bool = False,
    keep_checkpoints: bool = False,
    keep_students: bool = False,
) -> list[dict[str, Any]]:
    """Train every (size, explainer, seed) student of a teacher; finished cells are reused.

    Args:
      teacher_dir: a finished `smat train-teacher` run.
      sizes: student training sizes (e.g. 500, 1000, 2000).
      explainers: settings from :data:`smat.registry.STUDENT_SETTINGS` ("none" is the
        baseline).
      seeds: student seeds.
      student: hyperparameters shared by all cells (explainer and seed are set per cell);
        ``student.parallel_seeds`` trains the seeds of each (size, explainer) in one
        vmapped program instead of one after another.
      output_dir: grid folder; cell results go to ``n{size}/{explainer}/seed{seed}``.
      progress: show progress bars.
      overwrite: delete what each cell's folder holds and train afresh.
      keep_checkpoints, keep_students: as :func:`smat.jobs.student_run.run_student` (by default a
        finished cell keeps its result and learned explainer only).

    Returns:
      The result records of all cells, in grid order.

    Raises:
      FileNotFoundError: `teacher_dir` is not a finished teacher run.
      ValueError: an unknown explainer setting, no sizes / explainers / seeds, or a size
        larger than the student pool (checked before any student trains).
    """
    unknown = sorted(set(explainers) - set(STUDENT_SETTINGS))
    if unknown:
        raise ValueError(f"unknown explainer settings {unknown}; choose from {STUDENT_SETTINGS}")
    for name, values in (("sizes", sizes), ("explainers", explainers), ("seeds", seeds)):
        if not values:
            raise ValueError(f"the grid needs at least one of {name}")
    if not Path(teacher_dir, "result.json").is_file():
        raise FileNotFoundError(f"{teacher_dir} is not a finished teacher run (no result.json); "
                                "train one with `smat train-teacher --output-dir DIR`")
    pool = student_pool_size(teacher_dir, student.student_pool)
    too_large = [size for size in sizes if not 1 <= size <= pool]
    if too_large:
        raise ValueError(f"student sizes {too_large} are outside 1..{pool}, the student pool "
                         f"of {teacher_dir} (checked before any student trains)")
    records = []
    for num_examples in sizes:
        for explainer in explainers:
            folders = [cell_dir(output_dir, num_examples=num_examples, explainer=explainer,
                                seed=seed) for seed in seeds]
            records += run_student(teacher_dir,
                                   config=dataclasses.replace(student, explainer=explainer),
                                   seeds=seeds, num_examples=num_examples, output_dir=folders,
                                   progress=progress, overwrite=overwrite,
                                   keep_checkpoints=keep_checkpoints,
                                   keep_students=keep_students)
    return records
