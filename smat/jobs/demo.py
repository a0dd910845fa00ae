"""`make demo`: the main job end to end on the offline defaults.

Trains (or reuses) a MiniLM-L6 teacher on the built-in movie-snippets corpus, trains
students without explanations, with the static all-layers attention explainer and with
SMaT at one data size over two seeds, then writes under the output folder:

    summary.md            the simulability table (median [q25:q75] over seeds) + teacher
    summary.json          every number in it
    head_weights.png      the learned SMaT head coefficients (paper Figure 5)
    explanations.html     test examples coloured by each explainer (paper Figure 3)

The presets below are the paper's settings scaled to 2 CPU cores (see docs/demo.md):
teacher and students are both all-MiniLM-L6-v2, max_len 64.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from smat.data import take
from smat.evaluation.simulability import simulability_table
from smat.jobs.explain import ExplainConfig, explain_data, write_explanations
from smat.jobs.grid import run_grid
from smat.jobs.runs import DataConfig, load_run, reused_teacher, run_teacher
from smat.registry import score_kind
from smat.store.explainer_store import load_explainer
from smat.store.render import plot_head_weights
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

# The paper's settings scaled to 2 CPU cores. Teacher: few steps, so a shorter warmup than
# the reference 500 and a higher peak rate. Students: a larger SGD rate than the reference
# 5e-3 (which needs many epochs), the meta step every 2nd step, one compiled shape (T = 64)
# per setting, and smaller student validation / test sets.
DEMO_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=30, schedule="linear_decay",
                                  loop=LoopConfig(max_epochs=2, evals_per_epoch=2, patience=2))
DEMO_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, meta_interval=2,
    loop=LoopConfig(batch_size=16, max_epochs=2, patience=2, evals_per_epoch=1,
                    length_multiple=64))
DEMO_DATA = DataConfig(student_validation_size=500, student_test_size=1000)
DEMO_EXPLAINERS = ("none", "attention_all", "smat")
DEMO_SIZE = 256
DEMO_SEEDS = (0, 1)
NUM_SHOWN = 8


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
    print(f"[1/4] teacher: {teacher_dir}", flush=True)
    chosen = teacher_dir != output_dir / "teacher"
    teacher_record = reused_teacher(teacher_dir) if chosen else None
    if teacher_record is None:
        (teacher_record,) = run_teacher(data=DEMO_DATA, train=teacher,
                                        output_dir=teacher_dir, progress=progress)
    print(f"      test accuracy {teacher_record['test']['accuracy']:.4f}", flush=True)

    print(f"[2/4] students: {list(explainers)} x seeds {list(seeds)}, n={num_examples}",
          flush=True)
    records = run_grid(teacher_dir, sizes=[num_examples], explainers=explainers, seeds=seeds,
                       student=student, output_dir=output_dir / "students", progress=progress)
    table = simulability_table(records)

    print("[3/4] learned head coefficients", flush=True)
    smat_dir = output_dir / "students" / f"n{num_examples}" / "smat" / f"seed{seeds[0]}"
    figure = None
    if "smat" in explainers:
        weights = load_explainer(smat_dir / "explainer").head_weights()
        figure = plot_head_weights(weights, output_dir / "head_weights.png",
                                   title=f"SMaT head coefficients (seed {seeds[0]})")

    print("[4/4] explanations of test examples", flush=True)
    trained, _, parts, _ = load_run(teacher_dir, num_examples=num_examples)
    shown = take(parts.student_test, np.arange(NUM_SHOWN))
    names = ("gradient", "attention_all") + ((str(smat_dir / "explainer"),) if figure else ())
    explanations = explain_data(trained, shown, ExplainConfig(explainers=names))
    shown_name = {name: "smat (learned)" if name.endswith("explainer") else name
                  for name in explanations.scores}
    kinds = {shown_name[name]: score_kind(name) for name in explanations.scores}
    explanations = explanations._replace(scores={
        shown_name[name]: value for name, value in explanations.scores.items()})
    texts = [trained.tokenizer.decode(row[mask != 0], skip_special_tokens=True)
             for row, mask in zip(shown.input_ids, shown.attention_mask, strict=True)]
    pages = write_explanations(explanations, output_dir, texts=texts, kinds=kinds,
                               label_names=trained.info["label_names"])

    summary = {
        "teacher": {"test": teacher_record["test"],
                    "train_seconds": teacher_record["train_seconds"]},
        "students": records, "table": table, "num_examples": num_examples,
        "seeds": list(seeds), "head_weights_png": str(figure) if figure else None,
        "explanations_html": pages["html"],
        "presets": {"teacher": dataclasses.asdict(teacher),
                    "student": dataclasses.asdict(student)},
    }
    write_json_atomic(output_dir / "summary.json", summary)
    markdown = (f"Teacher test accuracy: {teacher_record['test']['accuracy'] * 100:.2f}%\n\n"
                f"Student test simulability (accuracy vs the teacher's predictions, %), "
                f"n={num_examples}, seeds {list(seeds)}:\n\n{table}\n")
    (output_dir / "summary.md").write_text(markdown)
    print(markdown)
    print(json.dumps({"summary": str(output_dir / "summary.md"), "figure": summary[
        "head_weights_png"], "html": pages["html"]}, indent=2))
    return summary
