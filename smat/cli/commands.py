"""The `smat` commands: each one a config dataclass (every field a flag, its docstring line
the help) and a run function over that config, listed by :func:`commands`.

Commands over one trained model take ``--model`` (a trained-model folder); commands that
start from a pretrained encoder take ``--encoder``. Evaluations score the model's held-out
test split or a user's ``--texts`` file and write ``NAME.json`` and ``NAME.md`` to
``--output-dir`` (:func:`write_report`), printing the table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from smat.compile_cache import COMPILE_CACHE_ENV
from smat.data.protocol import DataConfig
from smat.jobs.agreement import AgreementConfig
from smat.jobs.benchmark import BenchmarkConfig
from smat.jobs.demo import DEMO_EXPLAINERS, DEMO_SEEDS, DEMO_SIZE
from smat.jobs.evaluators import EVALUATORS, Evaluator, write_report
from smat.jobs.explain import ExplainConfig
from smat.jobs.inputs import (
    evaluation_rows,
    evaluation_texts,
    model_rows,
    rationale_rows,
    read_texts,
)
from smat.jobs.plausibility import PlausibilityConfig
from smat.jobs.roar import PRESETS, RoarConfig
from smat.jobs.student_run import run_student
from smat.jobs.study import SAMPLE_RULES, StudyConfig
from smat.jobs.teacher_run import run_teacher
from smat.json_files import read_json
from smat.models.source import ModelSource
from smat.parallel import JOIN_TIMEOUT
from smat.registry import STUDENT_SETTINGS
from smat.training.loop import seed_folders
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig

field = dataclasses.field
command_config = dataclasses.dataclass(frozen=True, kw_only=True)


@command_config
class Runtime:
    """How a command runs: progress bars, devices (smat.parallel) and the compilation cache.

    Attributes:
      no_progress: hide the progress bars.
      devices: devices to shard each batch over.
      coordinator: multi-host: address of process 0 (or JAX_COORDINATOR_ADDRESS).
      num_processes: multi-host: number of processes (or JAX_NUM_PROCESSES).
      process_id: multi-host: this process, 0..N-1 (or JAX_PROCESS_ID).
      distributed: multi-host with JAX's cluster detection (TPU pod, SLURM, MPI).
      join_timeout: multi-host: seconds each process waits for the others to join (a
        process other than 0 first waits as long for the coordinator); with --share, how
        long share 0 waits for the other shares' work.
      compile_cache: persist compiled XLA programs in this folder, one sub-folder per
        machine kind ('off' disables it).
      no_compile_cache: compile every program afresh (same as --compile-cache off).
    """

    no_progress: bool = False
    devices: int | None = field(default=None, metadata={"shown": "all"})
    coordinator: str | None = field(default=None, metadata={"shown": "none: one host",
                                                            "metavar": "HOST:PORT"})
    num_processes: int | None = field(default=None, metadata={"shown": "none: one host"})
    process_id: int | None = field(default=None, metadata={"shown": "none: one host"})
    distributed: bool = False
    join_timeout: int = JOIN_TIMEOUT
    compile_cache: str | None = field(default=None, metadata={
        "metavar": "DIR",
        "shown": f"${COMPILE_CACHE_ENV}, else $JAX_COMPILATION_CACHE_DIR, else "
                 "~/.cache/smat/jax"})
    no_compile_cache: bool = False

    @property
    def cache_flag(self) -> str | None:
        """The compilation cache asked for: a folder, 'off', or None (the default one)."""
        return "off" if self.no_compile_cache else self.compile_cache


def seeds_field(default: int = 1) -> Any:
    return field(default=default, metadata={
        "metavar": "N", "doc": "run N seeds, SEED..SEED+N-1; --parallel-seeds trains them in "
                               "one vmapped program"})


def overwrite_field() -> Any:
    return field(default=False, metadata={
        "doc": "delete the run the output folder holds and start afresh (by default a "
               "finished run is reused, an unfinished one resumed, and one made with other "
               "settings refused, naming the differences)"})


def keep_checkpoints_field() -> Any:
    return field(default=False, metadata={
        "doc": "keep a finished run's resumable training state (by default it is deleted "
               "once the run's result and weights are saved: hundreds of MB a run)"})


def keep_students_field() -> Any:
    return field(default=False, metadata={
        "doc": "save each student's best parameters as a model folder, OUTPUT/model (by "
               "default a finished student keeps its result and learned explainer only)"})


def config_file_field() -> Any:
    return field(default=None, metadata={
        "metavar": "FILE", "shown": "none",
        "doc": "replay the settings of a run (its config.json); flags given beside it "
               "override them"})


def texts_field() -> Any:
    return field(default=None, metadata={
        "metavar": "FILE", "shown": "none",
        "doc": "evaluate on your own texts, one per line (as `smat explain` reads them; a "
               "text-pair model's two texts separated by a tab), instead of the model's "
               "held-out test split"})


def runtime_field() -> Any:
    return field(default_factory=Runtime,
                 metadata={"doc": "progress bars, devices and the compilation cache"})


TEXTS_FILE_DOC = ("text file, one example per line (blank lines are skipped, with a "
                  "warning); for a text-pair model the two texts separated by a tab")
EXPLAIN_SOURCE_DOC = (TEXTS_FILE_DOC + "; for an image (ViT) model, a folder of class "
                      "sub-folders of images or an .npz of images and labels")


def seeds_from(count: int, first: int) -> list[int]:
    """`--seeds N` consecutive seeds from `first` (the loop config's --seed)."""
    if count < 1:
        raise ValueError(f"--seeds must be >= 1, got {count}")
    return list(range(first, first + count))


# ------------------------------------------------------------------ training


@command_config
class TrainTeacher:
    """fine-tune a teacher on gold labels

    Attributes:
      data: the data set and its splits.
      train: how the teacher trains.
      model: the pretrained encoder the teacher starts from.
      output_dir: where the results are written.
    """

    data: DataConfig = field(default_factory=DataConfig)
    train: TeacherTrainConfig = field(default_factory=TeacherTrainConfig)
    model: ModelSource = field(default_factory=ModelSource)
    seeds: int = seeds_field()
    output_dir: str = "runs/teacher"
    config: str | None = config_file_field()
    overwrite: bool = overwrite_field()
    keep_checkpoints: bool = keep_checkpoints_field()
    runtime: Runtime = runtime_field()


def say_reused(command: str, folders: Sequence[Path]) -> None:
    """One line on stderr per finished run a command reuses instead of training it."""
    for folder in folders:
        print(f"smat {command}: {folder} is a finished run with these settings: reusing it "
              "(--overwrite trains it again)", file=sys.stderr)


def finished_runs(folders: Sequence[Path]) -> list[Path]:
    return [folder for folder in folders if (folder / "result.json").is_file()]


def train_teacher(config: TrainTeacher) -> int:
    seeds = seeds_from(config.seeds, config.train.loop.seed)
    reused = ([] if config.overwrite
              else finished_runs(seed_folders(config.output_dir, seeds)))
    records = run_teacher(data=config.data, train=config.train, seeds=seeds,
                          model=config.model,
                          output_dir=config.output_dir,
                          progress=not config.runtime.no_progress, overwrite=config.overwrite,
                          keep_checkpoints=config.keep_checkpoints)
    say_reused("train-teacher", reused)
    folders = seed_folders(config.output_dir, seeds)
    summary = [{"seed": seed, "test": r["test"], "train_seconds": r["train_seconds"],
                "steps": r["steps"], "model": str(folder / "model")}
               for seed, folder, r in zip(seeds, folders, records, strict=True)]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


@command_config
class TrainStudent:
    """train a student to simulate a teacher (SMaT)

    Attributes:
      teacher: a `smat train-teacher` run folder.
      explainers: the student setting (one): what the student learns from besides the
        teacher's predictions.
      size: student training examples, a prefix of the student pool.
      output_dir: where the run goes; with several seeds, OUTPUT_DIR/seed{S}.
      student: how the student trains.
    """

    teacher: str = field(metadata={"metavar": "FOLDER"})
    explainers: str = field(metadata={"choices": STUDENT_SETTINGS,
                                      "old_flags": ("--explainer",)})
    size: int = field(metadata={"old_flags": ("--num-examples",)})
    seeds: int = seeds_field()
    output_dir: str | None = field(default=None, metadata={
        "shown": "TEACHER/students/n{SIZE}/{explainers}/seed{S}"})
    config: str | None = config_file_field()
    overwrite: bool = overwrite_field()
    keep_checkpoints: bool = keep_checkpoints_field()
    keep_students: bool = keep_students_field()
    student: StudentTrainConfig = field(default_factory=StudentTrainConfig,
                                        metadata={"skip": ("explainer",)})
    runtime: Runtime = runtime_field()


def train_student(config: TrainStudent) -> int:
    student = dataclasses.replace(config.student, explainer=config.explainers)
    seeds = seeds_from(config.seeds, student.loop.seed)
    if config.output_dir is None:
        base = Path(config.teacher) / "students" / f"n{config.size}" / config.explainers
        folders = [base / f"seed{seed}" for seed in seeds]
    else:
        folders = seed_folders(config.output_dir, seeds)
    reused = [] if config.overwrite else finished_runs(folders)
    records = run_student(config.teacher, config=student, seeds=seeds,
                          num_examples=config.size, output_dir=folders,
                          progress=not config.runtime.no_progress, overwrite=config.overwrite,
                          keep_checkpoints=config.keep_checkpoints,
                          keep_students=config.keep_students)
    say_reused("train-student", reused)
    keys = ("explainer", "seed", "num_examples", "test", "validation", "steps", "train_seconds")
    summary = [{k: r[k] for k in keys} for r in records]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


@command_config
class Simulability:
    """simulability grid over sizes x explainers x seeds

    Attributes:
      teacher: a `smat train-teacher` run folder.
      sizes: student training sizes.
      explainers: student settings.
      output_dir: where the grid's runs, table.md, results.json and simulability.png go.
      overwrite: delete the runs the output folder holds and start afresh (by default
        finished runs are reused, unfinished ones resumed, and ones made with other settings
        refused, naming the differences).
      student: how each student trains.
      share: train only share I of N of the grid's students ("I/N", 0-based: every N-th
        cell from the I-th), one share per process or host over a shared output folder;
        share 0 waits for the others' students (at most --join-timeout seconds) and writes
        the table, and a share that stopped trains only what it had not finished.
    """

    teacher: str = field(metadata={"metavar": "FOLDER"})
    sizes: tuple[int, ...] = (500, 1000, 2000)
    seeds: int = seeds_field(5)
    explainers: tuple[str, ...] = field(default=("none", "attention_all", "smat"),
                                        metadata={"choices": STUDENT_SETTINGS})
    output_dir: str | None = field(default=None, metadata={"shown": "TEACHER/simulability"})
    overwrite: bool = False
    keep_checkpoints: bool = keep_checkpoints_field()
    keep_students: bool = keep_students_field()
    student: StudentTrainConfig = field(default_factory=StudentTrainConfig,
                                        metadata={"skip": ("explainer",)})
    share: str = field(default="0/1", metadata={"metavar": "I/N"})
    runtime: Runtime = runtime_field()


def simulability(config: Simulability) -> int:
    from smat.evaluation.simulability import plot_simulability, simulability_table
    from smat.jobs.grid import run_grid
    from smat.jobs.shares import parse_share

    share = parse_share(config.share)
    seeds = seeds_from(config.seeds, config.student.loop.seed)
    output_dir = Path(config.output_dir or Path(config.teacher) / "simulability")
    records = run_grid(config.teacher, sizes=config.sizes, explainers=config.explainers,
                       seeds=seeds, student=config.student, output_dir=output_dir,
                       progress=not config.runtime.no_progress,
                       overwrite=config.overwrite,
                       keep_checkpoints=config.keep_checkpoints,
                       keep_students=config.keep_students, share=share,
                       join_timeout=config.runtime.join_timeout)
    if share[0] != 0:
        print(f"share {config.share}: {len(records)} students finished; share 0/{share[1]} "
              "writes the table")
        return 0
    metric = "accuracy" if "accuracy" in records[0]["test"] else "pearson"
    table = simulability_table(records, metric=metric)
    (output_dir / "table.md").write_text(table + "\n")
    (output_dir / "results.json").write_text(json.dumps(records, indent=2))
    plot_simulability(records, output_dir / "simulability.png", metric=metric)
    print(table)
    return 0


@command_config
class Demo:
    """the main job end to end on the offline defaults

    Attributes:
      output_dir: where the results are written.
      teacher: reuse this teacher run folder (default: OUTPUT_DIR/teacher).
      size: student training examples.
      seeds: run N student seeds, SEED..SEED+N-1.
      seed: the first student seed.
      explainers: student settings, 'none' first.
    """

    output_dir: str = "runs/demo"
    teacher: str | None = field(default=None, metadata={"shown": "OUTPUT_DIR/teacher"})
    size: int = field(default=DEMO_SIZE, metadata={"old_flags": ("--num-examples",)})
    # a list is read to tell users of the old list form how to write it now
    seeds: tuple[int, ...] = field(default=(len(DEMO_SEEDS),), metadata={"metavar": "N"})
    seed: int = DEMO_SEEDS[0]
    explainers: tuple[str, ...] = field(default=DEMO_EXPLAINERS,
                                        metadata={"choices": STUDENT_SETTINGS})
    runtime: Runtime = runtime_field()


def demo(config: Demo) -> int:
    from smat.jobs.demo import run_demo

    if len(config.seeds) > 1:
        raise ValueError(f"--seeds is a count now, as in every command: for seeds "
                         f"{' '.join(map(str, config.seeds))} write --seeds "
                         f"{len(config.seeds)} --seed {config.seeds[0]} (consecutive seeds "
                         "from --seed)")
    run_demo(config.output_dir, teacher_dir=config.teacher, num_examples=config.size,
             seeds=tuple(seeds_from(config.seeds[0], config.seed)),
             explainers=config.explainers, progress=not config.runtime.no_progress)
    return 0


@command_config
class Roar:
    """ROAR / Recursive ROAR faithfulness (Madsen et al., 2022)

    Attributes:
      roar: the explainers, masking ratios and metric.
      preset: model and training recipe; the model and training flags below change single
        settings of it.
      model: the pretrained start of every model: the preset's, with the flags given
        changed.
      data: the data set (ROAR splits it itself).
      train: how every model of the grid trains: the preset's recipe, with the flags given
        changed.
      output_dir: where the results are written.
      share: train only the cells of share I of N of the seeds ("I/N", 0-based: every N-th
        seed from the I-th), one share per process or host over a shared output folder;
        share 0 waits for the others' cells (at most --join-timeout seconds) and writes the
        report, and a share that stopped trains only what it had not finished.
    """

    roar: RoarConfig = field(default_factory=RoarConfig, metadata={"skip": ("seeds",)})
    seeds: int = seeds_field(len(RoarConfig().seeds))
    preset: str = field(default="small", metadata={"choices": tuple(sorted(PRESETS))})
    model: ModelSource = field(default_factory=ModelSource, metadata={
        "base": lambda values: PRESETS[values["preset"]].model})
    data: DataConfig = field(default_factory=DataConfig, metadata={
        "skip": ("teacher_fraction", "student_validation_size", "student_test_size")})
    train: TeacherTrainConfig = field(default_factory=TeacherTrainConfig, metadata={
        "base": lambda values: PRESETS[values["preset"]].train})
    output_dir: str = "runs/roar"
    share: str = field(default="0/1", metadata={"metavar": "I/N"})
    runtime: Runtime = runtime_field()

    def job_roar(self) -> RoarConfig:
        """The ROAR settings of the job: SEED..SEED+N-1 from the training loop's seed;
        Pearson for regression."""
        return dataclasses.replace(
            self.roar, seeds=tuple(seeds_from(self.seeds, self.train.loop.seed)),
            **({"metric": "pearson"} if self.data.task == "regression" else {}))


def roar(config: Roar) -> int:
    from smat.jobs.roar import roar_markdown_table, run_roar
    from smat.jobs.shares import parse_share

    share = parse_share(config.share)
    report = run_roar(data=config.data, roar=config.job_roar(), preset=config.preset,
                      train=config.train, model=config.model,
                      output_dir=config.output_dir, progress=not config.runtime.no_progress,
                      share=share, join_timeout=config.runtime.join_timeout)
    if share[0] != 0:
        print(f"share {config.share}: the cells of seeds "
              f"{', '.join(map(str, report['seeds'])) or '(none)'} are finished "
              f"({report['cells_trained']} trained now); share 0/{share[1]} writes the report")
        return 0
    print(f"{report['mode']} ({report['metric']}, mean over {len(report['seeds'])} seeds)")
    print(roar_markdown_table(report))
    return 0


# ------------------------------------------------------------------ one model


@command_config
class Explain:
    """explain predictions; JSON + HTML page

    Attributes:
      model: a trained-model folder (text, or a ViT: then one score per image patch, the
        page lays them over the images, and a PNG grid is written too).
      explain: the explainers and how they run.
      output_dir: where the results are written.
      word_pieces: show the tokenizer's word pieces on the HTML page (default: whole words,
        their pieces' scores summed).
    """

    model: str = field(metadata={"metavar": "FOLDER"})
    texts: str = field(metadata={"positional": True, "doc": EXPLAIN_SOURCE_DOC})
    explain: ExplainConfig = field(metadata={"skip": ("num_examples",)})
    output_dir: str = "runs/explain"
    word_pieces: bool = False
    runtime: Runtime = runtime_field()


def explain(config: Explain) -> int:
    from smat.jobs.explain import explain_texts, write_explanations
    from smat.store.model_store import encoder_kind, load

    if encoder_kind(config.model) == "vit":
        return explain_image_source(config)
    texts = read_texts(config.texts)
    trained = load(config.model, precision=config.explain.precision)
    explanations = explain_texts(trained, texts, config.explain)
    label_names = trained.info.get("label_names") or ()
    print(json.dumps(write_explanations(explanations, config.output_dir, texts=texts,
                                        label_names=label_names,
                                        word_pieces=config.word_pieces), indent=2))
    return 0


def explain_image_source(config: Explain) -> int:
    """`smat explain` with an image model: the positional source is a folder of class
    sub-folders or an ``.npz`` of images (:func:`smat.data.load_images`), resized to the
    model's image size."""
    from smat.data import load_images
    from smat.jobs.explain_images import explain_images, write_image_explanations
    from smat.store.model_store import load

    trained = load(config.model, precision=config.explain.precision)
    data = load_images(config.texts, image_size=trained.model.encoder.config.image_size)
    explanations = explain_images(trained, data.images, config.explain)
    print(json.dumps(write_image_explanations(
        explanations, data, config.output_dir,
        label_names=trained.info.get("label_names") or ()), indent=2))
    return 0


@command_config
class Predict:
    """predict a file of texts (one per line)

    Attributes:
      model: a trained-model folder.
      batch_size: rows per model call.
    """

    model: str = field(metadata={"metavar": "FOLDER"})
    texts: str = field(metadata={"positional": True, "doc": TEXTS_FILE_DOC})
    batch_size: int = 64
    runtime: Runtime = runtime_field()


def predict(config: Predict) -> int:
    from smat.jobs.predict import predict_texts
    from smat.store.model_store import load

    texts = read_texts(config.texts)
    for row in predict_texts(load(config.model), texts, batch_size=config.batch_size):
        print(json.dumps(row))
    return 0


# ------------------------------------------------------------------ evaluations


@command_config
class Agreement:
    """pairwise agreement between explainers (Jukić et al.)

    Attributes:
      model: one or more model folders (seeds), sharing a tokenizer.
      variant: instead of --model, two or more times: a model variant and its seeds' model
        folders; compares mean agreement over explainer pairs between variants (Jukić et
        al. Tables 2 and 4).
      agreement: the explainers, metrics and groups.
      output_dir: where agreement.json / .md (comparison.json / .md with --variant) go.
    """

    model: tuple[str, ...] | None = field(default=None, metadata={"metavar": "FOLDER",
                                                                  "shown": "none"})
    variant: tuple[tuple[str, ...], ...] | None = field(default=None, metadata={
        "append": True, "metavar": ("NAME", "MODEL"), "shown": "none"})
    texts: str | None = texts_field()
    agreement: AgreementConfig
    output_dir: str = "runs/agreement"
    runtime: Runtime = runtime_field()


def agreement(config: Agreement) -> int:
    from smat.data import take
    from smat.jobs.agreement import agreement_report, agreement_table
    from smat.jobs.agreement_study import agreement_comparison, comparison_tables
    from smat.jobs.inputs import held_out_split, load_groups, sample_per_group
    from smat.store.model_store import load

    settings = config.agreement
    if (config.model is None) == (config.variant is None):
        raise ValueError("give either --model (one model or its seeds) or --variant NAME "
                         "MODEL... two or more times (a comparison of model variants)")
    variants = ({"model": config.model} if config.variant is None
                else {name: paths for name, *paths in config.variant})
    short = [name for name, paths in variants.items() if not paths]
    if short:
        raise ValueError(f"--variant {short[0]} names no model folder; write --variant NAME "
                         "MODEL [MODEL ...]")
    if config.texts and settings.groups is not None:
        raise ValueError("--texts and --groups exclude each other: groups label the rows of "
                         "the model's own splits")
    texts = evaluation_texts(config.texts, settings.explain, groups=settings.groups)
    models = {name: [load(path, precision=settings.explain.precision) for path in paths]
              for name, paths in variants.items()}
    first = next(iter(models.values()))[0]
    groups = None
    if settings.groups is None:
        data = evaluation_rows(first, texts, settings.explain.num_examples,
                               folder=next(iter(variants.values()))[0])
    else:
        split, labels = load_groups(settings.groups)
        data = held_out_split(first, split=split, folder=next(iter(variants.values()))[0])
        if len(labels) != len(data.labels):
            raise ValueError(f"{settings.groups} labels {len(labels)} rows but the model's "
                             f"{split} split has {len(data.labels)}")
        rows = sample_per_group(labels, settings.per_group)
        data, groups = take(data, rows), labels[rows]
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    if config.variant is not None:
        result = agreement_comparison(models, data, settings.explain, metrics=settings.metrics,
                                      groups=groups)
        write_report(config.output_dir, "comparison", result, comparison_tables(result))
        return 0
    report = agreement_report(models["model"], data, settings.explain,
                              metrics=settings.metrics, top_k=settings.top_k,
                              plot_dir=config.output_dir, groups=groups)
    write_report(config.output_dir, "agreement", report, agreement_table(report))
    return 0


MODEL_DOC = "a `smat train-teacher` model folder."


@command_config
class ModelEvaluation:
    """The fields of an evaluation of one trained model on its held-out split or a user's
    texts; each command adds its settings and output folder."""

    model: str = field(metadata={"metavar": "FOLDER", "doc": MODEL_DOC})
    texts: str | None = texts_field()
    runtime: Runtime = runtime_field()


@functools.cache
def evaluation_command(evaluator: Evaluator) -> Command:
    """``smat NAME`` of a registered evaluation: ``--model``, ``--texts``, the flags of its
    settings and ``--output-dir``; it writes NAME.json and NAME.md and prints the table."""
    name = evaluator.name
    config = dataclasses.make_dataclass(
        "".join(word.title() for word in name.split("_")),
        [(name, evaluator.settings, field(metadata={"doc": f"the explainers and the {name} "
                                                           "settings"})),
         ("output_dir", str, field(default=f"runs/{name}", metadata={
             "doc": f"where the {name} report (.json and .md) goes"}))],
        bases=(ModelEvaluation,), namespace={"__doc__": evaluator.help}, frozen=True,
        kw_only=True)

    def run(config: Any) -> int:
        settings = getattr(config, name)
        trained, rows = model_rows(config.model, config.texts, settings.explain,
                                   explanation_files=evaluator.explanation_files)
        report = evaluator.run(trained, rows, settings, Path(config.output_dir))
        write_report(config.output_dir, evaluator.file_name(settings), report,
                     evaluator.table(report))
        return 0

    return Command(name, config, run)


@command_config
class Benchmark(ModelEvaluation):
    """every explainer on every measure in one report (faithfulness, randomization,
    leakage, agreement, seconds)

    Attributes:
      benchmark: the explainers and the measures.
      output_dir: where benchmark.json, .md, .csv, .html and .png go.
    """

    benchmark: BenchmarkConfig
    output_dir: str = "runs/benchmark"


def benchmark(config: Benchmark) -> int:
    from smat.jobs.benchmark import (
        benchmark_inputs,
        benchmark_report,
        benchmark_table,
        write_benchmark,
    )

    settings = config.benchmark
    trained, data = benchmark_inputs(config.model, config.texts, settings)
    report = benchmark_report(trained, data, settings, progress=(
        (lambda message: None) if config.runtime.no_progress
        else (lambda message: print(f"benchmark: {message}", file=sys.stderr, flush=True))))
    written = write_benchmark(report, config.output_dir)
    print(benchmark_table(report))
    print(f"report: {written['html']} (also .md, .json, .csv, .png)")
    return 0


@command_config
class Plausibility:
    """agreement with human rationales (ERASER format)

    Attributes:
      model: a trained-model folder.
      plausibility: the rationales, explainers and top-k.
      output_dir: where plausibility.json and plausibility.md go.
    """

    model: str = field(metadata={"metavar": "FOLDER"})
    plausibility: PlausibilityConfig
    output_dir: str = "runs/plausibility"
    runtime: Runtime = runtime_field()


def plausibility(config: Plausibility) -> int:
    from smat.jobs.plausibility import plausibility_report, plausibility_table
    from smat.store.model_store import load

    settings = config.plausibility
    rationales = rationale_rows(settings.data_dir, split=settings.split,
                                num_examples=settings.explain.num_examples)
    trained = load(config.model, precision=settings.explain.precision)
    report = plausibility_report(trained, rationales, settings.explain,
                                 max_len=settings.max_len, top_k=settings.top_k)
    write_report(config.output_dir, "plausibility", report, plausibility_table(report))
    return 0


# ------------------------------------------------------------------ human studies


@command_config
class StudyBuild:
    """tasks (top-k words of each method) and work packages from a model's held-out split

    Attributes:
      model: a `smat train-teacher` model folder.
      study: the samples, methods, k settings and work packages.
      output_dir: where tasks.jsonl, tasks.csv, packages.csv and manifest.json go.
    """

    model: str = field(metadata={"metavar": "FOLDER"})
    # the study's rows are --num-samples, an equal share per class
    study: StudyConfig = field(metadata={"skip": ("num_examples",)})
    output_dir: str = "runs/study"
    runtime: Runtime = runtime_field()


def study_build(config: StudyBuild) -> int:
    from smat.jobs.study import build_study, write_study
    from smat.store.model_store import load

    study = build_study(load(config.model, precision=config.study.explain.precision),
                        config.study)
    write_study(study, config.output_dir)
    print(json.dumps({k: study["manifest"][k] for k in ("num_tasks", "num_annotators",
                                                        "words_cut_by_max_len")}))
    return 0


@command_config
class StudyRead:
    """a model answers the tasks (a machine reader)

    Attributes:
      model: the reading model's folder.
      tasks: tasks.jsonl of `smat study build`.
      name: the reader's worker id.
      hidden: hidden words become the mask token, or are left out.
      output_dir: the answers go to OUTPUT_DIR/NAME.jsonl, one line per task.
      output: the old spelling of --output-dir: the answers file itself.
    """

    model: str = field(metadata={"metavar": "FOLDER"})
    tasks: str = field(metadata={"metavar": "FILE"})
    name: str = "model"
    hidden: str = field(default="mask", metadata={"choices": ("mask", "drop")})
    output_dir: str = "runs/study"
    output: str | None = field(default=None, metadata={"metavar": "FILE", "shown": "none",
                                                       "renamed_to": "--output-dir"})
    runtime: Runtime = runtime_field()


def study_read(config: StudyRead) -> int:
    from smat.jobs.study import machine_answers, read_tasks
    from smat.store.model_store import load

    answers = machine_answers(load(config.model), read_tasks(config.tasks), name=config.name,
                              hidden=config.hidden)
    output = (Path(config.output) if config.output
              else Path(config.output_dir) / f"{config.name}.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("".join(json.dumps(a) + "\n" for a in answers))
    print(f"{len(answers)} answers by {config.name} -> {output}")
    return 0


@command_config
class StudyScore:
    """majority vote, accuracy per k, difficulty-weighted scores, Flips and Aids

    Attributes:
      tasks: the study's tasks (JSON lines).
      answers: per-annotator answers (.csv, .tsv or .jsonl).
      voted: instead of --tasks / --answers: a majority-voted table, one row per sample,
        method and k with a 0/1 correct column.
      voted_columns: its column names; rows whose K is 'All' are full-text rows, not scored.
        Lu et al.'s released votes: Text Saliency Words Correct --sample-from block.
      sample_from: a voted row's sample: 'column' its SAMPLE cell; 'block' a new sample at
        each full-text row; 'text' the SAMPLE (text) cell of the full-text row above it.
      delimiter: the CSV / TSV delimiter, one character or 'tab'.
      min_seconds: drop workers whose median time per task is below this.
      keep_all_dont_know: keep workers who answered only "I don't know" (default: drop).
      worker_column: the --answers column naming the annotator.
      task_column: the --answers column naming the task, as in --tasks.
      answer_column: the --answers column holding the chosen label.
      lenient: drop answers that do not fit the tasks with a warning (default: an error
        that counts them).
      compare: another scored study.json (e.g. a machine reader's): report the Spearman rho
        between the two studies' method scores.
      output_dir: where study.json, study.md and accuracy.png go.
    """

    tasks: str | None = field(default=None, metadata={"metavar": "FILE", "shown": "none"})
    answers: str | None = field(default=None, metadata={"metavar": "FILE", "shown": "none"})
    voted: str | None = field(default=None, metadata={"metavar": "FILE", "shown": "none"})
    voted_columns: tuple[str, ...] = field(
        default=("sample", "method", "k", "correct"),
        metadata={"nargs": 4, "metavar": ("SAMPLE", "METHOD", "K", "CORRECT")})
    sample_from: str = field(default="column", metadata={"choices": SAMPLE_RULES})
    delimiter: str | None = field(default=None,
                                  metadata={"shown": "sniffed from the file's first lines"})
    min_seconds: float | None = field(default=None, metadata={"shown": "keep all"})
    keep_all_dont_know: bool = False
    worker_column: str = "worker"
    task_column: str = "task_id"
    answer_column: str = "answer"
    lenient: bool = False
    compare: str | None = field(default=None, metadata={"metavar": "FILE", "shown": "none"})
    output_dir: str = "runs/study"


def study_score(config: StudyScore) -> int:
    from smat.evaluation.human_study import plot_accuracy, score_rank_correlation
    from smat.jobs.study import score_files, score_voted_file, study_tables

    if (config.answers is None) == (config.voted is None):
        raise ValueError("give either --answers (per-annotator) or --voted (a majority-voted "
                         "table), with --tasks for --answers")
    if config.voted is not None:
        report = score_voted_file(config.voted, columns=list(config.voted_columns),
                                  sample_from=config.sample_from, delimiter=config.delimiter)
    else:
        if config.tasks is None:
            raise ValueError("--answers needs --tasks (the study's tasks.jsonl)")
        report = score_files(config.tasks, config.answers, lenient=config.lenient,
                             columns=(config.worker_column, config.task_column,
                                      config.answer_column),
                             min_seconds=config.min_seconds,
                             drop_all_dont_know=not config.keep_all_dont_know,
                             delimiter=config.delimiter)
    if config.compare is not None:
        other = read_json(config.compare)
        report["spearman_with_compared"] = score_rank_correlation(report["score"],
                                                                  other["score"])
    plot_accuracy(report, Path(config.output_dir) / "accuracy.png")
    write_report(config.output_dir, "study", report, study_tables(report))
    return 0


# ------------------------------------------------------------------ the table


@dataclasses.dataclass(frozen=True)
class Command:
    """One sub-command: its words, its config (every flag a field; the docstring's first
    paragraph the help) and the function that runs it.

    Attributes:
      name: the command's words ("train-teacher", "study build").
      config: the command's config dataclass.
      run: runs a built config; returns the exit status.
      replay: for ``--config FILE``: what a run's config.json records (dotted key paths)
        -> the config field it sets (dotted); the longest recorded prefix wins.
    """

    name: str
    config: type
    run: Callable[[Any], int]
    replay: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def help(self) -> str:
        return " ".join((self.config.__doc__ or "").split("\n\n")[0].split())


def commands() -> tuple[Command, ...]:
    """The command table: the training and explanation commands, one command per entry of
    :data:`smat.jobs.evaluators.EVALUATORS` (read at each call, so a registered evaluation
    is a command), the multi-model evaluations, the human studies and predict."""
    return (
        Command("train-teacher", TrainTeacher, train_teacher,
                replay={"data": "data", "train": "train", "model_source": "model.encoder",
                        "pooling": "model.pooling", "head": "model.head",
                        "num_layers": "model.num_layers"}),
        Command("train-student", TrainStudent, train_student,
                replay={"student": "student", "student.explainer": "explainers",
                        "num_examples": "size", "teacher_dir": "teacher"}),
        Command("simulability", Simulability, simulability),
        Command("explain", Explain, explain),
        Command("demo", Demo, demo),
        Command("roar", Roar, roar),
        *(evaluation_command(evaluator) for evaluator in EVALUATORS.values()),
        Command("agreement", Agreement, agreement),
        Command("plausibility", Plausibility, plausibility),
        Command("benchmark", Benchmark, benchmark),
        Command("study build", StudyBuild, study_build),
        Command("study read", StudyRead, study_read),
        Command("study score", StudyScore, study_score),
        Command("predict", Predict, predict),
    )


GROUPS = {"study": "human simulability studies (Lu et al.)"}
