"""Simulability experiments as typed configs over one driver.

An experiment (one of the SMaT paper's tables on some data) is an :class:`ExperimentConfig`:
the teacher's data and training, the students' settings, the grid (sizes x settings x
seeds), the metric and the paper's table to show beside the measured one. Its variants
(the paper's scale, a CPU scale, a smoke test) are instances, and
:func:`run_experiment` runs any of them the same way: teacher -> cells -> paired
comparisons over seeds -> report (``config.json``, ``table.md``, ``results.json``,
``simulability.png`` and Figure 5's ``head_weights.png``). Every step resumes: a finished
teacher or student is reused.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from smat.data.protocol import DataConfig, data_fingerprint
from smat.evaluation.simulability import plot_simulability, simulability_table
from smat.jobs.ablations import is_arm, run_arms
from smat.jobs.grid import run_grid
from smat.jobs.shares import wait_for
from smat.jobs.simulability_report import (
    COMPARISONS,
    comparisons_table,
    diagnostics_table,
    paired_comparisons,
    paper_table,
    per_student_table,
    plot_figure5,
    smat_diagnostics,
)
from smat.jobs.teacher_run import run_teacher
from smat.models import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.registry import STUDENT_SETTINGS
from smat.store.model_store import saved_params_fingerprint
from smat.store.run_log import write_json_atomic
from smat.store.run_record import reused_teacher, saved_data_config
from smat.training.scaffold import ScaffoldConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

METRICS = ("accuracy", "pearson")


@dataclasses.dataclass(frozen=True)
class PaperTable:
    """A paper's published simulability table, shown beside the measured one.

    Attributes:
      caption: the paper's data set and model ("IMDB, ELECTRA-small").
      sizes: the student sizes of its columns.
      cells: per setting, its ``median [q25:q75]`` cells, one per size.
      teacher: the paper teacher's test score ("" when the paper gives none).
    """

    caption: str
    sizes: tuple[int, ...]
    cells: Mapping[str, tuple[str, ...]]
    teacher: str = ""

    def markdown(self) -> str:
        return paper_table(self.cells, self.sizes)


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """One simulability experiment: a teacher, its grid of students and the report.

    Attributes:
      data: the teacher run's data and the protocol's splits.
      teacher: how the teacher trains.
      student: how every student trains (its explainer and seed are set per cell).
      sizes: the students' training sizes
      seeds: the students' seeds
      explainers: the student settings to train (none, an explainer, smat) and SMaT's
        ablation arms (smat_frozen, random_heads, layer<k>, smat_pool_outer, smat_softmax,
        smat_entmax15)
      model: the teacher's pretrained start.
      metric: the simulability metric: accuracy (classification) or pearson (regression).
      task: the task's name in figure titles ("" for none).
      paper: the paper's table shown beside the measured one (None for none).
      comparisons: the (candidate, baseline) settings tested over seeds.
    """

    data: DataConfig
    teacher: TeacherTrainConfig
    student: StudentTrainConfig
    sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    explainers: tuple[str, ...]
    model: ModelSource = ModelSource()
    metric: str = "accuracy"
    task: str = ""
    paper: PaperTable | None = None
    comparisons: tuple[tuple[str, str], ...] = COMPARISONS

    def __post_init__(self) -> None:
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("ExperimentConfig.sizes must be positive student training "
                             f"sizes, got {list(self.sizes)}")
        if (not self.seeds or len(set(self.seeds)) != len(self.seeds)
                or min(self.seeds) < 0):
            raise ValueError("ExperimentConfig.seeds must be distinct non-negative integers, "
                             f"got {list(self.seeds)}")
        unknown = [name for name in self.explainers
                   if name not in STUDENT_SETTINGS and not is_arm(name)]
        if unknown or not self.explainers:
            raise ValueError(f"ExperimentConfig.explainers: unknown settings {unknown}; "
                             f"choose from {list(STUDENT_SETTINGS)} or SMaT's ablation arms "
                             "(smat_frozen, random_heads, layer<k>, smat_pool_outer, "
                             "smat_softmax, smat_entmax15)")
        if self.metric not in METRICS:
            raise ValueError(f"ExperimentConfig.metric must be one of {list(METRICS)}, got "
                             f"{self.metric!r}")

    def recorded(self) -> dict[str, Any]:
        """What ``config.json`` keeps of it (the paper's table aside: it is a constant)."""
        return {"data": self.data.settings(), "model": self.model.settings(),
                "teacher": dataclasses.asdict(self.teacher),
                "student": dataclasses.asdict(self.student), "sizes": list(self.sizes),
                "seeds": list(self.seeds), "explainers": list(self.explainers),
                "metric": self.metric}


# The fields of ExperimentConfig a driver's command line sets (the rest are the variant's).
GRID_FLAGS = ("sizes", "seeds", "explainers")


class OtherDataTeacherWarning(UserWarning):
    """A ``--teacher`` reused by a variant was trained on other data than the variant's."""


def check_reused_teacher(teacher_dir: str | Path, data: DataConfig, *, variant: str) -> None:
    """Warn when a ``--teacher`` was trained on other data than the variant reads: its
    students and table are of the teacher's data (which the run records), under the
    variant's name. Its training settings may differ (it is reused as it is); data files
    at other paths with the same content are the same data."""
    saved = saved_data_config(teacher_dir)
    ours, theirs = dataclasses.asdict(data), dataclasses.asdict(saved)
    differ = [key for key in ours if ours[key] != theirs[key]]
    if differ:
        fingerprint = data_fingerprint(data)
        if fingerprint is not None and fingerprint == data_fingerprint(saved):
            differ = [key for key in differ if key not in ("source", "student_source")]
    if differ:
        listed = "; ".join(f"{key}: {theirs[key]!r}, the variant's {ours[key]!r}"
                           for key in differ)
        warnings.warn(f"--teacher {teacher_dir} was trained on other data than the {variant} "
                      f"variant reads ({listed}): its students and table are of the teacher's "
                      "data", OtherDataTeacherWarning, stacklevel=2)


def _wait_for_teacher(teacher_dir: Path, *, share: tuple[int, int],
                      timeout: float) -> dict[str, Any]:
    """The finished teacher run in `teacher_dir`, waited for at most `timeout` seconds (share
    0 trains it).

    Raises:
      TimeoutError: naming the share that trains it.
    """
    return wait_for(
        lambda: reused_teacher(teacher_dir), timeout=timeout,
        waiting=lambda: (f"share {share[0]}/{share[1]}: waiting for share 0 to finish the "
                         f"teacher in {teacher_dir}"),
        timed_out=lambda: (f"--share {share[0]}/{share[1]}: after {timeout:.0f} s the teacher "
                           f"in {teacher_dir} is not finished; share 0/{share[1]} trains it "
                           "(or run --teacher-only first), then run this share again"))


def run_experiment(config: ExperimentConfig, *, variant: str, output_dir: str | Path,
                   teacher_dir: str | Path | None = None, progress: bool = True,
                   teacher_only: bool = False, smat_cells: Sequence[str | Path] = (),
                   recorded: Mapping[str, Any] | None = None,
                   share: tuple[int, int] = (0, 1),
                   join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Train (or reuse) the teacher and every student of `config`'s grid; write the report.

    With ``share=(i, n)``, n processes (on one machine, or hosts sharing `output_dir`) split
    the work: share 0 trains the teacher, the others wait for it (at most `join_timeout`
    seconds); each trains its share of the grid (:func:`smat.jobs.grid.run_grid`); share 0
    waits for the others' students, trains the ablation arms and writes the report, and
    the others return their own records (``{"share", "records"}``) without a report.

    Args:
      variant: the variant's name, recorded and shown in the table's heading.
      output_dir: the run folder: ``teacher/`` (unless `teacher_dir`), ``students/`` and
        the report's files.
      teacher_dir: a finished teacher run to reuse as it is (its data settings are recorded,
        not the config's; other data than the config's warns, :func:`check_reused_teacher`),
        or the folder to train the teacher in.
      teacher_only: stop after the teacher, returning its folder, test scores and weights
        fingerprint (a queue of one-student calls asks which teacher its students learn
        from before it skips those already trained).
      smat_cells: result files holding the SMaT students that the smat_frozen and
        random_heads arms read (same teacher and seeds).
      recorded: what else ``config.json`` and ``results.json`` keep (the language pairs...).

    Returns:
      the summary written to ``results.json`` (share 0), or a share's own records.

    Raises:
      TimeoutError: a share waited `join_timeout` seconds for the teacher or for the other
        shares' students (naming what to rerun).
    """
    output_dir = Path(output_dir)
    reused = reused_teacher(teacher_dir) if teacher_dir is not None else None
    if reused:
        check_reused_teacher(teacher_dir, config.data, variant=variant)
    teacher_dir = Path(teacher_dir) if teacher_dir is not None else output_dir / "teacher"
    settings = config.recorded()
    if reused:  # a reused teacher keeps its own settings: they are recorded, not the config's
        settings.update(data=saved_data_config(teacher_dir).settings(),
                        teacher=f"reused as it is: {teacher_dir}")
    extra = dict(recorded or {})
    write_json_atomic(output_dir / "config.json", {"variant": variant,
                                                   "teacher_dir": str(teacher_dir),
                                                   **settings, **extra})
    start = time.perf_counter()
    if reused:
        teacher = reused
    elif share[0] != 0:
        teacher = _wait_for_teacher(teacher_dir, share=share, timeout=join_timeout)
    else:
        (teacher,) = run_teacher(data=config.data, train=config.teacher,
                                 output_dir=teacher_dir, model=config.model, progress=progress)
    if teacher_only:
        return {"teacher_dir": str(teacher_dir), "teacher_test": teacher["test"],
                "teacher_params": saved_params_fingerprint(teacher_dir / "model")}
    students = output_dir / "students"
    grid = [name for name in config.explainers if not is_arm(name)]
    records = run_grid(teacher_dir, sizes=config.sizes, explainers=grid, seeds=config.seeds,
                       student=config.student, output_dir=students, progress=progress,
                       share=share, join_timeout=join_timeout) if grid else []
    if share[0] != 0:  # the arms read the joined SMaT cells, the report every student
        return {"share": f"{share[0]}/{share[1]}", "records": records}
    records += run_arms(teacher_dir, [name for name in config.explainers if is_arm(name)],
                        sizes=config.sizes, seeds=config.seeds, student=config.student,
                        output_dir=students, smat_cells=smat_cells, progress=progress)
    summary = write_report(config, output_dir, variant=variant, teacher=teacher,
                           records=records)
    summary.update(extra, seconds_this_call=round(time.perf_counter() - start, 1))
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def metric_scale(metric: str) -> tuple[float, int]:
    """How a metric prints: accuracy in percent with 2 decimals, Pearson with 4."""
    return (100.0, 2) if metric == "accuracy" else (1.0, 4)


def teacher_line(config: ExperimentConfig, test: Mapping[str, float]) -> str:
    """The report's first line: the teacher's test score (and the paper teacher's)."""
    value = test[config.metric]
    measured = (f"Teacher test accuracy {100 * value:.2f}%" if config.metric == "accuracy"
                else f"Teacher test Pearson {value:.4f}")
    paper = config.paper.teacher if config.paper is not None else ""
    return measured + (f" (paper: {paper})" if paper else "") + "."


def write_report(config: ExperimentConfig, output_dir: Path, *, variant: str,
                 teacher: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:
    """``table.md`` (the teacher, the measured table, the paired tests over seeds, the
    students' steps, the paper's table, the SMaT students' diagnostics), the figures, and
    the summary ``results.json`` keeps (returned)."""
    scale, digits = metric_scale(config.metric)
    table = simulability_table(records, metric=config.metric, scale=scale, digits=digits)
    plot_simulability(records, output_dir / "simulability.png", metric=config.metric)
    figure5 = plot_figure5(records, output_dir / "head_weights.png", task=config.task,
                           metric=config.metric)
    diagnostics = smat_diagnostics(records, output_dir / "students", metric=config.metric,
                                   outer_clip_norm=ScaffoldConfig().outer_clip_norm)
    comparisons = paired_comparisons(records, comparisons=config.comparisons,
                                     metric=config.metric)
    source = config.student.explanation_source
    control = ("" if source == "text" else
               "Leakage control: every teacher explanation was computed on its row's tokens "
               "in a shuffled order (an explanation no longer points at the student's "
               "evidence; a label written into where the mass sits survives).\n\n")
    points = "" if config.metric == "accuracy" else f"; differences in {config.metric} x 100"
    sections = [
        f"{teacher_line(config, teacher['test'])}\n\n{control}Measured ({variant}):\n\n{table}",
        "Paired over seeds (one-sided Wilcoxon signed-rank, one trained student per "
        f"seed{points}):\n\n{comparisons_table(comparisons)}",
        "Training steps per student (median [min:max]; a SMaT student takes one meta step "
        f"per step):\n\n{per_student_table(records)}"]
    if config.paper is not None:
        sections.append(f"Paper ({config.paper.caption}):\n\n{config.paper.markdown()}")
    if diagnostics:
        sections.append("SMaT students (head coefficients, outer gradient, explanation "
                        f"loss):\n\n{diagnostics_table(diagnostics, metric=config.metric)}")
    (output_dir / "table.md").write_text("\n\n".join(sections) + "\n")
    return {"variant": variant, "explanation_source": source, "table": table,
            "teacher_test": teacher["test"], "teacher_steps": teacher.get("steps"),
            "records": list(records), **figure5, "smat_diagnostics": diagnostics,
            "paired_over_seeds": comparisons}
