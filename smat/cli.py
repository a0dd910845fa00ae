"""The `smat` command line: a thin parser over the typed configs of the library.

    smat demo [--output-dir runs/demo]
    smat train-teacher [--source movie-snippets] [--output-dir runs/teacher] ...
    smat train-student --teacher runs/teacher --explainer smat --num-examples 500 --seed 0
    smat simulability --teacher runs/teacher --sizes 500 1000 2000 --seeds 5 --explainers ...
    smat explain --model runs/teacher/model --explainer gradient attention_all texts.txt
    smat faithfulness --model runs/teacher/model --explainers gradient attention_all random
    smat agreement --model runs/teacher/model --explainers gradient attention_all random
    smat plausibility --model runs/teacher/model --data-dir ERASER/movies --explainers ...
    smat roar --recursive --explainers attention gradient --ratios 0:100:20 --seeds 3
    smat predict --model runs/teacher/model texts.txt

Training commands run `--seeds N` seeds (from `--seed`, default 0), one after another or,
with `--parallel-seeds`, in one vmapped program. Every command takes --devices N (shard
batches over N devices, default all), on several hosts --coordinator / --num-processes /
--process-id or --distributed (see smat.parallel), and --compile-cache DIR /
--no-compile-cache for the persistent compilation cache (on by default, for this command
only).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.evaluation.agreement import AGREEMENT_METRICS
from smat.evaluation.faithfulness import DEFAULT_BINS
from smat.evaluation.roar import check_ratios
from smat.jobs.demo import DEMO_EXPLAINERS, DEMO_SEEDS, DEMO_SIZE
from smat.jobs.runs import DataConfig, run_student, run_teacher
from smat.registry import STUDENT_SETTINGS, names_help
from smat.training.loop import seed_folders
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> its one-paragraph description from the class docstring's Attributes."""
    docs, name = {}, None
    lines = (cls.__doc__ or "").split("Attributes:", 1)[-1].splitlines()
    for line in lines:
        match = re.match(r"^ {6}(\w+): (.*)$", line)
        if match:
            name = match.group(1)
            docs[name] = match.group(2).strip()
        elif name and line.startswith(" " * 8) and line.strip():
            docs[name] += " " + line.strip()
        elif line.strip() == "" and docs:
            name = None
    return docs


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, *,
                         skip: Sequence[str] = ()) -> None:
    """One `--flag` per field of a config dataclass: typed, defaulted and documented from it.

    A bool field becomes a switch; the help text is the field's description in the class
    docstring's Attributes section (a field without one is an error: document it there).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        if field.name not in docs:
            raise TypeError(f"{cls.__name__}.{field.name} has no description in the class "
                            "docstring's Attributes section (the --help text comes from it)")
        flag = "--" + field.name.replace("_", "-")
        dest, default = f"{cls.__name__}.{field.name}", field.default
        if hints[field.name] is bool:
            parser.add_argument(flag, dest=dest, action="store_true", default=default,
                                help=docs[field.name].replace("%", "%%"))
            continue
        # `float | None` -> float: the flag's value type is the non-None member.
        kind = next(t for t in typing.get_args(hints[field.name]) or (hints[field.name],)
                    if t is not type(None))
        parser.add_argument(flag, dest=dest, type=kind, metavar=field.name.upper(),
                            default=default,
                            help=f"{docs[field.name]} (default: {default})".replace("%", "%%"))


def _add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """--devices, the multi-host flags of smat.parallel.initialize_distributed and the
    compilation-cache flags."""
    group = parser.add_argument_group("devices (smat.parallel)")
    group.add_argument("--devices", type=int, default=None,
                       help="devices to shard each batch over (default: all)")
    group.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="multi-host: address of process 0 (or JAX_COORDINATOR_ADDRESS)")
    group.add_argument("--num-processes", type=int, default=None,
                       help="multi-host: number of processes (or JAX_NUM_PROCESSES)")
    group.add_argument("--process-id", type=int, default=None,
                       help="multi-host: this process, 0..N-1 (or JAX_PROCESS_ID)")
    group.add_argument("--distributed", action="store_true",
                       help="multi-host with JAX's cluster detection (TPU pod, SLURM, MPI)")
    cache = parser.add_argument_group("compilation cache")
    cache.add_argument("--compile-cache", default=None, metavar="DIR",
                       help="persist compiled XLA programs in DIR (default: "
                            f"${COMPILE_CACHE_ENV}, else $JAX_COMPILATION_CACHE_DIR, else "
                            "~/.cache/smat/jax; 'off' or --no-compile-cache disables it)")
    cache.add_argument("--no-compile-cache", dest="compile_cache", action="store_const",
                       const="off", help="compile every program afresh (same as "
                                         f"{COMPILE_CACHE_ENV}=off)")


@contextlib.contextmanager
def _device_mesh(args: argparse.Namespace):
    """Start multi-host JAX if asked, then run with a data mesh as JAX's ambient mesh."""
    if not hasattr(args, "devices"):
        yield
        return
    import jax

    from smat.parallel import data_mesh, initialize_distributed

    initialize_distributed(coordinator_address=args.coordinator,
                           num_processes=args.num_processes, process_id=args.process_id,
                           auto=args.distributed)
    with jax.set_mesh(data_mesh(args.devices)):
        yield


def _build_config(cls: type, args: argparse.Namespace, **overrides):
    values = {f.name: getattr(args, f"{cls.__name__}.{f.name}")
              for f in dataclasses.fields(cls) if hasattr(args, f"{cls.__name__}.{f.name}")}
    return cls(**{**values, **overrides})


def _seeds(args: argparse.Namespace, first: int) -> list[int]:
    """`--seeds N` consecutive seeds from `first` (the config's --seed)."""
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    return list(range(first, first + args.seeds))


def _train_teacher(args: argparse.Namespace) -> int:
    data = _build_config(DataConfig, args)
    train = _build_config(TeacherTrainConfig, args)
    seeds = _seeds(args, train.seed)
    records = run_teacher(data=data, train=train, seeds=seeds, model_source=args.model,
                          pooling=args.pooling, output_dir=args.output_dir,
                          progress=not args.no_progress)
    folders = seed_folders(args.output_dir, seeds)
    summary = [{"seed": seed, "test": r["test"], "train_seconds": r["train_seconds"],
                "steps": r["steps"], "model": str(folder / "model")}
               for seed, folder, r in zip(seeds, folders, records, strict=True)]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


def _predict(args: argparse.Namespace) -> int:
    from smat.jobs.predict import predict_texts

    texts = [line for line in Path(args.texts).read_text().splitlines() if line.strip()]
    for row in predict_texts(args.model, texts, batch_size=args.batch_size):
        print(json.dumps(row))
    return 0


def _train_student(args: argparse.Namespace) -> int:
    config = _build_config(StudentTrainConfig, args, explainer=args.explainer)
    seeds = _seeds(args, config.seed)
    output_dir = args.output_dir or (Path(args.teacher) / "students" / f"n{args.num_examples}"
                                     / args.explainer)
    folders = ([Path(output_dir) / f"seed{seed}" for seed in seeds] if args.output_dir is None
               else seed_folders(output_dir, seeds))
    records = run_student(args.teacher, config=config, seeds=seeds,
                          num_examples=args.num_examples, output_dir=folders,
                          progress=not args.no_progress)
    keys = ("explainer", "seed", "num_examples", "test", "validation", "steps", "train_seconds")
    summary = [{k: r[k] for k in keys} for r in records]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


def _simulability(args: argparse.Namespace) -> int:
    from smat.evaluation.simulability import plot_simulability, simulability_table
    from smat.jobs.grid import run_grid

    student = _build_config(StudentTrainConfig, args)
    seeds = list(range(args.seeds))
    output_dir = Path(args.output_dir or Path(args.teacher) / "simulability")
    records = run_grid(args.teacher, sizes=args.sizes, explainers=args.explainers, seeds=seeds,
                       student=student, output_dir=output_dir, progress=not args.no_progress)
    metric = "accuracy" if "accuracy" in records[0]["test"] else "pearson"
    table = simulability_table(records, metric=metric)
    (output_dir / "table.md").write_text(table + "\n")
    (output_dir / "results.json").write_text(json.dumps(records, indent=2))
    plot_simulability(records, output_dir / "simulability.png", metric=metric)
    print(table)
    return 0


def _explain(args: argparse.Namespace) -> int:
    from smat.jobs.explain import explain_texts, write_explanations
    from smat.store.model_store import load

    texts = [line for line in Path(args.texts).read_text().splitlines() if line.strip()]
    explanations = explain_texts(args.model, texts, args.explainer, ig_steps=args.ig_steps,
                                 batch_size=args.batch_size)
    label_names = load(args.model).info.get("label_names") or ()
    print(json.dumps(write_explanations(explanations, args.output_dir, texts=texts,
                                        label_names=label_names), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from smat.jobs.demo import run_demo

    run_demo(args.output_dir, teacher_dir=args.teacher, num_examples=args.num_examples,
             seeds=tuple(args.seeds), explainers=tuple(args.explainers),
             progress=not args.no_progress)
    return 0


# ------------------------------------------------------------------ evaluation commands



def _write(output_dir: str, kind: str, report: dict[str, Any]) -> None:
    from smat.jobs.reports import markdown_table
    from smat.store.run_log import write_json_atomic

    table = markdown_table(kind, report)
    write_json_atomic(Path(output_dir) / f"{kind}.json", report)
    (Path(output_dir) / f"{kind}.md").write_text(table + "\n")
    print(table)


def _faithfulness(args: argparse.Namespace) -> int:
    from smat.jobs.reports import faithfulness_report, held_out_split
    from smat.store.model_store import load

    trained = load(args.model)
    data = held_out_split(trained, num_examples=args.num_examples)
    report = faithfulness_report(trained, data, args.explainers,
                                 bins=[b / 100 for b in args.bins], replacement=args.replacement,
                                 ig_steps=args.ig_steps, batch_size=args.batch_size)
    _write(args.output_dir, "faithfulness", report)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from smat.jobs.reports import agreement_report, held_out_split
    from smat.store.model_store import load

    models = [load(path) for path in args.model]
    data = held_out_split(models[0], num_examples=args.num_examples)
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    report = agreement_report(models, data, args.explainers, metrics=args.metrics,
                              top_k=args.top_k, ig_steps=args.ig_steps,
                              batch_size=args.batch_size, plot_dir=args.output_dir)
    _write(args.output_dir, "agreement", report)
    return 0


def _plausibility(args: argparse.Namespace) -> int:
    from smat.data import load_eraser
    from smat.jobs.reports import plausibility_report
    from smat.store.model_store import load

    trained = load(args.model)
    # Plausibility explains the model's predictions: the data set's gold labels are not used.
    rationales = load_eraser(args.data_dir, split=args.split)
    if args.num_examples is not None:
        rationales = rationales.select(range(min(args.num_examples, len(rationales))))
    report = plausibility_report(trained, rationales, args.explainers, max_len=args.max_len,
                                 top_k=args.top_k, ig_steps=args.ig_steps,
                                 batch_size=args.batch_size)
    _write(args.output_dir, "plausibility", report)
    return 0


def _common(parser: argparse.ArgumentParser, *, batch_size: int) -> None:
    parser.add_argument("--explainers", nargs="+", required=True, help=names_help())
    parser.add_argument("--num-examples", type=int, default=None,
                        help="evaluate the first N examples (default: all)")
    parser.add_argument("--ig-steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=batch_size)


def _add_evaluation_commands(subparsers: Any) -> list[argparse.ArgumentParser]:
    """The faithfulness, agreement and plausibility sub-commands (:mod:`smat.jobs.reports`).

    Faithfulness and agreement run on the model's held-out test split (rebuilt from the
    data settings saved with it); each writes ``{command}.json`` and ``{command}.md`` to
    ``--output-dir`` and prints the table.
    """
    faith = subparsers.add_parser(
        "faithfulness", help="comprehensiveness / sufficiency of explainers (ERASER AOPC)")
    faith.add_argument("--model", required=True, help="a `smat train-teacher` model folder")
    _common(faith, batch_size=16)
    faith.add_argument("--bins", type=float, nargs="+", default=[100 * b for b in DEFAULT_BINS],
                       help="percent of tokens removed / kept per bin")
    faith.add_argument("--replacement", default="mask", choices=["mask", "pad"])
    faith.add_argument("--output-dir", default="runs/faithfulness")
    faith.set_defaults(run=_faithfulness)

    agree = subparsers.add_parser("agreement",
                                  help="pairwise agreement between explainers (Jukić et al.)")
    agree.add_argument("--model", nargs="+", required=True,
                       help="one or more model folders (seeds), sharing a tokenizer")
    _common(agree, batch_size=16)
    agree.add_argument("--metrics", nargs="+", default=list(AGREEMENT_METRICS),
                       choices=list(AGREEMENT_METRICS))
    agree.add_argument("--top-k", type=int, default=5, help="tokens in the top-k overlap")
    agree.add_argument("--output-dir", default="runs/agreement")
    agree.set_defaults(run=_agreement)

    plaus = subparsers.add_parser("plausibility",
                                  help="agreement with human rationales (ERASER format)")
    plaus.add_argument("--model", required=True, help="a trained-model folder")
    plaus.add_argument("--data-dir", required=True,
                       help="ERASER data set folder ({split}.jsonl and docs/)")
    plaus.add_argument("--split", default="test", choices=["train", "val", "test"])
    plaus.add_argument("--max-len", type=int, default=None,
                       help="token length (default: the model's)")
    plaus.add_argument("--top-k", type=int, default=None,
                       help="words selected for F1 (default: mean rationale length)")
    _common(plaus, batch_size=8)
    plaus.add_argument("--output-dir", default="runs/plausibility")
    plaus.set_defaults(run=_plausibility)
    return [faith, agree, plaus]


# ------------------------------------------------------------------ roar


def parse_ratios(text: str) -> tuple[float, ...]:
    """``"0:100:10"`` (percent start:stop:step, inclusive) or ``"0,20,50,100"`` -> fractions.

    Raises:
      ValueError: malformed text (the message shows both forms).
    """
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            if step <= 0:
                raise ValueError
            percents = list(range(start, stop + 1, step))
        else:
            percents = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--ratios must be 'start:stop:step' in percent (e.g. 0:100:10) or a "
                         f"comma list (e.g. 0,20,50,100); got {text!r}") from None
    return check_ratios([p / 100 for p in percents])


def _add_roar_command(subparsers: Any) -> argparse.ArgumentParser:
    """The ``roar`` sub-command over :func:`smat.jobs.roar.run_roar`. Every cell retrains
    from scratch, so the compilation cache (on by default) saves most compile time."""
    parser = subparsers.add_parser(
        "roar", help="ROAR / Recursive ROAR faithfulness (Madsen et al., 2022)")
    from smat.jobs.roar import EXPLAINERS, PRESETS, RoarConfig

    defaults = RoarConfig()
    parser.add_argument("--recursive", action="store_true", help="Recursive ROAR")
    parser.add_argument("--explainers", nargs="+", default=list(defaults.explainers),
                        choices=EXPLAINERS)
    parser.add_argument("--ratios", default="0:100:20", help="percent start:stop:step or list")
    parser.add_argument("--seeds", type=int, default=len(defaults.seeds),
                        help="number of seeds (0..N-1)")
    parser.add_argument("--parallel-seeds", action="store_true",
                        help="train the seeds of each cell in one vmapped program (GPU)")
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS))
    parser.add_argument("--model", default=None, help="pretrained folder or Hub id")
    parser.add_argument("--source", default="movie-snippets")
    parser.add_argument("--task", default="classification",
                        choices=["classification", "regression"])
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--label-column", default="label")
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--num-examples", type=int, default=None,
                        help="subsample before splitting (default: all)")
    parser.add_argument("--validation-fraction", type=float,
                        default=defaults.validation_fraction)
    parser.add_argument("--test-fraction", type=float, default=defaults.test_fraction)
    parser.add_argument("--metric", default=defaults.metric,
                        choices=["accuracy", "macro_f1", "pearson"])
    parser.add_argument("--ig-steps", type=int, default=defaults.ig_steps)
    for name in ("learning_rate", "batch_size", "max_epochs", "patience", "warmup_steps",
                 "evals_per_epoch"):
        kind = type(getattr(TeacherTrainConfig(), name))
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None,
                            help="(default: the preset's)")
    parser.add_argument("--output-dir", default="runs/roar")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(run=_roar_command)
    return parser


def _roar_command(args: argparse.Namespace) -> int:
    from smat.jobs.roar import PRESETS, RoarConfig, roar_markdown_table, run_roar

    metric = "pearson" if args.task == "regression" else args.metric
    roar = RoarConfig(explainers=tuple(args.explainers), ratios=parse_ratios(args.ratios),
                      seeds=tuple(range(args.seeds)), recursive=args.recursive,
                      num_examples=args.num_examples,
                      validation_fraction=args.validation_fraction,
                      test_fraction=args.test_fraction, ig_steps=args.ig_steps, metric=metric,
                      parallel_seeds=args.parallel_seeds)
    data = DataConfig(source=args.source, task=args.task, text_column=args.text_column,
                      label_column=args.label_column, max_len=args.max_len,
                      split_seed=args.split_seed)
    overrides = {name: getattr(args, name) for name in (
        "learning_rate", "batch_size", "max_epochs", "patience", "warmup_steps",
        "evals_per_epoch") if getattr(args, name) is not None}
    train = dataclasses.replace(PRESETS[args.preset].train, **overrides)
    report = run_roar(data=data, roar=roar, preset=args.preset, train=train,
                      model_source=args.model, output_dir=args.output_dir,
                      progress=not args.no_progress)
    print(f"{report['mode']} ({report['metric']}, mean over {len(report['seeds'])} seeds)")
    print(roar_markdown_table(report))
    return 0


# ------------------------------------------------------------------ the parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `smat` command (one sub-command per job)."""
    parser = argparse.ArgumentParser(prog="smat", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    teacher = commands.add_parser("train-teacher", help="fine-tune a teacher on gold labels")
    _add_dataclass_flags(teacher, DataConfig)
    _add_dataclass_flags(teacher, TeacherTrainConfig)
    teacher.add_argument("--model", default=None,
                         help="pretrained folder or Hub id (default: offline all-MiniLM-L6-v2)")
    teacher.add_argument("--pooling", default="scalar_mix", choices=["scalar_mix", "cls", "mean"])
    teacher.add_argument("--output-dir", default="runs/teacher")
    teacher.add_argument("--seeds", type=int, default=1, metavar="N",
                         help="train seeds SEED..SEED+N-1, each in OUTPUT_DIR/seed{s} "
                              "(default: 1, one run in OUTPUT_DIR)")
    teacher.add_argument("--no-progress", action="store_true")
    _add_runtime_flags(teacher)
    teacher.set_defaults(run=_train_teacher)

    student = commands.add_parser("train-student",
                                  help="train a student to simulate a teacher (SMaT)")
    student.add_argument("--teacher", required=True, help="a `smat train-teacher` run folder")
    student.add_argument("--explainer", required=True, choices=STUDENT_SETTINGS)
    student.add_argument("--num-examples", type=int, required=True)
    student.add_argument("--output-dir", default=None,
                         help="(default: TEACHER/students/n{N}/{explainer}/seed{S}; with "
                              "--output-dir, several seeds go to OUTPUT_DIR/seed{S})")
    student.add_argument("--seeds", type=int, default=1, metavar="N",
                         help="train seeds SEED..SEED+N-1 (default: 1)")
    student.add_argument("--no-progress", action="store_true")
    _add_dataclass_flags(student, StudentTrainConfig, skip=("explainer",))
    _add_runtime_flags(student)
    student.set_defaults(run=_train_student)

    grid = commands.add_parser("simulability",
                               help="simulability grid over sizes x explainers x seeds")
    grid.add_argument("--teacher", required=True)
    grid.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    grid.add_argument("--seeds", type=int, default=5, help="number of seeds (0..S-1)")
    grid.add_argument("--explainers", nargs="+", default=["none", "attention_all", "smat"],
                      choices=STUDENT_SETTINGS)
    grid.add_argument("--output-dir", default=None, help="(default: TEACHER/simulability)")
    grid.add_argument("--no-progress", action="store_true")
    _add_dataclass_flags(grid, StudentTrainConfig, skip=("explainer", "seed"))
    _add_runtime_flags(grid)
    grid.set_defaults(run=_simulability)

    explain = commands.add_parser("explain", help="explain predictions; JSON + HTML page")
    explain.add_argument("--model", required=True, help="a trained-model folder")
    explain.add_argument("--explainer", nargs="+", required=True,
                         help=names_help())
    explain.add_argument("--ig-steps", type=int, default=50)
    explain.add_argument("--batch-size", type=int, default=16)
    explain.add_argument("--output-dir", default="runs/explain")
    explain.add_argument("texts", help="text file, one example per line")
    _add_runtime_flags(explain)
    explain.set_defaults(run=_explain)

    demo = commands.add_parser("demo", help="the main job end to end on the offline defaults")
    demo.add_argument("--output-dir", default="runs/demo")
    demo.add_argument("--teacher", default=None,
                      help="reuse this teacher run folder (default: OUTPUT_DIR/teacher)")
    demo.add_argument("--num-examples", type=int, default=DEMO_SIZE,
                      help=f"student training examples (default: {DEMO_SIZE})")
    demo.add_argument("--seeds", type=int, nargs="+", default=list(DEMO_SEEDS),
                      help=f"student seeds (default: {' '.join(map(str, DEMO_SEEDS))})")
    demo.add_argument("--explainers", nargs="+", default=list(DEMO_EXPLAINERS),
                      choices=STUDENT_SETTINGS, help="student settings, 'none' first (default: "
                                             f"{' '.join(DEMO_EXPLAINERS)})")
    demo.add_argument("--no-progress", action="store_true")
    _add_runtime_flags(demo)
    demo.set_defaults(run=_demo)

    _add_runtime_flags(_add_roar_command(commands))
    for evaluation in _add_evaluation_commands(commands):
        _add_runtime_flags(evaluation)

    predict = commands.add_parser("predict", help="predict a file of texts (one per line)")
    predict.add_argument("--model", required=True, help="a trained-model folder")
    predict.add_argument("--batch-size", type=int, default=64)
    predict.add_argument("texts", help="text file, one example per line")
    _add_runtime_flags(predict)
    predict.set_defaults(run=_predict)
    return parser


COMPILE_CACHE_ENV = "SMAT_COMPILE_CACHE"


def compile_cache_dir(flag: str | None) -> Path | None:
    """Where this command persists compiled XLA programs, or None for no persistent cache.

    The ``--compile-cache`` flag wins, then the environment variable ``SMAT_COMPILE_CACHE``;
    either is a folder or ``off``. The default is JAX_COMPILATION_CACHE_DIR when set, else
    ``~/.cache/smat/jax``.
    """
    import os

    choice = flag if flag is not None else os.environ.get(COMPILE_CACHE_ENV)
    if choice is not None and choice.strip().lower() in ("off", "0", "false", "no", ""):
        return None
    if choice is not None:
        return Path(choice).expanduser()
    return Path(os.environ.get("JAX_COMPILATION_CACHE_DIR")
                or Path.home() / ".cache" / "smat" / "jax")


@contextlib.contextmanager
def persistent_compile_cache(folder: Path | None):
    """Persist compiled programs under `folder` for the duration of one command.

    A rerun of the same job then loads its programs instead of compiling them (README,
    "Compilation cache"). JAX's cache is process-wide, so on exit the previous directory is
    put back and JAX's cache object is reset: calling :func:`main` from Python (as the
    tests do) leaves no global state behind. Library modules never change jax.config.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    if folder is None:
        yield
        return
    previous = jax.config.jax_compilation_cache_dir
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(folder))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)
        compilation_cache.reset_cache()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `smat` console script."""
    args = build_parser().parse_args(argv)
    try:
        with persistent_compile_cache(compile_cache_dir(getattr(args, "compile_cache", None))), \
                _device_mesh(args):
            return args.run(args)
    except (ValueError, FileNotFoundError, TypeError) as error:
        print(f"smat {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
