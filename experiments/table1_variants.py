"""The variants of the SMaT paper's Table 1 grid, as data: which teacher, data and
students each runs. ``smat_table1.py`` runs them; ``smat_table7_normalizers.py`` runs the
same teachers and students under other normalizers. See ``smat_table1.py`` for what each
variant is for.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from smat.data.protocol import DataConfig
from smat.jobs.experiment import ExperimentConfig, PaperTable
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

SETTINGS = ("none", "gradient", "input_x_gradient", "integrated_gradients", "attention_all",
            "attention_last", "smat")
VARIANTS = ("paper", "gpu", "cpu", "sst2", "smoke")
DATA_DIR_HELP = ("folder with IMDB's test.jsonl.gz (paper and gpu variants) or GLUE SST-2's "
                 "tsv files (sst2 variant); without it, the variant's data set comes from the "
                 "Hugging Face Hub, converted once into the data cache")
# The data set each variant reads when --data-dir is not given (smat.data.hub_sets).
HUB_DATA = {"paper": "imdb_maas", "gpu": "imdb_maas", "sst2": "sst2_glue"}

# Table 1 of the paper (IMDB, accuracy %), median [q25:q75] at 500 / 1,000 / 2,000.
PAPER_TABLE1 = PaperTable(caption="IMDB, ELECTRA-small", sizes=(500, 1000, 2000), cells={
    "none": ("81.72 [81.24:81.75]", "83.44 [83.36:83.63]", "84.84 [84.80:84.88]"),
    "gradient": ("81.66 [81.32:82.00]", "82.98 [82.72:83.08]", "84.78 [84.96:85.08]"),
    "input_x_gradient": ("84.83 [84.79:84.88]", "81.15 [80.95:81.36]", "83.84 [83.59:84.99]"),
    "integrated_gradients": ("82.99 [82.59:82.99]", "81.79 [81.72:81.87]",
                             "84.20 [84.03:85.03]"),
    "attention_all": ("83.00 [82.60:83.00]", "85.72 [85.72:86.23]", "90.08 [89.72:90.11]"),
    "attention_last": ("80.91 [79.99:81.07]", "83.15 [82.91:83.51]", "91.47 [91.39:91.56]"),
    "smat": ("91.48 [91.40:91.56]", "92.56 [92.28:92.83]", "92.84 [92.84:93.08]"),
})

# The README's teacher on the offline corpus (few steps: short warmup, higher peak rate).
CPU_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=30, schedule="linear_decay",
                                 loop=LoopConfig(max_epochs=2, evals_per_epoch=2, patience=2))
# Students scaled to 2 cores: a few epochs, so a larger SGD rate than the reference 5e-3.
CPU_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, ig_steps=10,
    loop=LoopConfig(batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))
# The reference's students (SGD 5e-3, batch 32, patience 10, the meta step every step).
REFERENCE_STUDENT = StudentTrainConfig(ig_steps=10, loop=LoopConfig(
    batch_size=32, max_epochs=100, patience=10, parallel_seeds=True))


def _needs(variant: str, data_dir: str | None, what: str) -> Path:
    if data_dir is None:
        raise ValueError(f"the {variant} variant reads {what}: pass --data-dir")
    return Path(data_dir)


def get_config(variant: str, *, data_dir: str | None = None) -> ExperimentConfig:
    """The teacher, data and student grid of one variant (one of :data:`VARIANTS`).

    Raises:
      ValueError: an unknown variant, or "paper" / "gpu" / "sst2" without `data_dir`.
    """
    if variant == "paper":
        folder = _needs(variant, data_dir, "IMDB (a folder holding test.jsonl.gz, e.g. "
                                           "data/imdb_maas)")
        return ExperimentConfig(
            data=DataConfig(source=str(folder / "test.jsonl.gz"), max_len=256,
                            student_validation_size=1250, student_test_size=2500,
                            html_line_breaks_as_spaces=True),
            # the authors' teacher: batch 16, patience 5 and no epoch cap
            teacher=TeacherTrainConfig(loop=LoopConfig(batch_size=16, max_epochs=100,
                                                       patience=5)),
            student=StudentTrainConfig(ig_steps=10, loop=LoopConfig(
                max_epochs=100, patience=10, parallel_seeds=True)),
            sizes=(500, 1000, 2000), seeds=(0, 1, 2, 3, 4), explainers=SETTINGS,
            paper=PAPER_TABLE1)
    if variant == "gpu":
        # the headline cell within one 15-minute device lease: every batch at max_len (one
        # compiled shape per program; on an H200 each cut length cost 15-28 s to compile),
        # a teacher of one epoch, students at n=500 as in the paper variant
        paper = get_config("paper", data_dir=data_dir)
        one_shape = paper.data.max_len
        return dataclasses.replace(
            paper, teacher=TeacherTrainConfig(loop=LoopConfig(
                batch_size=32, max_epochs=1, evals_per_epoch=2, length_multiple=one_shape)),
            sizes=(500,), explainers=("none", "attention_all", "smat"),
            student=dataclasses.replace(paper.student, loop=dataclasses.replace(
                paper.student.loop, length_multiple=one_shape)))
    if variant == "cpu":
        return ExperimentConfig(data=DataConfig(), teacher=CPU_TEACHER, student=CPU_STUDENT,
                                sizes=(64, 128), seeds=(0, 1, 2), explainers=SETTINGS,
                                paper=PAPER_TABLE1)
    if variant == "sst2":
        folder = _needs(variant, data_dir, "GLUE SST-2 (a folder holding train.tsv, dev.tsv "
                                           "and test-labeled.tsv, e.g. data/sst2_glue)")
        return ExperimentConfig(
            data=DataConfig(source=str(folder / "train.tsv"),
                            student_source=(str(folder / "dev.tsv"),
                                            str(folder / "test-labeled.tsv")),
                            text_column="sentence", max_len=64,
                            student_validation_size=500, student_test_size=1000),
            teacher=TeacherTrainConfig(loop=LoopConfig(batch_size=32, max_epochs=3,
                                                       patience=5)),
            student=REFERENCE_STUDENT, sizes=(500, 1000), seeds=(0, 1, 2, 3, 4),
            explainers=("none", "attention_all", "smat"), paper=PAPER_TABLE1)
    if variant == "smoke":
        # A small teacher part (5% of the corpus) so the teacher trains in a few steps.
        return ExperimentConfig(
            data=DataConfig(teacher_fraction=0.05, student_validation_size=64,
                            student_test_size=64),
            teacher=TeacherTrainConfig(learning_rate=1e-4, warmup_steps=2,
                                       schedule="linear_decay",
                                       loop=LoopConfig(max_epochs=1, patience=1, batch_size=32)),
            student=dataclasses.replace(CPU_STUDENT, loop=dataclasses.replace(
                CPU_STUDENT.loop, max_epochs=1, patience=1)),
            sizes=(32, 64), seeds=(0, 1), explainers=SETTINGS, paper=PAPER_TABLE1)
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")
