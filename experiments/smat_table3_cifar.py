"""Table 3 of the SMaT paper: simulability on CIFAR-100 with a ViT, for a GPU.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§5.2 and **Table 3**: a ViT-base with 16 x 16 patches pretrained on ImageNet-21k, images
up-sampled to 224 x 224; CIFAR-100's training set split into 45,000 training and 5,000
validation images for the teacher (89% test accuracy); students trained on 2,250 / 4,500 /
9,000 (5 / 10 / 20%) of the teacher's training images with no explainer, the gradient
explainers, static attention and SMaT, 5 seeds; ``median [q25:q75]`` test simulability.

Needs two local folders (nothing is downloaded):

- ``--data-dir``: CIFAR-100 as ``train.npz`` and ``test.npz`` (arrays ``images`` (N, 32,
  32, 3) uint8, ``labels``, optional ``label_names``) or as ``train/`` and ``test/`` folders
  of class sub-folders;
- ``--vit-dir``: the Hugging Face checkpoint ``google/vit-base-patch16-224-in21k``
  (config.json, model.safetensors, preprocessor_config.json, whose mean and deviation the
  images are normalised with).

Here the teacher trains on CIFAR-100's train split (teacher fraction 1: 90% training,
10% validation, the paper's 45,000 / 5,000) and the students draw their training images
from the teacher's (``student_pool="teacher_train"``); their validation (500) and test
(9,000) images come from the test split (the other 500 are unused). Student settings are
the reference's (SGD 5e-3, batch 32, patience 10, the meta update every step). It needs a
GPU: on 2 CPU cores a ViT-base step at 224 x 224 takes seconds, a teacher epoch hours.

Variants: ``paper`` and ``smoke`` (the tests: a tiny ViT trained from the checkpoint
folder's config.json alone, one small size, 1 epoch).

Command (resumable: a killed run restarts at the first unfinished student)::

    python experiments/smat_table3_cifar.py --variant paper --data-dir CIFAR100_DIR \\
        --vit-dir VIT_DIR --output-dir runs/smat_table3_cifar
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import (
    command_runtime,
    finished_share,
    grid_options,
    parse_variant_args,
    variant_parser,
)
from smat.data.protocol import DataConfig
from smat.jobs.experiment import ExperimentConfig, PaperTable, run_experiment
from smat.models import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

VARIANTS = ("paper", "smoke")
SETTINGS = ("none", "gradient", "input_x_gradient", "integrated_gradients", "attention_all",
            "attention_last", "smat")
# Table 3 of the paper (CIFAR-100, accuracy %), median [q25:q75] at 2,250 / 4,500 / 9,000.
PAPER_TABLE3 = PaperTable(caption="CIFAR-100, ViT-base/16", sizes=(2250, 4500, 9000), cells={
    "none": ("81.16 [80.98:81.26]", "84.02 [83.98:84.24]", "85.20 [85.17:85.26]"),
    "gradient": ("80.97 [80.91:81.10]", "83.98 [83.81:84.23]", "85.13 [84.97:85.50]"),
    "input_x_gradient": ("80.93 [80.82:81.04]", "83.99 [83.98:84.13]", "85.33 [84.85:85.35]"),
    "integrated_gradients": ("80.22 [80.17:80.35]", "83.44 [83.25:83.44]",
                             "84.99 [84.76:85.22]"),
    "attention_all": ("82.53 [82.53:82.62]", "84.81 [84.74:84.92]", "85.92 [85.78:85.94]"),
    "attention_last": ("82.34 [82.30:82.60]", "84.65 [84.56:84.81]", "85.31 [84.84:85.31]"),
    "smat": ("83.09 [82.77:83.28]", "85.42 [85.39:85.85]", "85.96 [85.74:86.35]"),
})


def get_config(variant: str, *, data_dir: str | Path, vit_dir: str | Path) -> ExperimentConfig:
    """One variant (of :data:`VARIANTS`) on the CIFAR-100 folder `data_dir` (its splits:
    :func:`split_files`) and the ViT checkpoint folder `vit_dir`.

    Raises:
      ValueError: an unknown variant.
      FileNotFoundError: a missing data split or checkpoint config.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")
    if not (Path(vit_dir) / "config.json").is_file():
        raise FileNotFoundError(f"--vit-dir {vit_dir} holds no config.json (a Hugging Face "
                                "ViT checkpoint folder)")
    train, test = split_files(data_dir)
    data = DataConfig(source=train, student_source=(test,), modality="image",
                      teacher_fraction=1.0, student_validation_size=500,
                      student_test_size=9000)
    paper = ExperimentConfig(
        data=data, model=ModelSource(encoder=str(vit_dir), pooling="cls"),
        teacher=TeacherTrainConfig(loop=LoopConfig(batch_size=32, max_epochs=10,
                                                   evals_per_epoch=2, patience=5)),
        student=StudentTrainConfig(ig_steps=10, student_pool="teacher_train", loop=LoopConfig(
            max_epochs=100, patience=10, parallel_seeds=True)),
        sizes=PAPER_TABLE3.sizes, seeds=(0, 1, 2, 3, 4), explainers=SETTINGS,
        task="CIFAR-100", paper=PAPER_TABLE3)
    if variant == "paper":
        return paper
    return dataclasses.replace(  # smoke: a tiny ViT from the folder's config.json alone
        paper, data=dataclasses.replace(data, student_validation_size=8, student_test_size=16),
        model=dataclasses.replace(paper.model, from_scratch=True),
        teacher=TeacherTrainConfig(learning_rate=1e-3, warmup_steps=2,
                                   loop=LoopConfig(batch_size=8, max_epochs=1)),
        student=StudentTrainConfig(inner_learning_rate=0.05, student_pool="teacher_train",
                                   loop=LoopConfig(batch_size=8, max_epochs=1,
                                                   parallel_seeds=True)),
        sizes=(16,), seeds=(0, 1), explainers=("none", "attention_all", "smat"))


def split_files(data_dir: str | Path) -> tuple[str, str]:
    """CIFAR-100's train and test sources in `data_dir`: ``NAME.npz``, else ``NAME/``.

    Raises:
      FileNotFoundError: either is missing (the message names what was looked for).
    """
    found = []
    for name in ("train", "test"):
        candidates = [Path(data_dir) / f"{name}.npz", Path(data_dir) / name]
        existing = [c for c in candidates if c.exists()]
        if not existing:
            raise FileNotFoundError(f"--data-dir {data_dir}: no {candidates[0].name} or "
                                    f"{candidates[1].name}/ (CIFAR-100's {name} split)")
        found.append(str(existing[0]))
    return found[0], found[1]


def run(variant: str, *, data_dir: str | Path, vit_dir: str | Path, output_dir: str | Path,
        progress: bool = True,
        grid: Callable[[ExperimentConfig], ExperimentConfig] = lambda config: config,
        share: tuple[int, int] = (0, 1), join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Train (or reuse) the teacher and every student of the grid; write the table and
    figures. Returns the summary written to ``results.json`` (or, for a share other than
    0, its records). `grid`: the variant's experiment as the command line narrows it;
    `share`, `join_timeout`: as :func:`smat.jobs.experiment.run_experiment`.

    Raises:
      FileNotFoundError: a missing data split or checkpoint config.
    """
    return run_experiment(grid(get_config(variant, data_dir=data_dir, vit_dir=vit_dir)),
                          variant=variant, output_dir=output_dir, progress=progress,
                          share=share, join_timeout=join_timeout)


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_table3_cifar",
                            variants=VARIANTS, data_dir_help="folder with CIFAR-100's "
                            "train.npz and test.npz (or train/ and test/ image folders)",
                            grid=True)
    parser.add_argument("--vit-dir", required=True,
                        help="the google/vit-base-patch16-224-in21k checkpoint folder")
    args = parse_variant_args(parser, argv)
    if args.data_dir is None:
        parser.error("--data-dir is required: a folder with CIFAR-100's train and test")
    with command_runtime(parser, driver=__file__):
        summary = run(args.variant, data_dir=args.data_dir, vit_dir=args.vit_dir,
                      output_dir=args.output_dir, progress=not args.no_progress,
                      **grid_options(args))
    if finished_share(summary):
        return
    print((Path(args.output_dir) / "table.md").read_text())
    print(json.dumps({"seconds_this_call": summary["seconds_this_call"]}))


if __name__ == "__main__":
    main()
