"""`make demo`: the main job end to end on the offline defaults.

Trains (or reuses) a MiniLM-L6 teacher on the built-in movie-snippets corpus, then
students of 64 sentences with no explainer, with the static all-layers attention explainer
and with SMaT, three seeds each from one shared initialisation, and writes under the
output folder:

    summary.md            the simulability table (median [q25:q75] over seeds), the seed
                          pairs each comparison wins, the teacher's accuracy
    summary.json          every number in it
    head_weights.png      the median SMaT student's head coefficients (paper Figure 5)
    explanations.html     test sentences coloured by each explainer (paper Figure 3)

The configuration was chosen by experiment (``experiments/demo_search.py``; the table of
candidates and the 5-seed run of exactly this one are in docs/demo.md): students of a few
epochs with a larger SGD rate than the reference's 5e-3 (whose hundreds of steps do not fit
minutes), and SMaT's outer rate 100 times the reference's 5e-4, at which the head
coefficients leave uniform within the students' 16 meta steps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from smat.data import take
from smat.data.protocol import DataConfig
from smat.evaluation.simulability import paired_seed_comparison, simulability_table
from smat.jobs.explain import ExplainConfig, explain_data, write_explanations
from smat.jobs.grid import run_grid
from smat.jobs.teacher_run import run_teacher
from smat.registry import score_kind
from smat.store.render import plot_head_weights
from smat.store.run_log import write_json_atomic
from smat.store.run_record import load_run, reused_teacher
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

# The teacher: one epoch, so a shorter warmup than the reference 500 and a higher peak rate.
DEMO_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=30, schedule="linear_decay",
                                  loop=LoopConfig(max_epochs=1, evals_per_epoch=2, patience=2))
# Students of 16 steps (4 epochs of 64 sentences, batch 16): SGD 0.05, SMaT's outer Adam
# 5e-2, the meta step every step, the seeds in one program.
DEMO_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, outer_learning_rate=5e-2,
    loop=LoopConfig(batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))
DEMO_DATA = DataConfig(student_validation_size=250, student_test_size=500)
DEMO_EXPLAINERS = ("none", "attention_all", "smat")
DEMO_SIZE = 64
DEMO_SEEDS = (0, 1, 2)
COMPARISONS = (("smat", "attention_all"), ("attention_all", "none"))
NUM_SHOWN = 8
TOP_HEADS = 5


def run_demo(output_dir: str | Path, *, teacher_dir: str | Path | None = None,
             num_examples: int = DEMO_SIZE, seeds: tuple[int, ...] = DEMO_SEEDS,
             explainers: tuple[str, ...] = DEMO_EXPLAINERS,
             teacher: TeacherTrainConfig = DEMO_TEACHER,
             student: StudentTrainConfig = DEMO_STUDENT,
             progress: bool = True) -> dict[str, Any]:
    """Run the demo; every stage reuses finished work in `output_dir`.

    Args:
      output_dir: demo folder.
      teacher_dir: a finished teacher run to reuse as it is, whatever its settings (one
        not finished is trained with the demo's settings); default ``output_dir/teacher``,
        where the demo trains its own.
      num_examples: student training size.
      seeds: student seeds.
      explainers: student settings ("none" first: it is the table's baseline).
      teacher: teacher hyperparameters.
      student: student hyperparameters.
      progress: show progress bars.

    Returns:
      The summary record (also written to ``summary.json``).
    """
    output_dir = Path(output_dir)
    teacher_dir = Path(teacher_dir) if teacher_dir is not None else output_dir / "teacher"
    clock = StageClock()
    print(f"[1/4] teacher: {teacher_dir}", flush=True)
    chosen = teacher_dir != output_dir / "teacher"
    teacher_record = reused_teacher(teacher_dir) if chosen else None
    if teacher_record is None:
        (teacher_record,) = run_teacher(data=DEMO_DATA, train=teacher,
                                        output_dir=teacher_dir, progress=progress)
    print(f"      test accuracy {teacher_record['test']['accuracy']:.4f}", flush=True)

    clock.done("teacher")
    print(f"[2/4] students: {list(explainers)} x seeds {list(seeds)}, n={num_examples}",
          flush=True)
    records = run_grid(teacher_dir, sizes=[num_examples], explainers=explainers, seeds=seeds,
                       student=student, output_dir=output_dir / "students", progress=progress)
    table = simulability_table(records)

    comparisons = [{"candidate": candidate, "baseline": baseline, **row}
                   for candidate, baseline in COMPARISONS
                   if candidate in explainers and baseline in explainers
                   for row in paired_seed_comparison(records, candidate=candidate,
                                                     baseline=baseline)]

    clock.done("students")
    print("[3/4] learned head coefficients", flush=True)
    smat_records = sorted((r for r in records if r["explainer"] == "smat"),
                          key=lambda r: (r["test"]["accuracy"], r["seed"]))
    median = smat_records[(len(smat_records) - 1) // 2] if smat_records else None
    figure = heads = None
    if median is not None:
        weights = np.asarray(median["head_weights"])
        figure = plot_head_weights(weights, output_dir / "head_weights.png",
                                   title=f"SMaT head coefficients (median seed "
                                         f"{median['seed']})")
        heads = top_heads(weights)

    clock.done("head_weights")
    print("[4/4] explanations of test examples", flush=True)
    trained, _, parts, _ = load_run(teacher_dir, num_examples=num_examples,
                                    teacher_parts=False)
    shown = take(parts.student_test, np.arange(NUM_SHOWN))
    learned = (output_dir / "students" / f"n{num_examples}" / "smat" / f"seed{median['seed']}"
               / "explainer") if median is not None else None
    names = ("gradient", "attention_all") + ((str(learned),) if learned else ())
    explanations = explain_data(trained, shown, ExplainConfig(explainers=names))
    shown_name = {name: "smat (learned)" if name == str(learned) else name
                  for name in explanations.scores}
    kinds = {shown_name[name]: score_kind(name) for name in explanations.scores}
    explanations = explanations._replace(scores={
        shown_name[name]: value for name, value in explanations.scores.items()})
    texts = [trained.tokenizer.decode(row[mask != 0], skip_special_tokens=True)
             for row, mask in zip(shown.input_ids, shown.attention_mask, strict=True)]
    pages = write_explanations(explanations, output_dir, texts=texts, kinds=kinds,
                               label_names=trained.info["label_names"])

    clock.done("explanations")
    summary = {
        "seconds": clock.seconds,
        "teacher": {"test": teacher_record["test"],
                    "train_seconds": teacher_record["train_seconds"]},
        "students": records, "table": table, "num_examples": num_examples,
        "seeds": list(seeds), "paired_over_seeds": comparisons,
        "median_smat_seed": None if median is None else median["seed"],
        "top_heads": heads, "head_weights_png": str(figure) if figure else None,
        "explanations_html": pages["html"],
        "presets": {"teacher": dataclasses.asdict(teacher),
                    "student": dataclasses.asdict(student)},
    }
    write_json_atomic(output_dir / "summary.json", summary)
    markdown = summary_markdown(summary)
    (output_dir / "summary.md").write_text(markdown)
    print(markdown)
    print(json.dumps({"summary": str(output_dir / "summary.md"), "figure": summary[
        "head_weights_png"], "html": pages["html"]}, indent=2))
    return summary


class StageClock:
    """Wall seconds of each stage of one call (a stage whose work was reused is short)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(now - self._last, 1)
        self._last = now


def top_heads(weights: np.ndarray, count: int = TOP_HEADS) -> list[dict[str, Any]]:
    """The `count` largest head coefficients of an (L, H) explainer, largest first."""
    order = np.argsort(-weights, axis=None, kind="stable")[:count]
    return [{"layer": int(i // weights.shape[1]), "head": int(i % weights.shape[1]),
             "weight": round(float(weights.flat[i]), 4)} for i in order]


def summary_markdown(summary: dict[str, Any]) -> str:
    """What the demo prints and writes to ``summary.md``: the teacher, the table, the seed
    pairs each comparison wins and the median SMaT student's largest head coefficients."""
    lines = [f"Teacher test accuracy: {summary['teacher']['test']['accuracy'] * 100:.2f}%", "",
             f"Student test simulability (accuracy vs the teacher's predictions, %), "
             f"n={summary['num_examples']}, seeds {summary['seeds']}:", "", summary["table"]]
    if summary["paired_over_seeds"]:
        lines += ["", "Paired by seed (one shared initialisation):"]
        lines += [f"- {r['candidate']} vs {r['baseline']}: {100 * r['median_difference']:+.1f} "
                  f"points, {r['wins']} of {r['num_models']} seeds" for r in
                  summary["paired_over_seeds"]]
    if summary["top_heads"]:
        lines += ["", f"SMaT's largest head coefficients (seed {summary['median_smat_seed']}): "
                  + ", ".join(f"layer {h['layer']} head {h['head']} {h['weight']:.3f}"
                              for h in summary["top_heads"])]
    return "\n".join(lines) + "\n"
