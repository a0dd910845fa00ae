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

Training and evaluation commands take --devices N (shard batches over N devices, default
all) and, on several hosts, --coordinator / --num-processes / --process-id or --distributed
(see smat.parallel).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

from smat.demo import DEMO_EXPLAINERS, DEMO_SEEDS, DEMO_SIZE
from smat.evaluation.eval_cli import build_evaluation_parsers
from smat.evaluation.roar_cli import build_roar_parser
from smat.pipeline import (
    DataConfig,
    run_student,
    run_student_seeds,
    run_teacher,
    run_teacher_seeds,
)
from smat.student import SETTINGS, StudentTrainConfig
from smat.train import TeacherTrainConfig


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, *,
                         skip: Sequence[str] = ()) -> None:
    """One `--flag` per field of a config dataclass, typed and defaulted from the field."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        # `float | None` -> float: the flag's value type is the non-None member.
        kind = next(t for t in typing.get_args(hints[field.name]) or (hints[field.name],)
                    if t is not type(None))
        parser.add_argument(flag, dest=f"{cls.__name__}.{field.name}", type=kind,
                            metavar=field.name.upper(),
                            default=default, help=f"(default: {default})")


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


def _train_teacher(args: argparse.Namespace) -> int:
    data = _build_config(DataConfig, args)
    train = _build_config(TeacherTrainConfig, args)
    if args.parallel_seeds > 1:
        seeds = [train.seed + i for i in range(args.parallel_seeds)]
        records = run_teacher_seeds(data=data, train=train, seeds=seeds, model_source=args.model,
                                    pooling=args.pooling, output_dir=args.output_dir,
                                    progress=not args.no_progress)
        print(json.dumps({f"seed{seed}": {"test": r["test"], "steps": r["steps"],
                                          "model": str(Path(args.output_dir) / f"seed{seed}"
                                                       / "model")}
                          for seed, r in zip(seeds, records, strict=True)}, indent=2))
        return 0
    record = run_teacher(data=data, train=train, model_source=args.model,
                         pooling=args.pooling, output_dir=args.output_dir,
                         progress=not args.no_progress)
    print(json.dumps({"test": record["test"], "train_seconds": record["train_seconds"],
                      "steps": record["steps"], "model": str(Path(args.output_dir) / "model")},
                     indent=2))
    return 0


def _predict(args: argparse.Namespace) -> int:
    from smat.predict import predict_texts

    texts = [line for line in Path(args.texts).read_text().splitlines() if line.strip()]
    for row in predict_texts(args.model, texts, batch_size=args.batch_size):
        print(json.dumps(row))
    return 0


def _student_dir(args: argparse.Namespace, seed: int) -> Path:
    if args.output_dir is None:
        return (Path(args.teacher) / "students" / f"n{args.num_examples}" / args.explainer
                / f"seed{seed}")
    return Path(args.output_dir) / (f"seed{seed}" if args.parallel_seeds > 1 else "")


def _train_student(args: argparse.Namespace) -> int:
    config = _build_config(StudentTrainConfig, args, explainer=args.explainer)
    keys = ("explainer", "seed", "num_examples", "test", "validation", "steps", "train_seconds")
    if args.parallel_seeds > 1:
        seeds = [config.seed + i for i in range(args.parallel_seeds)]
        records = run_student_seeds(args.teacher, config=config, seeds=seeds,
                                    num_examples=args.num_examples,
                                    output_dirs=[_student_dir(args, s) for s in seeds],
                                    progress=not args.no_progress)
        print(json.dumps([{k: r[k] for k in keys} for r in records], indent=2))
        return 0
    output_dir = _student_dir(args, config.seed)
    record = run_student(args.teacher, config=config, num_examples=args.num_examples,
                         output_dir=output_dir, progress=not args.no_progress)
    print(json.dumps({k: record[k] for k in keys}, indent=2))
    return 0


def _simulability(args: argparse.Namespace) -> int:
    from smat.evaluation.simulability import plot_simulability, run_grid, simulability_table

    student = _build_config(StudentTrainConfig, args)
    seeds = list(range(args.seeds))
    output_dir = Path(args.output_dir or Path(args.teacher) / "simulability")
    records = run_grid(args.teacher, sizes=args.sizes, explainers=args.explainers, seeds=seeds,
                       student=student, output_dir=output_dir, progress=not args.no_progress,
                       parallel_seeds=args.parallel_seeds)
    metric = "accuracy" if "accuracy" in records[0]["test"] else "pearson"
    table = simulability_table(records, metric=metric)
    (output_dir / "table.md").write_text(table + "\n")
    (output_dir / "results.json").write_text(json.dumps(records, indent=2))
    plot_simulability(records, output_dir / "simulability.png", metric=metric)
    print(table)
    return 0


def _explain(args: argparse.Namespace) -> int:
    from smat.explain import explain_texts, write_explanations
    from smat.model_store import load

    texts = [line for line in Path(args.texts).read_text().splitlines() if line.strip()]
    explanations = explain_texts(args.model, texts, args.explainer, ig_steps=args.ig_steps,
                                 batch_size=args.batch_size)
    label_names = load(args.model).info.get("label_names") or ()
    print(json.dumps(write_explanations(explanations, args.output_dir, texts=texts,
                                        label_names=label_names), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from smat.demo import run_demo

    run_demo(args.output_dir, teacher_dir=args.teacher, num_examples=args.num_examples,
             seeds=tuple(args.seeds), explainers=tuple(args.explainers),
             progress=not args.no_progress)
    return 0


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
    teacher.add_argument("--parallel-seeds", type=int, default=1, metavar="N",
                         help="train seeds SEED..SEED+N-1 in one vmapped program, each in "
                              "OUTPUT_DIR/seed{s} (default: 1, one run in OUTPUT_DIR)")
    teacher.add_argument("--no-progress", action="store_true")
    _add_runtime_flags(teacher)
    teacher.set_defaults(run=_train_teacher)

    student = commands.add_parser("train-student",
                                  help="train a student to simulate a teacher (SMaT)")
    student.add_argument("--teacher", required=True, help="a `smat train-teacher` run folder")
    student.add_argument("--explainer", required=True, choices=SETTINGS)
    student.add_argument("--num-examples", type=int, required=True)
    student.add_argument("--output-dir", default=None,
                         help="(default: TEACHER/students/n{N}/{explainer}/seed{S})")
    student.add_argument("--parallel-seeds", type=int, default=1, metavar="N",
                         help="train seeds SEED..SEED+N-1 in one vmapped program (OUTPUT_DIR/"
                              "seed{s} each; default: 1)")
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
                      choices=SETTINGS)
    grid.add_argument("--output-dir", default=None, help="(default: TEACHER/simulability)")
    grid.add_argument("--parallel-seeds", action="store_true",
                      help="train the seeds of each (size, explainer) in one vmapped program")
    grid.add_argument("--no-progress", action="store_true")
    _add_dataclass_flags(grid, StudentTrainConfig, skip=("explainer", "seed"))
    _add_runtime_flags(grid)
    grid.set_defaults(run=_simulability)

    explain = commands.add_parser("explain", help="explain predictions; JSON + HTML page")
    explain.add_argument("--model", required=True, help="a trained-model folder")
    explain.add_argument("--explainer", nargs="+", required=True,
                         help="static names (gradient, input_x_gradient, integrated_gradients, "
                              "attention_all, attention_last, attention_rollout, random) or "
                              "saved learned-explainer folders")
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
                      choices=SETTINGS, help="student settings, 'none' first (default: "
                                             f"{' '.join(DEMO_EXPLAINERS)})")
    demo.add_argument("--no-progress", action="store_true")
    _add_runtime_flags(demo)
    demo.set_defaults(run=_demo)

    _add_runtime_flags(build_roar_parser(commands))
    for evaluation in build_evaluation_parsers(commands):
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
