"""Human simulability studies (Lu et al., 2022) behind ``smat study build|read|score``.

*build*: choose samples of the model's held-out split (seeded, class-balanced; by default
only those the model classifies correctly, the paper's setting), explain them, turn token
scores into word scores (sub-word scores summed) and write one task per (sample, method, k)
with its work packages (:mod:`smat.evaluation.study_tasks`). *read*: a model answers the
tasks instead of people (hidden words become the mask token, or are dropped), one batched
pass. *score*: :func:`smat.evaluation.human_study.score_study` and the paper's tables.

Tasks are JSON lines with "task_id", "sample", "method", "k", "gold" and "classes"; answers
are a CSV / TSV (delimiter sniffed from the first lines, or given) or JSON-lines file with
one row per (worker, task), its columns named by the caller. A missing column is an error
naming the columns found; extra columns are reported and ignored. An already majority-voted
table can be read as released, e.g. Lu et al.'s votes (:func:`score_voted_file`).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.data import TextDataset, token_word_ids, tokenize, tokenize_texts
from smat.data.protocol import protocol_splits
from smat.evaluation.human_study import (
    StudyInputError,
    check_answers,
    filter_workers,
    fleiss_kappa,
    score_recognized,
    score_study,
)
from smat.evaluation.plausibility import word_level_scores
from smat.evaluation.study_tasks import HIDDEN, assign_packages, shown_words
from smat.jobs.annotation_page import write_annotation_pages
from smat.jobs.explain import ExplainConfig, explain_data
from smat.models import functional
from smat.models.inference import predict_logits, predictions_from_logits
from smat.store import model_store
from smat.store.run_log import write_json_atomic
from smat.store.run_record import teacher_examples

SELECTIONS = ("correct", "misclassified", "all")


@dataclasses.dataclass(frozen=True, kw_only=True)
class StudyConfig:
    """Settings of a human simulability study (:func:`build_study`; Lu et al.'s defaults).

    Attributes:
      num_samples: samples in the study, an equal share per gold class.
      ks: the top-k word settings.
      selection: "correct" (samples the model classifies correctly, the paper's setting),
        "misclassified" or "all".
      annotators_per_task: people who label each task.
      tasks_per_annotator: tasks in one person's work package.
      seed: sample choice, package layout and order.
      keep_punctuation: let punctuation-only words be among the shown top-k.
      explain: the saliency methods (add "random" for the paper's baseline) and how they
        run (ExplainConfig).
    """

    num_samples: int = 100
    ks: tuple[int, ...] = (5, 10, 20, 30, 40)
    selection: str = dataclasses.field(default="correct", metadata={"choices": SELECTIONS})
    annotators_per_task: int = 5
    tasks_per_annotator: int = 100
    seed: int = 0
    keep_punctuation: bool = False
    explain: ExplainConfig

    def __post_init__(self) -> None:
        if self.num_samples < 1 or not self.ks or min(self.ks) < 1:
            raise ValueError(f"StudyConfig needs num_samples >= 1 and ks >= 1; got "
                             f"{self.num_samples} and {self.ks}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"StudyConfig.selection must be one of {SELECTIONS}, got "
                             f"{self.selection!r}")
        if self.explain.num_examples is not None:
            raise ValueError("a study chooses its rows with num_samples, not num_examples="
                             f"{self.explain.num_examples}")


def held_out_texts(trained: model_store.TrainedModel) -> TextDataset:
    """The texts and gold labels of the model's held-out test split (its protocol split)."""
    config, dataset = teacher_examples(trained)
    rows = protocol_splits(config, dataset).student.test
    return dataset.select(rows)


def select_samples(gold: np.ndarray, predicted: np.ndarray, *, num_samples: int,
                   selection: str, seed: int) -> np.ndarray:
    """Row indices: an equal share of `num_samples` per gold class (the remainder to the
    first classes), drawn without replacement (seeded) among the rows `selection` allows.

    Raises:
      ValueError: a class with too few eligible rows (naming the class and both counts).
    """
    eligible = {"correct": gold == predicted, "misclassified": gold != predicted,
                "all": np.ones(len(gold), bool)}[selection]
    classes = np.unique(gold)
    shares = [num_samples // len(classes) + (c < num_samples % len(classes))
              for c in range(len(classes))]
    rng = np.random.default_rng(seed)
    chosen = []
    for label, share in zip(classes, shares, strict=True):
        pool = np.flatnonzero(eligible & (gold == label))
        if len(pool) < share:
            raise ValueError(f"class {label} has {len(pool)} {selection} rows; the study needs "
                             f"{share}")
        chosen.append(rng.choice(pool, size=share, replace=False))
    return np.sort(np.concatenate(chosen))


def build_study(trained: model_store.TrainedModel, config: StudyConfig) -> dict[str, Any]:
    """Tasks, work packages and a manifest for a study of `trained`'s held-out split."""
    data = held_out_texts(trained)
    max_len = trained.info["max_len"]
    encoded = tokenize(data, trained.tokenizer, max_len=max_len)
    graphdef, params = functional.split(trained.model)
    predicted = predictions_from_logits(predict_logits(graphdef, params, encoded), "classification")
    rows = select_samples(np.asarray(data.labels), predicted, num_samples=config.num_samples,
                          selection=config.selection, seed=config.seed)
    texts = [data.texts[i] for i in rows]
    explained = explain_data(trained, tokenize_texts(texts, trained.tokenizer, max_len=max_len),
                             config.explain)
    word_ids = token_word_ids(texts, trained.tokenizer, max_len=max_len)
    words = [text.split() for text in texts]
    width = max(len(w) for w in words)
    names = list(data.label_names or [])
    tasks = []
    for method, scores in explained.scores.items():
        word_scores, scored = word_level_scores(scores, word_ids, num_words=width)
        word_scores = np.where(np.asarray(scored), np.asarray(word_scores, np.float64), np.nan)
        for i, row in enumerate(rows):
            for k in config.ks:
                shown = shown_words(words[i], word_scores[i, :len(words[i])], k,
                                    drop_punctuation=not config.keep_punctuation)
                tasks.append({"task_id": f"s{int(row)}-{method}-k{k}", "sample": int(row),
                              "method": method, "k": k, "text": " ".join(shown),
                              "gold": names[data.labels[row]], "classes": names})
    plan = assign_packages([t["sample"] for t in tasks],
                           annotators_per_task=config.annotators_per_task,
                           tasks_per_annotator=config.tasks_per_annotator, seed=config.seed)
    cut = sum(len(w) - len(np.unique(ids[ids >= 0])) for w, ids in zip(words, word_ids,
                                                                         strict=True))
    if cut:
        warnings.warn(f"{cut} words of the study's samples lie beyond max_len={max_len} "
                      "tokens and are never shown", stacklevel=2)
    manifest = {"config": dataclasses.asdict(config), "model_data": trained.info["data"],
                "samples": rows.tolist(), "num_tasks": len(tasks),
                "num_annotators": int(plan.annotator.max()) + 1, "words_cut_by_max_len": cut}
    return {"tasks": tasks, "packages": [
        {"annotator": int(a), "position": int(p), "task_id": tasks[t]["task_id"]}
        for p, (a, t) in enumerate(zip(plan.annotator, plan.task, strict=True))],
        "manifest": manifest}


def write_study(study: dict[str, Any], output_dir: str | Path) -> None:
    """``tasks.jsonl`` (everything the scorer needs), ``tasks.csv`` (task id, text and the
    answer options: what a crowdsourcing platform shows), ``packages.csv``,
    ``manifest.json`` and one annotation page per work package under ``pages/``
    (:mod:`smat.jobs.annotation_page`)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "tasks.jsonl").write_text(
        "".join(json.dumps(t) + "\n" for t in study["tasks"]))
    with (output_dir / "tasks.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task_id", "text", "options"])
        for t in study["tasks"]:
            writer.writerow([t["task_id"], t["text"], "|".join(t["classes"])])
    with (output_dir / "packages.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["annotator", "position", "task_id"])
        writer.writeheader()
        writer.writerows(study["packages"])
    write_json_atomic(output_dir / "manifest.json", study["manifest"])
    write_annotation_pages(study, output_dir, name=output_dir.name)


def machine_answers(reader: model_store.TrainedModel, tasks: Sequence[dict[str, Any]], *,
                    name: str, hidden: str = "mask") -> list[dict[str, Any]]:
    """A model's answers to the tasks, read from their shown text with every hidden word
    as the mask token (``hidden="mask"``) or left out (``"drop"``), in one batched pass."""
    if hidden not in ("mask", "drop"):
        raise ValueError(f"hidden must be 'mask' or 'drop', got {hidden!r}")
    mask_token = reader.tokenizer.mask_token
    texts = [" ".join(mask_token if w == HIDDEN else w for w in t["text"].split()
                      if hidden == "mask" or w != HIDDEN) for t in tasks]
    encoded = tokenize_texts(texts, reader.tokenizer, max_len=reader.info["max_len"])
    graphdef, params = functional.split(reader.model)
    predicted = predictions_from_logits(predict_logits(graphdef, params, encoded),
                                        "classification")
    names = list(reader.info.get("label_names") or [])
    return [{"worker": name, "task_id": t["task_id"], "answer": names[int(p)]}
            for t, p in zip(tasks, predicted, strict=True)]

TASK_FIELDS = ("task_id", "sample", "method", "k", "gold", "classes")


SAMPLE_RULES = ("column", "block", "text")
"""How :func:`score_voted_file` tells a table's samples apart (see there)."""

FULL_TEXT_K = "all"
"""The k cell (compared case-blind) of a full-text row: the row that opens a sample's block
in Lu et al.'s released votes, with its whole text and no method."""

DELIMITERS = "\t,;|"
"""The delimiters a table's first lines are sniffed for (``csv.Sniffer``)."""


def _delimiter(path: Path, head: str, delimiter: str | None) -> str:
    """The given delimiter (one character, or "tab" / a backslash-t for a tab), else the one
    sniffed from the file's first lines, else the suffix's (tab for .tsv, comma otherwise)."""
    if delimiter is not None:
        delimiter = {"tab": "\t", "\\t": "\t"}.get(delimiter, delimiter)
        if len(delimiter) != 1:
            raise ValueError(f"a delimiter is one character or 'tab'; got {delimiter!r}")
        return delimiter
    try:
        return csv.Sniffer().sniff(head, delimiters=DELIMITERS).delimiter
    except csv.Error:  # one column, or no consistent candidate
        return "\t" if path.suffix == ".tsv" else ","


def _table(path: Path, delimiter: str | None = None) -> tuple[list[dict[str, Any]], list[int]]:
    """The rows of a CSV / TSV (delimiter sniffed unless given) or JSON-lines file, and the
    file line each row starts on (the header is line 1)."""
    if path.suffix == ".jsonl":
        numbered = [(i, line) for i, line in enumerate(path.read_text().splitlines(), 1)
                    if line.strip()]
        return [json.loads(line) for _, line in numbered], [i for i, _ in numbered]
    with path.open(newline="") as f:
        head = "".join(f.readline() for _ in range(50))
        f.seek(0)
        reader = csv.DictReader(f, delimiter=_delimiter(path, head, delimiter))
        rows, lines = [], []
        for row in reader:  # line_num is the row's last line; quoted cells may span lines
            cells = [c for v in row.values() for c in (v if isinstance(v, list) else [v])]
            lines.append(reader.line_num - sum(str(c).count("\n") for c in cells
                                               if c is not None))
            rows.append(row)
    return rows, lines


def _rows(path: Path, delimiter: str | None = None) -> list[dict[str, Any]]:
    return _table(path, delimiter)[0]


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
                 answer: str = "answer", keep: Sequence[str] = (),
                 delimiter: str | None = None) -> list[dict[str, Any]]:
    """Per-annotator answers, renamed to "worker", "task_id" and "answer" (plus the `keep`
    columns, e.g. "seconds" for filtering by speed). A CSV / TSV file's delimiter is
    sniffed from its first lines unless given.

    Raises:
      StudyInputError: a named column that the file does not have.
    Warns:
      UserWarning: columns the scorer does not use.
    """
    rows = _rows(Path(path), delimiter)
    found = list(rows[0]) if rows else []
    wanted = {"worker": worker, "task_id": task_id, "answer": answer,
              **{column: column for column in keep}}
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
    if report.get("fleiss_kappa") is not None:
        lines += ["", f"Fleiss' kappa over {report['num_answers']} answers: "
                      f"{report['fleiss_kappa']:.3f}"]
    if report.get("dropped_workers"):
        lines += ["", "Dropped workers: " + "; ".join(
            f"{w} ({why})" for w, why in report["dropped_workers"].items())]
    if "spearman_with_compared" in report:
        lines += ["", f"Spearman rho of the method scores with the compared study: "
                      f"{report['spearman_with_compared']:.3f}"]
    return "\n".join(lines)


def score_files(tasks: str | Path, answers: str | Path, *, columns: Sequence[str] = (
        "worker", "task_id", "answer"), lenient: bool = False, min_seconds: float | None = None,
        drop_all_dont_know: bool = True, delimiter: str | None = None) -> dict[str, Any]:
    """Read, filter and score a study (:func:`score_study`); adds Fleiss' kappa of the kept
    answers and the dropped workers with their reasons."""
    worker, task_id, answer = columns
    task_rows = read_tasks(tasks)
    rows = read_answers(answers, worker=worker, task_id=task_id, answer=answer,
                        keep=("seconds",) if min_seconds is not None else (),
                        delimiter=delimiter)
    rows = check_answers(task_rows, rows, lenient=lenient)
    kept, dropped = filter_workers(rows, min_seconds=min_seconds,
                                   drop_all_dont_know=drop_all_dont_know)
    if not kept:
        raise StudyInputError(f"the filters dropped every worker: {dropped}")
    report = score_study(task_rows, kept)
    votes: dict[Any, list[Any]] = {}
    for row in kept:
        votes.setdefault(row["task_id"], []).append(row["answer"])
    several = [v for v in votes.values() if len(v) >= 2]
    report.update(dropped_workers=dropped, num_answers=len(kept),
                  fleiss_kappa=fleiss_kappa(several) if several else None)
    return report


def score_voted_file(path: str | Path, *, columns: Sequence[str] = (
        "sample", "method", "k", "correct"), sample_from: str = "column",
        delimiter: str | None = None) -> dict[str, Any]:
    """Score an already majority-voted table (CSV / TSV / JSON lines; one row per sample,
    method and k with a 0 / 1 correct column), e.g. a study run elsewhere.

    A CSV / TSV file's delimiter is sniffed from its first lines (tab, comma, semicolon or
    bar; the suffix decides when sniffing fails) unless `delimiter` is given. Rows whose k
    cell is "All" (any case) are full-text rows: they hold a sample's whole text, no
    method, and are not scored. The sample of every other row comes from `sample_from`:

    - ``"column"``: its cell in the sample column;
    - ``"block"``: the full-text rows cut the table into blocks, one per sample, each
      opening with its full-text row (Lu et al.'s released votes: tab-separated columns
      Text, Label, Saliency, Words and Correct, and no sample id), numbered from 0; the
      sample column is not read;
    - ``"text"``: as ``"block"``, with the block's full text (its cell in the sample
      column, e.g. Text) as the id, so two blocks of the same text are one sample.

    For Lu et al.'s file: ``columns=("Text", "Saliency", "Words", "Correct")`` and
    ``sample_from="block"``.

    Args:
      path: the table.
      columns: the names of its sample (or, with "text", full-text), method, k and correct
        columns.
      sample_from: one of :data:`SAMPLE_RULES`.
      delimiter: one character (or "tab"), instead of the sniffed one.

    Raises:
      StudyInputError: an absent column (naming the columns found); a k that is not a whole
        number or a correct cell that is not 0 or 1 (naming the file, row and column; a
        row is a line of the file, the header is row 1); a scored row before the first
        full-text row with "block" / "text"; or :func:`score_recognized`'s problems.
      ValueError: an unknown `sample_from` or a delimiter longer than one character.
    """
    if sample_from not in SAMPLE_RULES:
        raise ValueError(f"sample_from must be one of {SAMPLE_RULES}; got {sample_from!r}")
    sample, method, k, correct = columns
    rows, lines = _table(Path(path), delimiter)
    found = list(rows[0]) if rows else []
    needed = [method, k, correct] if sample_from == "block" else list(columns)
    absent = [c for c in needed if c not in found]
    if absent:
        raise StudyInputError(f"{path} has no column(s) {absent}; its columns are {found}")
    voted, opened, block = [], 0, None  # block: the sample the last full-text row opened
    for row, line in zip(rows, lines, strict=True):
        size = str(row[k]).strip()
        if size.lower() == FULL_TEXT_K:
            block = opened if sample_from == "block" else row[sample]
            opened += 1
            continue
        if not (size.isascii() and size.isdigit()):
            raise StudyInputError(f"{path}, row {line}, column {k!r}: {row[k]!r} is not a "
                                  "whole number of words (k) nor 'All' (a full-text row)")
        if str(row[correct]).strip() not in ("0", "1"):
            raise StudyInputError(f"{path}, row {line}, column {correct!r}: "
                                  f"{row[correct]!r} is not 0 or 1")
        if sample_from != "column" and block is None:
            raise StudyInputError(f"{path}, row {line}: a scored row before the first "
                                  f"full-text row ({k!r} = 'All'); sample_from="
                                  f"{sample_from!r} starts each sample at a full-text row")
        voted.append({"sample": row[sample] if sample_from == "column" else block,
                      "method": row[method], "k": int(size), "correct": row[correct]})
    return score_recognized(voted)
