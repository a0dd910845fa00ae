"""Human simulability study files (Lu et al., 2022) behind ``smat study score``: read a
study's tasks and its annotators' answers, score them with
:func:`smat.evaluation.human_study.score_study`, and render the paper's tables.

Tasks are JSON lines with "task_id", "sample", "method", "k", "gold" and "classes"; answers
are a CSV / TSV (by suffix) or JSON-lines file with one row per (worker, task), its columns
named by the caller. A missing column is an error naming the columns found; extra columns
are reported and ignored.
"""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.evaluation.human_study import StudyInputError, score_study

TASK_FIELDS = ("task_id", "sample", "method", "k", "gold", "classes")


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ","))


def read_tasks(path: str | Path) -> list[dict[str, Any]]:
    """The tasks of a study (JSON lines).

    Raises:
      StudyInputError: a task without one of :data:`TASK_FIELDS` (counted).
    """
    tasks = _rows(Path(path))
    missing = sum(1 for t in tasks if any(f not in t for f in TASK_FIELDS))
    if missing:
        raise StudyInputError(f"{missing} of {len(tasks)} tasks in {path} lack one of "
                              f"{TASK_FIELDS}")
    return tasks


def read_answers(path: str | Path, *, worker: str = "worker", task_id: str = "task_id",
                 answer: str = "answer") -> list[dict[str, Any]]:
    """Per-annotator answers, renamed to "worker", "task_id" and "answer".

    Raises:
      StudyInputError: a named column that the file does not have.
    Warns:
      UserWarning: columns the scorer does not use.
    """
    rows = _rows(Path(path))
    found = list(rows[0]) if rows else []
    wanted = {"worker": worker, "task_id": task_id, "answer": answer}
    absent = [column for column in wanted.values() if column not in found]
    if absent:
        raise StudyInputError(f"{path} has no column(s) {absent}; its columns are {found}")
    extra = [column for column in found if column not in wanted.values()]
    if extra:
        warnings.warn(f"{path}: ignoring columns {extra}", stacklevel=2)
    return [{name: row[column] for name, column in wanted.items()} for row in rows]


def study_tables(report: dict[str, Any]) -> str:
    """Markdown in the layout of Lu et al.'s Table 3 (accuracy per k and score, %) and
    Table 7 (Flips and Aids)."""
    ks = report["ks"]
    lines = ["| method | " + " | ".join(f"{k} words" for k in ks) + " | score |",
             "|---|" + "---|" * (len(ks) + 1)]
    lines += [f"| {m} | " + " | ".join(f"{100 * p:.0f}" for p in report["accuracy"][m])
              + f" | {100 * report['score'][m]:.1f} |" for m in report["methods"]]
    lines += ["", "| method | flips | aids |", "|---|---|---|"]
    lines += [f"| {m} | {report['flips'][m]} | {report['aids'][m]} |"
              for m in report["methods"]]
    return "\n".join(lines)


def score_files(tasks: str | Path, answers: str | Path, *, columns: Sequence[str] = (
        "worker", "task_id", "answer"), lenient: bool = False) -> dict[str, Any]:
    """Read and score a study (:func:`score_study`)."""
    worker, task_id, answer = columns
    return score_study(read_tasks(tasks),
                       read_answers(answers, worker=worker, task_id=task_id, answer=answer),
                       lenient=lenient)
