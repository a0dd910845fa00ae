"""Table 5 of the SMaT paper: simulability (Pearson) on MT quality estimation, MLQE-PE.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
§5.3 and **Table 5**: a regression teacher (XLM-R-base) reads a source sentence and its
machine translation as a text pair and predicts the translation's direct-assessment score;
students trained on 2,100 / 4,200 / 8,400 pairs (5% / 10% / 20% of the 42,000 training
pairs of six language pairs, sampled from the teacher's own training set) with no
explainer, the static explainers and SMaT; simulability is the Pearson correlation between
student and teacher outputs on the test set; ``median [q25:q75]`` over 5 seeds.

What smat has offline, and what that changes (stated in every table this file writes):

- data: ``--data-dir`` (``data/mlqe_pe``, the GitHub release) holds three of the paper's
  six pairs (en-de, et-en, ro-en; 7,000 training pairs each). The texts are the
  post-editing release's tokenized source / MT lines (the words the word-level tags of
  Table 6 refer to) and the target is the DA ``z_mean`` of the same line. Without
  ``--data-dir`` the cpu and smoke variants read en-de from the Hugging Face Hub (WMT20's
  QE tasks 1 and 2, converted once into the data cache and checked to hold the same rows;
  ``docs/datasets.md``): its test20 has the DA scores and tokenized sentences this table
  reads, not the word tags (WMT20's blind word-level test set), which only Table 6 needs.
  The paper variant always needs ``--data-dir``.
- split: the teacher trains on every MLQE training pair (10% of them for its early
  stopping); the students' pool is the teacher's training rows
  (``StudentTrainConfig.student_pool = "teacher_train"``, the paper's protocol for this
  task), their validation and test rows come from MLQE's dev and test20 pairs, which the
  teacher never saw (its test metric is read on the same test rows).
- encoder: all-MiniLM-L6-v2 (6 layers x 12 heads, English vocabulary), not XLM-R-base
  (12 x 12, multilingual), which is not available offline. It reads the English side of
  each pair (the source of en-de, the translation of et-en and ro-en) and splits German,
  Estonian and Romanian words into word pieces it has no pretrained meaning for, so its
  teacher is weaker than the paper's (0.63 Pearson).

Variants (``get_config``):

- ``paper`` (for a GPU): the three pairs (21,000 training pairs), max length 128, student
  sizes 1,050 / 2,100 / 4,200 (the paper's 5% / 10% / 20%), 5 seeds, the seven settings;
  the authors' regression recipe (batch 16, patience 5, no practical epoch cap; outer Adam
  2e-4, ``smat.training.student.OUTER_LEARNING_RATE``).
- ``cpu`` (2 CPU cores): en-de only, max length 96, sizes 350 / 700 (5% / 10% of its 7,000
  training pairs), 3 seeds trained as one vmapped program, settings none /
  attention_all / smat, at most 4 student epochs with SGD 0.05 as in Table 1's cpu variant.
- ``reference``: the cpu layout (en-de, sizes 350 / 700, none / attention_all / smat) at
  the reference's time scale: 5 seeds, SGD 5e-3, patience 10, an epoch cap that does not
  bind (days on 2 cores: every student takes hundreds of steps).
- ``smoke``: the cpu layout shrunk to one size, two seeds and one epoch, for the tests.

Commands (resumable: a killed run restarts at the first unfinished student):

    python experiments/smat_table5_mlqe.py --variant cpu --data-dir data/mlqe_pe
    python experiments/smat_table5_mlqe.py --variant paper --data-dir data/mlqe_pe

Writes into the output folder: ``data/`` (the pairs as CSV files the teacher run reads),
``config.json``, ``table.md`` (measured and paper tables), ``results.json`` and
``simulability.png``; ``students/n{SIZE}/smat/seed{S}/explainer`` are the learned
explainers that Table 6's plausibility reads.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import (
    command_runtime,
    data_dir_or_hub,
    finished_share,
    grid_options,
    parse_variant_args,
    variant_parser,
)
from smat.data.mlqe import load_mlqe
from smat.data.protocol import DataConfig
from smat.jobs.experiment import ExperimentConfig, PaperTable, run_experiment
from smat.models import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.training.loop import LoopConfig, with_loop
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

SETTINGS = ("none", "gradient", "input_x_gradient", "integrated_gradients", "attention_all",
            "attention_last", "smat")
VARIANTS = ("paper", "cpu", "reference", "smoke")
# The data set each variant reads when --data-dir is not given (smat.data.hub_sets): the Hub
# holds en-de only, not the paper variant's three pairs.
HUB_DATA = {"cpu": "mlqe_pe", "reference": "mlqe_pe", "smoke": "mlqe_pe"}
DATA_DIR_HELP = ("the MLQE-PE folder (holding direct-assessments/ and post-editing/, e.g. "
                 "data/mlqe_pe); without it, the cpu, reference and smoke variants read en-de "
                 "from the Hugging Face Hub, converted once into the data cache")

# Table 5 of the paper (MLQE-PE, six pairs, XLM-R-base), median [q25:q75] Pearson at
# 2,100 / 4,200 / 8,400 students' training pairs.
PAPER_TABLE5 = PaperTable(caption="MLQE-PE, six pairs, XLM-R-base", sizes=(2100, 4200, 8400),
                          teacher="0.63 with XLM-R-base", cells={
    "none": (".7457 [.7366:.7528]", ".7719 [.7660:.7802]", ".7891 [.7860:.7964]"),
    "gradient": (".8065 [.8038:.8268]", ".8535 [.7117:.8544]", ".8638 [.8411:.8657]"),
    "input_x_gradient": (".6846 [.6781:.6894]", ".6922 [.6885:.6965]", ".7141 [.7136:.7147]"),
    "integrated_gradients": (".6686 [.6677:.6694]", ".7086 [.6994:.7101]",
                             ".7036 [.6976:.7037]"),
    "attention_all": (".8120 [.7955:.8125]", ".8193 [.8186:.8280]", ".8467 [.8464:.8521]"),
    "attention_last": (".7486 [.7484:.7534]", ".7720 [.7672:.7726]", ".7798 [.7717:.7814]"),
    "smat": (".8156 [.8096:.8183]", ".8630 [.8412:.8724]", ".8561 [.8512:.8689]"),
})

# The authors' regression students: batch 16, patience 5, no practical epoch cap.
PAPER_STUDENT = StudentTrainConfig(
    ig_steps=10, student_pool="teacher_train",
    loop=LoopConfig(batch_size=16, max_epochs=100, patience=5, parallel_seeds=True))
# Students scaled to 2 cores, as Table 1's cpu variant: a few epochs, SGD 0.05.
CPU_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, ig_steps=10, student_pool="teacher_train",
    loop=LoopConfig(batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))
# The cpu layout's students at the reference's time scale: SGD 5e-3, patience 10, an epoch
# cap that does not bind, 5 seeds.
REFERENCE_STUDENT = dataclasses.replace(PAPER_STUDENT, loop=dataclasses.replace(
    PAPER_STUDENT.loop, max_epochs=1000, patience=10))
CPU_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=50,
                                 schedule="linear_decay",
                                 loop=LoopConfig(batch_size=32, max_epochs=3, patience=2,
                                                 evals_per_epoch=2))


def write_pair_files(data_dir: str | Path, language_pairs: Sequence[str],
                     folder: Path) -> tuple[Path, Path]:
    """MLQE-PE as the two CSV files (columns source, mt, score) a teacher run reads: the
    training pairs, and the dev + test20 pairs the students' validation and test rows come
    from. Written atomically (a killed run never leaves half a file); the teacher run's
    data fingerprint notices any change.

    Raises:
      FileNotFoundError / ValueError: as :func:`smat.data.mlqe.load_mlqe`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    # the tokenized texts (the words Table 6's tags refer to), without reading the tags
    read = dict(language_pairs=language_pairs, word_tags=False, texts="tokenized")
    parts = {"train.csv": [load_mlqe(data_dir, split="train", **read)],
             "held_out.csv": [load_mlqe(data_dir, split=split, **read)
                              for split in ("dev", "test")]}
    for name, datasets in parts.items():
        partial = folder / f".{name}.partial"
        with partial.open("w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream)
            writer.writerow(["source", "mt", "score"])
            for dataset in datasets:
                data = dataset.data
                writer.writerows(zip(data.texts, data.text_pairs, data.labels.tolist(),
                                     strict=True))
        os.replace(partial, folder / name)
    return folder / "train.csv", folder / "held_out.csv"


@dataclasses.dataclass(frozen=True)
class MlqeVariant:
    """One variant: the language pairs and the experiment over their pair files.

    Attributes:
      pairs: the MLQE-PE language pairs read.
      experiment: the teacher, students and report (its data reads the pair files).
    """

    pairs: tuple[str, ...]
    experiment: ExperimentConfig


def data_config(train: Path, held_out: Path, *, max_len: int, validation: int,
                test: int) -> DataConfig:
    """The teacher run's data: every training pair for the teacher (10% of them for its
    early stopping), the students' validation and test rows from the held-out pairs."""
    return DataConfig(source=str(train), student_source=(str(held_out),), task="regression",
                      text_column="source", text_pair_column="mt", label_column="score",
                      max_len=max_len, teacher_fraction=1.0, student_validation_size=validation,
                      student_test_size=test)


def get_config(variant: str, *, output_dir: str | Path) -> MlqeVariant:
    """One variant (of :data:`VARIANTS`), whose pair files lie in ``output_dir/data``.

    Raises:
      ValueError: an unknown variant.
    """
    files = Path(output_dir) / "data" / "train.csv", Path(output_dir) / "data" / "held_out.csv"
    if variant == "paper":
        return MlqeVariant(pairs=("en-de", "et-en", "ro-en"), experiment=ExperimentConfig(
            data=data_config(*files, max_len=128, validation=1000, test=3000),
            teacher=TeacherTrainConfig(loop=LoopConfig(batch_size=16, max_epochs=100,
                                                       patience=5)),
            student=PAPER_STUDENT, sizes=(1050, 2100, 4200), seeds=(0, 1, 2, 3, 4),
            explainers=SETTINGS, metric="pearson", task="MLQE-PE", paper=PAPER_TABLE5))
    cpu = MlqeVariant(pairs=("en-de",), experiment=ExperimentConfig(
        data=data_config(*files, max_len=96, validation=500, test=1000),
        teacher=CPU_TEACHER, student=CPU_STUDENT, sizes=(350, 700), seeds=(0, 1, 2),
        explainers=("none", "attention_all", "smat"), metric="pearson", task="MLQE-PE",
        paper=PAPER_TABLE5))
    if variant == "cpu":
        return cpu
    if variant == "reference":
        return dataclasses.replace(cpu, experiment=dataclasses.replace(
            cpu.experiment, student=REFERENCE_STUDENT, seeds=(0, 1, 2, 3, 4)))
    if variant == "smoke":
        return dataclasses.replace(cpu, experiment=dataclasses.replace(
            cpu.experiment, data=data_config(*files, max_len=32, validation=16, test=24),
            teacher=dataclasses.replace(CPU_TEACHER, warmup_steps=2, loop=dataclasses.replace(
                CPU_TEACHER.loop, batch_size=16, max_epochs=1)),
            student=with_loop(CPU_STUDENT, max_epochs=1, patience=1), sizes=(32,),
            seeds=(0, 1)))
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


def run(variant: str, *, data_dir: str | Path, output_dir: str | Path,
        encoder: str | None = None, progress: bool = True,
        grid: Callable[[ExperimentConfig], ExperimentConfig] = lambda config: config,
        share: tuple[int, int] = (0, 1), join_timeout: float = JOIN_TIMEOUT) -> dict[str, Any]:
    """Write the pair files, train (or reuse) the teacher and every student of the grid,
    write the tables. Returns the summary written to ``results.json``.

    `encoder`: the pretrained encoder (default: the offline all-MiniLM-L6-v2); `grid`: the
    variant's experiment as the command line narrows it; `share`, `join_timeout`: as
    :func:`smat.jobs.experiment.run_experiment` (share 0 writes the pair files, before the
    teacher that the other shares wait for).
    """
    config = get_config(variant, output_dir=output_dir)
    if share[0] == 0:
        write_pair_files(data_dir, config.pairs, Path(output_dir) / "data")
    experiment = grid(dataclasses.replace(config.experiment, model=ModelSource(encoder)))
    return run_experiment(experiment, variant=variant, output_dir=output_dir,
                          progress=progress, recorded={"data_dir": str(data_dir),
                                                       "pairs": list(config.pairs)},
                          share=share, join_timeout=join_timeout)


def main(argv: Sequence[str] | None = None) -> None:
    # no --teacher: the experiment trains its own teacher on the MLQE-PE split it writes
    # (OUTPUT_DIR/teacher is reused when finished)
    parser = variant_parser(__doc__, name="smat_table5_mlqe", variants=VARIANTS,
                            data_dir_help=DATA_DIR_HELP, grid=True)
    args = parse_variant_args(parser, argv)
    if args.data_dir is None and args.variant not in HUB_DATA:
        pairs = get_config(args.variant, output_dir=args.output_dir).pairs
        parser.error(f"the {args.variant} variant reads {', '.join(pairs)} and the Hugging Face "
                     "Hub holds en-de only: pass --data-dir, the MLQE-PE folder (holding "
                     "direct-assessments/ and post-editing/, e.g. data/mlqe_pe)")
    with command_runtime(parser, driver=__file__):
        data_dir = data_dir_or_hub(args.data_dir, HUB_DATA.get(args.variant))
        summary = run(args.variant, data_dir=data_dir, output_dir=args.output_dir,
                      progress=not args.no_progress, **grid_options(args))
    if finished_share(summary):
        return
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
