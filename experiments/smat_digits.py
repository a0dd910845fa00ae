"""SMaT on images, offline: scikit-learn's bundled handwritten digits and a small ViT.

The paper's image experiment (Fernandes et al. 2022, §5.2 and Table 3: CIFAR-100 with a
pretrained ViT-base/16, students of 2,250 / 4,500 / 9,000 images) needs a checkpoint and a
data set this machine does not have (``smat_table3_cifar.py`` is that design for a GPU).
This is its offline stand-in: the 1,797 8 x 8 digits of ``sklearn.datasets.load_digits``
upsampled to 16 x 16 and a 4-layer ViT (4 heads, 4 x 4 patches: 16 heads over 16
patches). As the paper's ViT is pretrained before either model sees CIFAR's labels, the
ViT is first trained from scratch on a pretext task that uses no digit label: which of
four rotations (0, 90, 180, 270 degrees) an image was turned by, over every image
(RotNet-style self-supervision; ``smat train-teacher --from-scratch``). The teacher
fine-tunes that encoder on half of the digits, and students of three sizes carved from the
other half start from the same encoder (one shared head initialisation, 5 seeds) with no
explainer, static all-layers attention and SMaT, through the same jobs as text (``smat
train-teacher --encoder PRETEXT/model``, ``smat train-student``). From a random encoder
SGD students do not learn the digits at all (11-16% at n=240, SGD 0.1-1.0, 60 epochs); from
the pretext encoder one reaches 85% at SGD 0.1, the rate used here (the reference's 5e-3
fine-tunes a large pretrained encoder).

Variants: ``cpu`` (2 CPU cores; sizes 60 / 120 / 240, 5 seeds vmapped) and ``smoke`` (the
tests: the first 300 digits, one size, 2 seeds, one or two epochs).

Command (resumable: a killed run restarts at the first unfinished student)::

    python experiments/smat_digits.py --variant cpu --output-dir runs/smat_digits_cpu

Writes the digits (``data/digits.npz``) and their rotations (``data/rotations.npz``), the
ViT's ``vit/config.json``, the pretext run (``pretext/``), ``table.md``,
``results.json``, ``simulability.png`` and ``head_weights.png`` into the output folder.
Measured runtime and results: docs/reproduce/smat.md ("Images: digits").
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from command_line import command_runtime, parse_variant_args, variant_parser
from smat_table1 import comparisons_table, paired_comparisons, per_student_table, plot_figure5

from smat.data.protocol import DataConfig
from smat.evaluation.simulability import plot_simulability, simulability_table
from smat.jobs.grid import run_grid
from smat.jobs.teacher_run import run_teacher
from smat.models import ModelSource
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

VARIANTS = ("cpu", "smoke")
# A small ViT on 16 x 16 digits: 16 patches of 4 x 4, 4 layers x 4 heads (Hugging Face's
# config.json keys, so `--encoder` reads it like any checkpoint folder's).
VIT = {"model_type": "vit", "image_size": 16, "patch_size": 4, "num_channels": 3,
       "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
       "intermediate_size": 128, "hidden_act": "gelu"}
# a small model: a higher rate and a longer warmup than fine-tuning's 5e-5
TEACHER = TeacherTrainConfig(learning_rate=1e-3, warmup_steps=100, weight_decay=0.05,
                             loop=LoopConfig(batch_size=32, max_epochs=60, patience=10))
PRETEXT = dataclasses.replace(TEACHER, loop=LoopConfig(batch_size=32, max_epochs=10,
                                                       patience=4))
# the reference's stopping (up to 100 epochs, patience 10); a 60-epoch cap stopped most
# students while they still improved (docs/results/smat_digits_cpu/epochs60_table.md)
STUDENT = StudentTrainConfig(inner_learning_rate=0.1, loop=LoopConfig(
    batch_size=16, max_epochs=100, patience=10, parallel_seeds=True))


def get_config(variant: str) -> dict[str, Any]:
    """The data split, teacher and student grid of one variant (one of :data:`VARIANTS`).

    Raises:
      ValueError: an unknown variant.
    """
    if variant == "cpu":
        return {"split": {"student_validation_size": 200, "student_test_size": 400},
                "images": None, "teacher": TEACHER, "pretext": PRETEXT, "sizes": [60, 120, 240],
                "seeds": [0, 1, 2, 3, 4], "explainers": ["none", "attention_all", "smat"],
                "student": STUDENT}
    if variant == "smoke":
        return {"split": {"student_validation_size": 32, "student_test_size": 64},
                "images": 300,
                "teacher": dataclasses.replace(TEACHER, warmup_steps=5, loop=LoopConfig(
                    batch_size=32, max_epochs=2, patience=1)),
                "pretext": dataclasses.replace(TEACHER, warmup_steps=5, loop=LoopConfig(
                    batch_size=32, max_epochs=1, patience=1)),
                "sizes": [32], "seeds": [0, 1],
                "explainers": ["none", "attention_all", "smat"],
                "student": dataclasses.replace(STUDENT, loop=dataclasses.replace(
                    STUDENT.loop, max_epochs=1, patience=1))}
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


def write_digits(folder: Path, *, limit: int | None = None) -> tuple[Path, Path]:
    """scikit-learn's bundled digits as ``digits.npz``, (1797, 8, 8) grey images in 0-255
    (the data set's 0-16 ink levels scaled) with labels "0".."9" (the first `limit` of
    them), and the pretext task's ``rotations.npz``: every image turned by 0, 90, 180 and
    270 degrees, labelled by the rotation (no digit label)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.round(digits.images[:limit] * 255 / 16).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "digits.npz", images=images, labels=digits.target[:limit],
             label_names=np.array([str(d) for d in range(10)]))
    np.savez(folder / "rotations.npz",
             images=np.concatenate([np.rot90(images, k, axes=(1, 2)) for k in range(4)]),
             labels=np.repeat(np.arange(4), len(images)),
             label_names=np.array(["0", "90", "180", "270"]))
    return folder / "digits.npz", folder / "rotations.npz"


def write_vit_config(folder: Path) -> Path:
    """The small ViT's ``config.json`` (no weights: it trains from scratch)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / "config.json", VIT)
    return folder


def run(variant: str, *, output_dir: str | Path, progress: bool = True) -> dict[str, Any]:
    """Write the data and the ViT's config, train (or reuse) the teacher and every student;
    write the table and figures. Returns the summary written to ``results.json``."""
    config = get_config(variant)
    output_dir = Path(output_dir)
    digits, rotations = write_digits(output_dir / "data", limit=config["images"])
    data = DataConfig(source=str(digits), modality="image", **config["split"])
    pretext_data = DataConfig(source=str(rotations), modality="image", teacher_fraction=0.9,
                              **config["split"])
    scratch = ModelSource(encoder=str(write_vit_config(output_dir / "vit")), pooling="cls",
                          from_scratch=True)
    model = ModelSource(encoder=str(output_dir / "pretext" / "model"), pooling="cls")
    write_json_atomic(output_dir / "config.json", {
        "variant": variant, "data": data.settings(), "pretext_data": pretext_data.settings(),
        "model": scratch.settings(), "pretext": dataclasses.asdict(config["pretext"]),
        "teacher": dataclasses.asdict(config["teacher"]),
        "student": dataclasses.asdict(config["student"]),
        **{key: config[key] for key in ("sizes", "seeds", "explainers")}})
    start = time.perf_counter()
    (pretext,) = run_teacher(data=pretext_data, train=config["pretext"], model=scratch,
                             output_dir=output_dir / "pretext", progress=progress)
    teacher, records = teacher_and_students(config, data, model, output_dir, progress)
    summary = write_report(output_dir, variant=variant, teacher=teacher, records=records,
                           task="digits", start=start)
    summary["pretext_test"] = pretext["test"]
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def teacher_and_students(config: dict[str, Any], data: DataConfig, model: ModelSource,
                         output_dir: Path, progress: bool) -> tuple[dict[str, Any], list]:
    """Train (or reuse) the teacher under ``output_dir/teacher`` and the students of
    `config`'s grid under ``output_dir/students``; returns the teacher's record and the
    students'."""
    teacher_dir = output_dir / "teacher"
    (teacher,) = run_teacher(data=data, train=config["teacher"], output_dir=teacher_dir,
                             model=model, progress=progress)
    records = run_grid(teacher_dir, sizes=config["sizes"], explainers=config["explainers"],
                       seeds=config["seeds"], student=config["student"],
                       output_dir=output_dir / "students", progress=progress)
    return teacher, records


def write_report(output_dir: Path, *, variant: str, teacher: dict[str, Any],
                 records: list[dict[str, Any]], task: str,
                 start: float, paper: str = "") -> dict[str, Any]:
    """An image simulability grid's ``table.md`` (measured, paired over seeds, steps, and
    the `paper`'s table when given), ``simulability.png``, the median SMaT student's
    ``head_weights.png`` and ``results.json``; returns the summary written there."""
    table = simulability_table(records)
    plot_simulability(records, output_dir / "simulability.png")
    figure5 = plot_figure5(records, output_dir / "head_weights.png", task=task)
    comparisons = paired_comparisons(records)
    text = (f"Teacher test accuracy {100 * teacher['test']['accuracy']:.2f}%.\n\n"
            f"Measured ({variant}):\n\n{table}\n\n"
            f"Paired over seeds (one-sided Wilcoxon signed-rank, one trained student per "
            f"seed):\n\n{comparisons_table(comparisons)}\n\nTraining steps per student "
            f"(median [min:max]):\n\n{per_student_table(records)}\n"
            + (f"\nPaper:\n\n{paper}\n" if paper else ""))
    (output_dir / "table.md").write_text(text)
    summary = {"variant": variant, "table": table, "teacher_test": teacher["test"],
               "teacher_steps": teacher["steps"], "records": records,
               "figure_seed": figure5.get("figure5_seed"), "paired_over_seeds": comparisons,
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_digits", variants=VARIANTS)
    args = parse_variant_args(parser, argv)
    with command_runtime(parser):
        summary = run(args.variant, output_dir=args.output_dir, progress=not args.no_progress)
    print((Path(args.output_dir) / "table.md").read_text())
    print(json.dumps({"seconds_this_call": summary["seconds_this_call"]}))


if __name__ == "__main__":
    main()
