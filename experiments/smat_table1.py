"""Table 1 and Figure 5 of the SMaT paper: simulability across student sizes, 7 settings.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
**Table 1** (IMDB, ELECTRA-small): students trained on 500 / 1,000 / 2,000 examples with no
explainer, Gradient L2, Gradient x Input, Integrated Gradients, static attention (all
layers, last layer) and SMaT; 5 seeds; ``median [q25:q75]`` of test simulability, ``*``
where the IQR lies above the no-explainer baseline's (the paper underlines). **Figure 5**:
the learned head coefficients of the median SMaT student, as a layer x head heatmap.

Three variants (``get_config``):

- ``paper`` (for a GPU): the paper's design on IMDB. The teacher trains on half of
  ``--data-dir``'s IMDB test split (10% of that half for its early stopping; the train
  split is not used), the student pool, validation (1,250) and test
  (2,500) are carved from the other half; max length 256, the authors' student settings
  (design §5: SGD 5e-3, patience 10, batch 32, meta update every step) and IG with 10 steps
  as in the paper's appendix. The encoder is all-MiniLM-L6-v2 (6 x 12 heads), not
  ELECTRA-small (12 x 4), which is not available offline.
- ``gpu`` (one H100/H200 within a 15-minute lease, not yet run): the paper variant's data
  and students cut to the headline cell (n=500; none, static attention, SMaT; 5 seeds
  vmapped), a teacher of one epoch (batch 32), and every batch padded to max_len 256 so
  each program compiles once (docs/benchmarks.md has the command and what travels).
- ``cpu`` (2 CPU cores, under an hour with a teacher already trained): the offline
  movie-snippets corpus (10,568 sentences, max length 64), the README's teacher, student
  sizes 64 / 128 (an eighth of the paper's two smaller ones), 3 seeds trained as one vmapped
  program, batch 16, at most 4 epochs with patience 2, SGD 0.05 (the reference 5e-3
  barely moves a student in 4 epochs), the meta update every step as in the paper, IG
  with 10 steps. One student step of 3 seeds takes about 3.5 s here (1.2 s per seed),
  so the paper's sizes and epoch counts would take days on this machine.
- ``sst2`` (2 CPU cores, the reference's time scale; hours per cell): GLUE SST-2 from
  ``--data-dir`` (``data/sst2_glue``) in the paper's two-split layout: a MiniLM
  teacher fine-tuned on half of the 67,349 training phrases (10% of that half for its early
  stopping; AdamW 5e-5, warmup 500, batch 32, 3 epochs, patience 5), the students' pool,
  validation (500) and test (1,000) carved from the 2,693 full sentences of ``dev.tsv`` and
  ``test-labeled.tsv``; max length 64; students of 500 and 1,000 sentences with the
  reference's optimizer and stopping (SGD 5e-3, batch 32, patience 10, up to 100 epochs,
  the meta update every step, outer Adam 5e-4), one shared initialisation, 5 seeds
  vmapped; settings none / attention_all / smat by default (``--explainers`` adds others).
- ``smoke``: the cpu layout shrunk to 2 sizes, 2 seeds and 1 epoch, for the tests.

Commands (resumable: a killed run restarts at the first unfinished student):

    python experiments/smat_table1.py --variant cpu --output-dir runs/smat_table1_cpu
    python experiments/smat_table1.py --variant paper --data-dir data/imdb_maas \\
        --output-dir runs/smat_table1_paper
    python experiments/smat_table1.py --variant sst2 --data-dir data/sst2_glue \\
        --output-dir runs/smat_table1_sst2
    python experiments/smat_table1.py --variant smoke --output-dir runs/smat_table1_smoke

The leakage control of a cell: its SMaT students trained on the teacher's
explanations of each row's tokens in a shuffled order, from the same teacher:

    python experiments/smat_table1.py --variant sst2 --data-dir data/sst2_glue \\
        --teacher runs/smat_table1_sst2/teacher --explainers smat --sizes 500 \\
        --explanation-source shuffled_text --output-dir runs/smat_table1_sst2_control

``--teacher DIR`` reuses a finished `smat train-teacher` run instead of training one under
``OUTPUT_DIR/teacher`` (as it is: one trained on other data than the variant's warns, naming
each difference, and the run records the teacher's data); ``--explainers`` and ``--sizes``
train a subset of the grid (Table 2 needs only the SMaT students of the middle size). Writes
``config.json``, ``table.md`` (measured and paper tables), ``results.json`` (every student
record), ``simulability.png`` and ``head_weights.png`` (Figure 5) into the output folder.

Measured runtime (2 CPU cores, nothing else running unless stated): see
docs/reproduce/smat.md.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from command_line import (
    check_data_files,
    check_reused_teacher,
    command_runtime,
    parse_variant_args,
    variant_parser,
)

from smat.data.protocol import DataConfig
from smat.evaluation.simulability import (
    paired_seed_comparison,
    plot_simulability,
    simulability_table,
)
from smat.jobs.grid import cell_dir, run_grid
from smat.jobs.student_run import run_student
from smat.jobs.teacher_run import run_teacher
from smat.json_files import read_json
from smat.store.model_store import saved_params_fingerprint
from smat.store.render import plot_head_weights
from smat.store.run_log import write_json_atomic
from smat.store.run_record import reused_teacher, saved_data_config
from smat.training.loop import LoopConfig, with_loop
from smat.training.scaffold import ScaffoldConfig
from smat.training.student import EXPLANATION_SOURCES, StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

SETTINGS = ("none", "gradient", "input_x_gradient", "integrated_gradients", "attention_all",
            "attention_last", "smat")
# What SMaT's gain is made of (ablations), each a student setting with its own folder:
# static attention over the heads SMaT learned (its final coefficients, frozen from step 0),
# over the same coefficients put on random heads (a draw per seed), over one layer's heads;
# SMaT whose outer loss reads a held-out part of its own pool instead of validation rows;
# Table 7's normalizers.
NUM_LAYERS = 6  # MiniLM-L6, the variants' encoder
ARMS = ("smat_frozen", "random_heads", *(f"layer{k}" for k in range(NUM_LAYERS)),
        "smat_pool_outer", "smat_softmax", "smat_entmax15")
ARMS_FROM_SMAT = ("smat_frozen", "random_heads")
VARIANTS = ("paper", "gpu", "cpu", "sst2", "smoke")
DATA_DIR_HELP = ("folder with IMDB's test.jsonl.gz (paper and gpu variants) or GLUE SST-2's "
                 "tsv files (sst2 variant)")
# The comparisons a SMaT claim rests on, each tested over seeds (candidate, baseline).
COMPARISONS = (("smat", "attention_all"), ("smat", "none"), ("attention_all", "none"))

# Table 1 of the paper (IMDB, accuracy %), median [q25:q75] at 500 / 1,000 / 2,000.
PAPER_TABLE1 = {
    "none": ("81.72 [81.24:81.75]", "83.44 [83.36:83.63]", "84.84 [84.80:84.88]"),
    "gradient": ("81.66 [81.32:82.00]", "82.98 [82.72:83.08]", "84.78 [84.96:85.08]"),
    "input_x_gradient": ("84.83 [84.79:84.88]", "81.15 [80.95:81.36]", "83.84 [83.59:84.99]"),
    "integrated_gradients": ("82.99 [82.59:82.99]", "81.79 [81.72:81.87]",
                             "84.20 [84.03:85.03]"),
    "attention_all": ("83.00 [82.60:83.00]", "85.72 [85.72:86.23]", "90.08 [89.72:90.11]"),
    "attention_last": ("80.91 [79.99:81.07]", "83.15 [82.91:83.51]", "91.47 [91.39:91.56]"),
    "smat": ("91.48 [91.40:91.56]", "92.56 [92.28:92.83]", "92.84 [92.84:93.08]"),
}

# The README's teacher on the offline corpus (few steps: short warmup, higher peak rate).
CPU_TEACHER = TeacherTrainConfig(learning_rate=1e-4, warmup_steps=30, schedule="linear_decay",
                                 loop=LoopConfig(max_epochs=2, evals_per_epoch=2, patience=2))
# Students scaled to 2 cores: a few epochs, so a larger SGD rate than the reference 5e-3.
CPU_STUDENT = StudentTrainConfig(
    inner_learning_rate=0.05, ig_steps=10,
    loop=LoopConfig(batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))


def get_config(variant: str, *, data_dir: str | None = None) -> dict[str, Any]:
    """The teacher, data and student grid of one variant (one of :data:`VARIANTS`).

    Raises:
      ValueError: an unknown variant, or "paper" / "sst2" without `data_dir`.
    """
    if variant == "paper":
        if data_dir is None:
            raise ValueError("the paper variant reads IMDB: pass --data-dir "
                             "(a folder holding test.jsonl.gz, e.g. data/imdb_maas)")
        return {"data": DataConfig(source=str(Path(data_dir) / "test.jsonl.gz"), max_len=256,
                                   student_validation_size=1250, student_test_size=2500,
                                   html_line_breaks_as_spaces=True),
                # the authors' teacher: batch 16, patience 5 and no epoch cap
                "teacher": TeacherTrainConfig(
                    loop=LoopConfig(batch_size=16, max_epochs=100, patience=5)),
                "sizes": [500, 1000, 2000], "seeds": [0, 1, 2, 3, 4],
                "explainers": list(SETTINGS),
                "student": StudentTrainConfig(ig_steps=10,
                                              loop=LoopConfig(max_epochs=100, patience=10,
                                                              parallel_seeds=True))}
    if variant == "gpu":
        # the headline cell within one 15-minute device lease: every batch at max_len (one
        # compiled shape per program; on an H200 each cut length cost 15-28 s to compile),
        # a teacher of one epoch, students at n=500 as in the paper variant
        paper = get_config("paper", data_dir=data_dir)
        one_shape = paper["data"].max_len
        return {**paper,
                "teacher": TeacherTrainConfig(loop=LoopConfig(
                    batch_size=32, max_epochs=1, evals_per_epoch=2,
                    length_multiple=one_shape)),
                "sizes": [500], "explainers": ["none", "attention_all", "smat"],
                "student": dataclasses.replace(paper["student"], loop=dataclasses.replace(
                    paper["student"].loop, length_multiple=one_shape))}
    if variant == "cpu":
        return {"data": DataConfig(), "teacher": CPU_TEACHER, "sizes": [64, 128],
                "seeds": [0, 1, 2], "explainers": list(SETTINGS), "student": CPU_STUDENT}
    if variant == "sst2":
        if data_dir is None:
            raise ValueError("the sst2 variant reads GLUE SST-2: pass --data-dir (a folder "
                             "holding train.tsv, dev.tsv and test-labeled.tsv, e.g. "
                             "data/sst2_glue)")
        folder = Path(data_dir)
        return {"data": DataConfig(source=str(folder / "train.tsv"),
                                   student_source=(str(folder / "dev.tsv"),
                                                   str(folder / "test-labeled.tsv")),
                                   text_column="sentence", max_len=64,
                                   student_validation_size=500, student_test_size=1000),
                "teacher": TeacherTrainConfig(loop=LoopConfig(batch_size=32, max_epochs=3,
                                                              patience=5)),
                "sizes": [500, 1000], "seeds": [0, 1, 2, 3, 4],
                "explainers": ["none", "attention_all", "smat"],
                "student": StudentTrainConfig(ig_steps=10, loop=LoopConfig(
                    batch_size=32, max_epochs=100, patience=10, parallel_seeds=True))}
    if variant == "smoke":
        # A small teacher part (5% of the corpus) so the teacher trains in a few steps.
        return {"data": DataConfig(teacher_fraction=0.05, student_validation_size=64,
                                   student_test_size=64),
                "teacher": TeacherTrainConfig(
                    learning_rate=1e-4, warmup_steps=2, schedule="linear_decay",
                    loop=LoopConfig(max_epochs=1, patience=1, batch_size=32)),
                "sizes": [32, 64], "seeds": [0, 1], "explainers": list(SETTINGS),
                "student": dataclasses.replace(CPU_STUDENT, loop=dataclasses.replace(
                    CPU_STUDENT.loop, max_epochs=1, patience=1))}
    raise ValueError(f"unknown variant {variant!r}; choose from {list(VARIANTS)}")


def median_record(records: Sequence[Mapping[str, Any]], *, explainer: str,
                  num_examples: int, metric: str = "accuracy") -> Mapping[str, Any]:
    """The record of the median seed of one cell by test `metric` (the lower middle for an
    even count)."""
    cell = sorted((r for r in records
                   if r["explainer"] == explainer and r["num_examples"] == num_examples),
                  key=lambda r: (r["test"][metric], r["seed"]))
    if not cell:
        raise ValueError(f"no {explainer!r} students at n={num_examples}")
    return cell[(len(cell) - 1) // 2]


def plot_figure5(records: Sequence[Mapping[str, Any]], path: Path, *, task: str = "",
                 metric: str = "accuracy") -> dict[str, Any]:
    """Figure 5: the head coefficients of the SMaT student with the median test `metric` at
    the middle size with SMaT students, drawn into `path` (its title names the `task` when
    given); returns its seed, non-zero heads and largest coefficient ({} and no figure
    without SMaT students)."""
    sizes = sorted({r["num_examples"] for r in records if r["explainer"] == "smat"})
    if not sizes:
        return {}
    num_examples = sizes[len(sizes) // 2]
    figure_seed = median_record(records, explainer="smat", num_examples=num_examples,
                                metric=metric)
    weights = np.asarray(figure_seed["head_weights"])
    where = f"{task}, " if task else ""
    plot_head_weights(weights, path, title=f"SMaT head coefficients ({where}n={num_examples}, "
                                           f"median seed {figure_seed['seed']})")
    return {"figure5_seed": figure_seed["seed"],
            "figure5_nonzero_heads": int((weights > 0).sum()),
            "figure5_max_weight": float(weights.max())}


def smat_diagnostics(records: Sequence[Mapping[str, Any]], students_dir: Path,
                     *, outer_clip_norm: float) -> list[dict[str, Any]]:
    """Per SMaT student: did its head coefficients move, was the outer gradient alive
    (neither vanishing nor always clipped), and did it stop before the end?

    Reads each student's ``result.json`` record and its metrics log (one line per
    evaluation, each the mean over the steps since the previous one).
    """
    rows = []
    for record in records:
        if record.get("setting", record["explainer"]) != "smat":
            continue
        folder = cell_dir(students_dir, num_examples=record["num_examples"],
                          explainer=record["explainer"], seed=record["seed"])
        log = [json.loads(line) for line in
               (folder / "checkpoints" / "metrics.jsonl").read_text().splitlines()]
        weights = np.asarray(record["head_weights"])
        outer = np.array([entry["outer_grad_norm"] for entry in log])
        rows.append({
            "explainer": record["explainer"],
            "num_examples": record["num_examples"], "seed": record["seed"],
            "test_accuracy": record["test"]["accuracy"],
            "steps": record["steps"], "best_step": record["best_step"],
            "head_l1_from_uniform": float(np.abs(weights - 1.0 / weights.size).sum()),
            "nonzero_heads": int((weights > 0).sum()), "num_heads": int(weights.size),
            "max_head_weight": float(weights.max()),
            "outer_grad_norm_mean": float(outer.mean()),
            "outer_grad_norm_max": float(outer.max()),
            "evaluations_with_mean_outer_norm_above_clip": int((outer > outer_clip_norm).sum()),
            "kl_first": log[0]["kl"], "kl_last": log[-1]["kl"],
            "sim_loss_first": log[0]["sim_loss"], "sim_loss_last": log[-1]["sim_loss"]})
    return rows


def diagnostics_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of :func:`smat_diagnostics` (a sentence when there is no SMaT student)."""
    if not rows:
        return "No SMaT students in these records."
    lines = ["| n | seed | test acc | steps (best) | non-zero heads | max lambda | "
             "L1 from uniform | outer grad norm mean / max | KL first -> last |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['num_examples']} | {r['seed']} | {100 * r['test_accuracy']:.1f} | "
              f"{r['steps']} ({r['best_step']}) | {r['nonzero_heads']}/{r['num_heads']} | "
              f"{r['max_head_weight']:.3f} | {r['head_l1_from_uniform']:.3f} | "
              f"{r['outer_grad_norm_mean']:.3g} / {r['outer_grad_norm_max']:.3g} | "
              f"{r['kl_first']:.3f} -> {r['kl_last']:.3f} |" for r in rows]
    return "\n".join(lines)


def paired_comparisons(records: Sequence[Mapping[str, Any]], *,
                       metric: str = "accuracy") -> list[dict[str, Any]]:
    """Each of :data:`COMPARISONS` tested over seeds, per size where both settings ran."""
    return [{"candidate": candidate, "baseline": baseline, **row}
            for candidate, baseline in COMPARISONS
            for row in paired_seed_comparison(records, candidate=candidate,
                                              baseline=baseline, metric=metric)]


def comparisons_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of the paired comparisons over seeds (a sentence when there is none,
    as for a call that trained one setting: ``smat_table1_cells.py`` pairs such calls)."""
    if not rows:
        return "No compared pair of settings has students in these records."
    lines = ["| candidate vs baseline | n | models | median difference (points) | wins | "
             "p (one-sided) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['candidate']} vs {r['baseline']} | {r['num_examples']} | "
              f"{r['num_models']} | {100 * r['median_difference']:+.2f} | "
              f"{r['wins']}/{r['num_models']} | {r['p_value']:.3f} |" for r in rows]
    return "\n".join(lines)


def per_student_table(records: Sequence[Mapping[str, Any]], field: str = "steps") -> str:
    """Markdown table of what each cell's students took (median [min:max]) of a record's
    `field`, rounded to whole numbers: the training steps, or ``train_seconds``."""
    cells: dict[tuple[str, int], list[int]] = {}
    for record in records:
        cells.setdefault((record["explainer"], record["num_examples"]), []).append(
            round(record[field]))
    sizes = sorted({size for _, size in cells})
    lines = ["| explainer | " + " | ".join(f"n={size}" for size in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for explainer in dict.fromkeys(explainer for explainer, _ in cells):
        row = [f"{int(np.median(cells[explainer, size]))} [{min(cells[explainer, size])}:"
               f"{max(cells[explainer, size])}]" if (explainer, size) in cells else "–"
               for size in sizes]
        lines.append(f"| {explainer} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def paper_table(cells: Mapping[str, Sequence[str]] = PAPER_TABLE1,
                sizes: Sequence[int] = (500, 1000, 2000)) -> str:
    """A paper's simulability table (default: Table 1) in the layout of
    :func:`simulability_table`: one row of cells per explainer, one column per size."""
    lines = ["| explainer | " + " | ".join(f"n={size}" for size in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    lines += [f"| {name} | " + " | ".join(row) + " |" for name, row in cells.items()]
    return "\n".join(lines)


def chosen_config(variant: str, *, data_dir: str | None = None,
                  explainers: Sequence[str] | None = None, sizes: Sequence[int] | None = None,
                  seeds: Sequence[int] | None = None,
                  explanation_source: str | None = None) -> dict[str, Any]:
    """The variant's config (:func:`get_config`) with the subset of the grid, the seeds and
    the explanation source given (None keeps the variant's).

    Raises:
      ValueError: a subset :func:`check_grid_choices` refuses, or an unknown explanation
        source.
    """
    check_grid_choices(explainers=explainers, sizes=sizes, seeds=seeds)
    config = get_config(variant, data_dir=data_dir)
    for key, chosen in (("explainers", explainers), ("sizes", sizes), ("seeds", seeds)):
        if chosen is not None:
            config[key] = sorted(chosen) if key == "sizes" else list(chosen)
    if explanation_source is not None:
        config["student"] = dataclasses.replace(config["student"],
                                                explanation_source=explanation_source)
    return config


def run(variant: str, *, output_dir: str | Path, data_dir: str | None = None,
        teacher_dir: str | Path | None = None, explainers: Sequence[str] | None = None,
        sizes: Sequence[int] | None = None, seeds: Sequence[int] | None = None,
        explanation_source: str | None = None, progress: bool = True,
        teacher_only: bool = False, teacher_seed: int | None = None,
        smat_cells: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Train (or reuse) the teacher and every student of the grid (or of the given subset
    of its settings and sizes, or with other seeds, or with the teacher's explanations of
    shuffled text: the leakage control); write the table and figures. Returns the summary
    written to ``results.json``; with `teacher_only`, stops after the teacher and returns
    its folder, test scores and weights fingerprint (a queue of one-student calls asks which
    teacher its students will learn from before it skips the ones already trained).
    `teacher_seed` replaces the teacher's seed (its head, batch order and dropout): the
    replication's teachers differ only in it. `explainers` may name :data:`ARMS`;
    ``smat_frozen`` and ``random_heads`` read the SMaT students of the same teacher and
    seeds from `smat_cells` (result files of earlier calls).

    Raises:
      ValueError: a choice :func:`chosen_config` refuses.
      FileNotFoundError: `data_dir` lacks a file the variant reads (before any work).
    """
    config = chosen_config(variant, data_dir=data_dir, explainers=explainers, sizes=sizes,
                           seeds=seeds, explanation_source=explanation_source)
    if teacher_seed is not None:
        config["teacher"] = with_loop(config["teacher"], seed=teacher_seed)
    if data_dir is not None:
        check_data_files(config["data"], data_dir)
    output_dir = Path(output_dir)
    reused = reused_teacher(teacher_dir) if teacher_dir is not None else None
    if reused:
        check_reused_teacher(teacher_dir, config["data"], variant=variant)
    teacher_dir = Path(teacher_dir) if teacher_dir is not None else output_dir / "teacher"
    write_json_atomic(output_dir / "config.json", {
        "variant": variant, "teacher_dir": str(teacher_dir),
        # a reused teacher keeps its own settings: they are recorded, not the variant's
        "data": dataclasses.asdict(saved_data_config(teacher_dir) if reused
                                   else config["data"]),
        "teacher": (f"reused as it is: {teacher_dir}" if reused
                    else dataclasses.asdict(config["teacher"])),
        "student": dataclasses.asdict(config["student"]),
        **{key: config[key] for key in ("sizes", "seeds", "explainers")}})
    start = time.perf_counter()
    (teacher,) = [reused] if reused else run_teacher(
        data=config["data"], train=config["teacher"], output_dir=teacher_dir,
        progress=progress)
    if teacher_only:
        return {"teacher_dir": str(teacher_dir), "teacher_test": teacher["test"],
                "teacher_params": saved_params_fingerprint(teacher_dir / "model")}
    settings = [name for name in config["explainers"] if name in SETTINGS]
    arms = [name for name in config["explainers"] if name in ARMS]
    records = run_grid(teacher_dir, sizes=config["sizes"], explainers=settings,
                       seeds=config["seeds"], student=config["student"],
                       output_dir=output_dir / "students", progress=progress) if settings else []
    records += run_arms(teacher_dir, arms, sizes=config["sizes"], seeds=config["seeds"],
                        student=config["student"], output_dir=output_dir / "students",
                        smat_cells=smat_cells, progress=progress)
    table = simulability_table(records)
    plot_simulability(records, output_dir / "simulability.png")
    figure5 = plot_figure5(records, output_dir / "head_weights.png")
    diagnostics = smat_diagnostics(records, output_dir / "students",
                                   outer_clip_norm=ScaffoldConfig().outer_clip_norm)
    comparisons = paired_comparisons(records)
    source = config["student"].explanation_source
    control = ("" if source == "text" else
               "Leakage control: every teacher explanation was computed on its row's tokens "
               "in a shuffled order (an explanation no longer points at the student's "
               "evidence; a label written into where the mass sits survives).\n\n")
    text = (f"Teacher test accuracy {100 * teacher['test']['accuracy']:.2f}%.\n\n{control}"
            f"Measured ({variant}):\n\n{table}\n\nPaired over seeds (one-sided Wilcoxon "
            f"signed-rank, one trained student per seed):\n\n"
            f"{comparisons_table(comparisons)}\n\nTraining steps per student (median "
            f"[min:max]; a SMaT student takes one meta step per step):\n\n"
            f"{per_student_table(records)}\n\nPaper (IMDB, ELECTRA-small):\n\n"
            f"{paper_table()}\n\nSMaT students (head coefficients, outer gradient, "
            f"explanation loss):\n\n{diagnostics_table(diagnostics)}\n")
    (output_dir / "table.md").write_text(text)
    summary = {"variant": variant, "explanation_source": source, "table": table,
               "teacher_test": teacher["test"],
               "records": records, **figure5, "smat_diagnostics": diagnostics,
               "paired_over_seeds": comparisons,
               "seconds_this_call": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def arm_config(arm: str, student: StudentTrainConfig, *, seed: int, heads: tuple[int, int],
               smat_weights: np.ndarray | None) -> StudentTrainConfig:
    """The student config of one of :data:`ARMS` for `seed`, for a teacher of `heads`
    (layers, heads per layer); `smat_weights` is the (L, H) head coefficients of the SMaT
    student of the same teacher and seed (for :data:`ARMS_FROM_SMAT`)."""
    if arm == "smat_pool_outer":
        return dataclasses.replace(student, explainer="smat", outer_rows="pool")
    if arm in ("smat_softmax", "smat_entmax15"):
        return dataclasses.replace(student, explainer="smat",
                                   normalizer=arm.removeprefix("smat_"))
    if arm.startswith("layer"):
        weights = np.zeros(heads)
        weights[int(arm.removeprefix("layer"))] = 1.0 / heads[1]
    elif arm == "smat_frozen":
        weights = smat_weights
    else:  # random_heads: SMaT's coefficients on a random set of heads of the same size
        flat = smat_weights.ravel()
        weights = flat[np.random.default_rng([seed, 1]).permutation(flat.size)]
    weights = np.asarray(weights, np.float64).ravel()
    return dataclasses.replace(student, explainer="attention_heads",
                               head_weights=tuple(float(w) for w in weights / weights.sum()))


def smat_head_weights(paths: Sequence[str | Path], *, teacher_params: str, size: int,
                      seed: int) -> np.ndarray:
    """The (L, H) coefficients of the SMaT student of `seed` at `size` in result files of
    earlier runs (``results.json`` or committed cells), learned from the teacher whose
    weights fingerprint is `teacher_params`.

    Raises:
      ValueError: no such student in the files.
    """
    for path in paths:
        for record in read_json(path)["records"]:
            if (record["explainer"] == "smat" and record["seed"] == seed
                    and record["num_examples"] == size
                    and record["teacher_params"] == teacher_params):
                return np.asarray(record["head_weights"])
    raise ValueError(f"--smat-cells {' '.join(map(str, paths))} hold no SMaT student of seed "
                     f"{seed} at n={size} from teacher {teacher_params}: train it first")


def run_arms(teacher_dir: Path, arms: Sequence[str], *, sizes: Sequence[int],
             seeds: Sequence[int], student: StudentTrainConfig, output_dir: Path,
             smat_cells: Sequence[str | Path], progress: bool) -> list[dict[str, Any]]:
    """Train the students of the ablation `arms` (one folder per arm, size and seed, like
    the grid's); each record's ``explainer`` is its arm, ``setting`` the student setting
    it trained with."""
    teacher_params = saved_params_fingerprint(teacher_dir / "model")
    encoder = read_json(teacher_dir / "model" / "model.json")["encoder_config"]
    heads = (encoder["num_layers"], encoder["num_heads"])
    records = []
    for size in sizes:
        for arm in arms:
            for seed in seeds:
                smat_weights = (smat_head_weights(smat_cells, teacher_params=teacher_params,
                                                  size=size, seed=seed)
                                if arm in ARMS_FROM_SMAT else None)
                config = arm_config(arm, student, seed=seed, heads=heads,
                                    smat_weights=smat_weights)
                (record,) = run_student(teacher_dir, config=config, seeds=[seed],
                                        num_examples=size, progress=progress,
                                        output_dir=[cell_dir(output_dir, num_examples=size,
                                                             explainer=arm, seed=seed)])
                records.append({**record, "explainer": arm, "setting": config.explainer})
    return records


def check_grid_choices(*, explainers: Sequence[str] | None, sizes: Sequence[int] | None,
                       seeds: Sequence[int] | None) -> None:
    """Refuse a subset of the grid that cannot be trained (None keeps the variant's).

    Raises:
      ValueError: a setting that is not one of Table 1's, a size below 1, or no / repeated
        / negative seeds.
    """
    if explainers is not None:
        unknown = sorted(set(explainers) - set(SETTINGS) - set(ARMS))
        if unknown:
            raise ValueError(f"unknown Table 1 settings {unknown}; choose from "
                             f"{list(SETTINGS + ARMS)}")
    if sizes is not None and (not sizes or min(sizes) < 1):
        raise ValueError(f"--sizes must be positive student training sizes, got {list(sizes)}")
    if seeds is not None and (not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0):
        raise ValueError(f"--seeds must be distinct non-negative integers, got {list(seeds)}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = variant_parser(__doc__, name="smat_table1", variants=VARIANTS,
                            data_dir_help=DATA_DIR_HELP, reuses_teacher=True)
    parser.add_argument("--explainers", nargs="+", default=None, choices=SETTINGS + ARMS,
                        help="train only these settings (default: every one of the table), or "
                             "ablations of SMaT: " + ", ".join(ARMS))
    parser.add_argument("--smat-cells", nargs="+", default=(),
                        help="result files holding the SMaT students of the same teacher and "
                             "seeds, which smat_frozen and random_heads read")
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help="train only these student sizes (default: the variant's)")
    parser.add_argument("--seeds", nargs="+", type=int, default=None,
                        help="student seeds (default: the variant's, e.g. 0 1 2 for cpu)")
    parser.add_argument("--explanation-source", default=None, choices=EXPLANATION_SOURCES,
                        help="shuffled_text: the leakage control, every teacher explanation "
                             "computed on its row's tokens in a shuffled order (default text)")
    parser.add_argument("--teacher-only", action="store_true",
                        help="train (or reuse) the teacher and stop, printing its test "
                             "accuracy and weights fingerprint (scripts/evidence_queue.py asks "
                             "it which teacher's students are already committed)")
    parser.add_argument("--teacher-seed", type=int, default=None,
                        help="the teacher's seed (its head, batch order and dropout; default "
                             "the variant's, 0): teachers of one data set that differ only in it")
    args = parse_variant_args(parser, argv)
    output_dir = args.output_dir
    with command_runtime(parser):
        summary = run(args.variant, output_dir=output_dir, data_dir=args.data_dir,
                      teacher_dir=args.teacher, explainers=args.explainers, sizes=args.sizes,
                      seeds=args.seeds, explanation_source=args.explanation_source,
                      progress=not args.no_progress, teacher_only=args.teacher_only,
                      teacher_seed=args.teacher_seed, smat_cells=args.smat_cells)
    if args.teacher_only:
        print(f"teacher {summary['teacher_dir']}: test accuracy "
              f"{100 * summary['teacher_test']['accuracy']:.2f}%, weights "
              f"{summary['teacher_params']}")
        return
    print((Path(output_dir) / "table.md").read_text())
    if "figure5_seed" in summary:
        print(f"Figure 5: seed {summary['figure5_seed']}, {summary['figure5_nonzero_heads']} "
              f"non-zero heads, largest {summary['figure5_max_weight']:.3f}")
    print(f"{summary['seconds_this_call']} s")


if __name__ == "__main__":
    main()
