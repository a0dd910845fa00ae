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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from smat.jobs.shares import join_shares
from smat.jobs.student_run import run_student
from smat.parallel import JOIN_TIMEOUT
from smat.registry import STUDENT_SETTINGS
from smat.store.run_record import student_pool_size
from smat.training.student import StudentTrainConfig


def cell_dir(output_dir: str | Path, *, num_examples: int, explainer: str, seed: int) -> Path:
    """The folder of one grid cell."""
    return Path(output_dir) / f"n{num_examples}" / explainer / f"seed{seed}"


class Unit(NamedTuple):
    """Students trained in one call: a (size, explainer) cell's seeds, all of them when
    they train as one vmapped program, else one."""

    num_examples: int
    explainer: str
    seeds: tuple[int, ...]


def _join(units: Sequence[Unit], *, share: tuple[int, int], timeout: float,
          output_dir: str | Path) -> None:
    """Wait until every unit's students are finished (their result.json), at most
    `timeout` seconds (:func:`smat.jobs.shares.join_shares`)."""
    def finished(unit: Unit) -> bool:
        return all((cell_dir(output_dir, num_examples=unit.num_examples,
                             explainer=unit.explainer, seed=seed) / "result.json").is_file()
                   for seed in unit.seeds)

    def describe(left: Sequence[Unit]) -> str:
        cells = ", ".join(f"n{u.num_examples}/{u.explainer}/seeds "
                          f"{','.join(map(str, u.seeds))}" for u in left[:4])
        return f"{len(left)} students ({cells}{', ...' if len(left) > 4 else ''})"

    join_shares(units, finished, share=share, timeout=timeout, describe=describe)


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
    share: tuple[int, int] = (0, 1),
    join_timeout: float = JOIN_TIMEOUT,
) -> list[dict[str, Any]]:
    """Train every (size, explainer, seed) student of a teacher; finished cells are reused.

    With ``share=(i, n)`` this process trains only every n-th call's students from the
    i-th (a call: a cell's seeds, together when they train as one vmapped program), so n
    processes, on one machine or on hosts that share `output_dir`, split the grid without
    talking to each other. Share 0 then waits (at most `join_timeout` seconds) for every
    other student's ``result.json`` and returns all records; the others return their own.
    A process that dies leaves its finished students; rerunning its share trains the rest.

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
      share: (this process's share, number of shares); see above.
      join_timeout: how long share 0 waits for the other shares' students.

    Returns:
      The result records of all cells, in grid order.

    Raises:
      FileNotFoundError: `teacher_dir` is not a finished teacher run.
      ValueError: an unknown explainer setting, no sizes / explainers / seeds, or a size
        larger than the student pool (checked before any student trains).
      TimeoutError: share 0 waited `join_timeout` seconds for students of other shares.
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
    groups = ([tuple(seeds)] if student.loop.parallel_seeds
              else [(seed,) for seed in seeds])
    units = [Unit(num_examples, explainer, group) for num_examples in sizes
             for explainer in explainers for group in groups]
    index, count = share
    mine = units[index::count]
    if count > 1:
        print(f"share {index}/{count}: training " + "; ".join(
            f"n{u.num_examples}/{u.explainer}/seeds {','.join(map(str, u.seeds))}"
            for u in mine), file=sys.stderr, flush=True)

    def students(unit: Unit, overwrite: bool = overwrite) -> list[dict[str, Any]]:
        folders = [cell_dir(output_dir, num_examples=unit.num_examples,
                            explainer=unit.explainer, seed=seed) for seed in unit.seeds]
        return run_student(teacher_dir,
                           config=dataclasses.replace(student, explainer=unit.explainer),
                           seeds=unit.seeds, num_examples=unit.num_examples,
                           output_dir=folders, progress=progress, overwrite=overwrite,
                           keep_checkpoints=keep_checkpoints, keep_students=keep_students)

    records = [record for unit in mine for record in students(unit)]
    if count == 1 or index != 0:
        return records
    _join(units, share=share, timeout=join_timeout, output_dir=output_dir)
    # the other shares' students, finished: read, never trained again or overwritten
    return [record for unit in units for record in students(unit, overwrite=False)]
