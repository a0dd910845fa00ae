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

Variants: ``cpu`` (2 CPU cores; sizes 60 / 120 / 240, 5 seeds vmapped), ``reference``
(the same at the reference's time scale: students at SGD 5e-3, patience 10, an epoch cap
that does not bind) and ``smoke`` (the tests: the first 300 digits, one size, 2 seeds, one
or two epochs).

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.cli.experiment import (
    command_runtime,
    finished_share,
    grid_options,
    parse_variant_args,
    variant_parser,
)
from smat.data.protocol import DataConfig
from smat.jobs.experiment import ExperimentConfig, run_experiment
from smat.jobs.teacher_run import run_teacher
from smat.models import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig, with_loop
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

VARIANTS = ("cpu", "reference", "smoke")
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
# the reference's time scale: its students' SGD rate, 5e-3, and an epoch cap far above
# where patience 10 stops them (20x the cpu variant's rate needs many more epochs)
REFERENCE_STUDENT = dataclasses.replace(STUDENT, inner_learning_rate=5e-3,
                                        loop=with_loop(STUDENT, max_epochs=3000).loop)


@dataclasses.dataclass(frozen=True)
class DigitsVariant:
    """One variant: the experiment over the digits, and the rotation pretext before it.

    Attributes:
      experiment: the teacher (on the pretext encoder), students and report.
      pretext: how the ViT trains from scratch on the rotations.
      images: how many digits are used (None: all 1,797).
    """

    experiment: ExperimentConfig
    pretext: TeacherTrainConfig
    images: int | None = None


def get_config(variant: str, *, output_dir: str | Path) -> DigitsVariant:
    """One variant (of :data:`VARIANTS`), whose data and pretext model lie in `output_dir`.

    Raises:
      ValueError: an unknown variant.
    """
    output_dir = Path(output_dir)
    data = DataConfig(source=str(output_dir / "data" / "digits.npz"), modality="image")
    cpu = DigitsVariant(experiment=ExperimentConfig(
        data=dataclasses.replace(data, student_validation_size=200, student_test_size=400),
        model=ModelSource(encoder=str(output_dir / "pretext" / "model"), pooling="cls"),
        teacher=TEACHER, student=STUDENT, sizes=(60, 120, 240), seeds=(0, 1, 2, 3, 4),
        explainers=("none", "attention_all", "smat"), task="digits"), pretext=PRETEXT)
    if variant == "cpu":
        return cpu
    if variant == "reference":
        return dataclasses.replace(cpu, experiment=dataclasses.replace(
            cpu.experiment, student=REFERENCE_STUDENT))
    if variant == "smoke":
        short = LoopConfig(batch_size=32, max_epochs=1, patience=1)
        return DigitsVariant(experiment=dataclasses.replace(
            cpu.experiment,
            data=dataclasses.replace(data, student_validation_size=32, student_test_size=64),
            teacher=dataclasses.replace(TEACHER, warmup_steps=5,
                                        loop=dataclasses.replace(short, max_epochs=2)),
            student=with_loop(STUDENT, max_epochs=1, patience=1), sizes=(32,), seeds=(0, 1)),
            pretext=dataclasses.replace(TEACHER, warmup_steps=5, loop=short), images=300)
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


def run(variant: str, *, output_dir: str | Path, progress: bool = True,
        grid: Callable[[ExperimentConfig], ExperimentConfig] = lambda config: config,
        share: tuple[int, int] = (0, 1), join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Write the data and the ViT's config, train (or reuse) the pretext model, the teacher
    and every student; write the table and figures. Returns the summary written to
    ``results.json`` (or, for a share other than 0, its records). `grid`: the variant's
    experiment as the command line narrows it; `share`, `join_timeout`: as
    :func:`smat.jobs.experiment.run_experiment` (share 0 writes the data and trains the
    pretext model, before the teacher that the other shares wait for)."""
    output_dir = Path(output_dir)
    config = get_config(variant, output_dir=output_dir)
    experiment = grid(config.experiment)
    pretext_data = dataclasses.replace(experiment.data,
                                       source=str(output_dir / "data" / "rotations.npz"),
                                       teacher_fraction=0.9)
    scratch = ModelSource(encoder=str(output_dir / "vit"), pooling="cls", from_scratch=True)
    if share[0] == 0:
        write_digits(output_dir / "data", limit=config.images)
        write_vit_config(output_dir / "vit")
        (pretext,) = run_teacher(data=pretext_data, train=config.pretext, model=scratch,
                                 output_dir=output_dir / "pretext", progress=progress)
    summary = run_experiment(experiment, variant=variant, output_dir=output_dir,
                             progress=progress, recorded={
                                 "pretext_data": pretext_data.settings(),
                                 "pretext_model": scratch.settings(),
                                 "pretext": dataclasses.asdict(config.pretext)},
                             share=share, join_timeout=join_timeout)
    if share[0] != 0:
        return summary
    summary["pretext_test"] = pretext["test"]
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_digits", variants=VARIANTS, grid=True)
    args = parse_variant_args(parser, argv)
    with command_runtime(parser, driver=__file__):
        summary = run(args.variant, output_dir=args.output_dir, progress=not args.no_progress,
                      **grid_options(args))
    if finished_share(summary):
        return
    print((Path(args.output_dir) / "table.md").read_text())
    print(json.dumps({"seconds_this_call": summary["seconds_this_call"]}))


if __name__ == "__main__":
    main()
