"""The `smat` command line: a thin parser over the typed configs of the library.

    smat demo [--output-dir runs/demo]
    smat train-teacher [--source movie-snippets] [--output-dir runs/teacher] ...
    smat train-student --teacher runs/teacher --explainers smat --size 500 --seed 0
    smat simulability --teacher runs/teacher --sizes 500 1000 2000 --seeds 5 --explainers ...
    smat explain --model runs/teacher/model --explainers gradient attention_all texts.txt
    smat faithfulness --model runs/teacher/model --explainers gradient attention_all random
    smat agreement --model runs/teacher/model --explainers gradient attention_all random
    smat agreement --variant base runs/b/model --variant tying runs/t/model --explainers ...
    smat plausibility --model runs/teacher/model --data-dir ERASER/movies --explainers ...
    smat sanity --model runs/teacher/model --mode cascading --explainers gradient ...
    smat attack --model runs/teacher/model --objective constrained --explainers gradient ...
    smat study build --model runs/teacher/model --explainers integrated_gradients random
    smat study read --model runs/teacher/model --tasks runs/study/tasks.jsonl --name teacher
    smat study score --tasks runs/study/tasks.jsonl --answers answers.csv
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
import importlib.metadata
import json
import os
import re
import signal
import sys
import threading
import types
import typing
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.compile_cache import COMPILE_CACHE_ENV, compile_cache_dir, persistent_compile_cache
from smat.jobs.attacks import AttackConfig
from smat.jobs.demo import DEMO_EXPLAINERS, DEMO_SEEDS, DEMO_SIZE
from smat.jobs.explain import ExplainConfig
from smat.jobs.reports import AgreementConfig, FaithfulnessConfig, PlausibilityConfig
from smat.jobs.runs import DataConfig, run_student, run_teacher
from smat.jobs.sanity import SanityConfig
from smat.models.inference import progress_bars
from smat.registry import STUDENT_SETTINGS
from smat.training.loop import STOP, seed_folders
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


def _nested_config(hint: Any) -> type | None:
    """The config dataclass a field holds (e.g. ``loop: LoopConfig``), else None."""
    return hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, *,
                         defaults: Any = None, skip: Sequence[str] = (),
                         relative: bool = False, prefix: str | None = None) -> None:
    """One `--flag` per field of a config dataclass: typed, defaulted and documented from it.

    A field holding another config (``loop: LoopConfig``) adds that config's flags, in
    their own group, without a prefix. A bool field becomes a switch, a ``tuple[X, ...]``
    field takes one or more values, a field whose metadata has ``parse`` takes one string
    given to it and one with ``choices`` is restricted to them. The help text is the
    field's description in the class docstring's Attributes section (a field without one
    is an error: document it there), followed by ``names()`` of the metadata if present.

    Args:
      defaults: an instance whose values are the flags' defaults (default: the fields').
      skip: field names (of this config or a nested one) that get no flag.
      relative: flags default to None, meaning "the base config's value" (for configs
        completed from a preset by :func:`_build_config`).
      prefix: the destination prefix (default: the class name).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    prefix = prefix or cls.__name__
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        if field.name not in docs:
            raise TypeError(f"{cls.__name__}.{field.name} has no description in the class "
                            "docstring's Attributes section (the --help text comes from it)")
        default = (getattr(defaults, field.name) if defaults is not None else field.default)
        dest = f"{prefix}.{field.name}"
        nested = _nested_config(hints[field.name])
        if nested is not None:
            group = parser.add_argument_group(f"{field.name} settings", docs[field.name])
            inner = None if relative or default is dataclasses.MISSING else default
            _add_dataclass_flags(group, nested, defaults=inner, skip=skip, relative=relative,
                                 prefix=dest)
            continue
        flag = "--" + field.name.replace("_", "-")
        required = default is dataclasses.MISSING and not relative
        shown = ("the preset's" if relative
                 else field.metadata.get("shown", _as_typed(default)))
        help_text = (docs[field.name] + (f": {field.metadata['names']()}"
                                         if "names" in field.metadata else "")
                     + ("" if required else f" (default: {shown})"))
        options: dict[str, Any] = {"dest": dest, "help": help_text.replace("%", "%%")}
        if relative or not required:
            options["default"] = None if relative else default
        if hints[field.name] is bool:
            parser.add_argument(flag, action="store_const", const=True, **options)
            continue
        if "parse" in field.metadata:
            options["type"] = field.metadata["parse"]
        else:
            # `float | None` -> float, `tuple[str, ...]` -> str with one or more values.
            kind = hints[field.name]
            if isinstance(kind, types.UnionType):
                kind = next(t for t in typing.get_args(kind) if t is not type(None))
            if typing.get_origin(kind) is tuple:
                kind, options["nargs"] = typing.get_args(kind)[0], "+"
            options["type"] = kind
        if "choices" in field.metadata:
            options["choices"] = field.metadata["choices"]
        else:
            options["metavar"] = field.name.upper()
        parser.add_argument(flag, required=required, **options)


def _as_typed(value: Any) -> str:
    """A default as a user types it on the command line: a sequence as its values separated
    by spaces (not a Python tuple)."""
    if isinstance(value, tuple | list):
        return " ".join(str(item) for item in value)
    return str(value)


def _build_config(cls: type, args: argparse.Namespace, *, base: Any = None,
                  prefix: str | None = None, **overrides: Any):
    """The config of the parsed flags: `base` (default: the class defaults) with every
    flag that has a value (not None) replaced, then `overrides`."""
    prefix = prefix or cls.__name__
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        dest = f"{prefix}.{field.name}"
        nested = _nested_config(hints[field.name])
        if nested is not None:
            inner = getattr(base, field.name) if base is not None else field.default
            values[field.name] = _build_config(
                nested, args, prefix=dest,
                base=None if inner is dataclasses.MISSING else inner)
        elif getattr(args, dest, None) is not None:
            value = getattr(args, dest)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    values.update(overrides)
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def _add_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """--no-progress, --devices, the multi-host flags of
    smat.parallel.initialize_distributed and the compilation-cache flags."""
    _add_progress_flag(parser)
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
                       help="persist compiled XLA programs in DIR, one sub-folder per "
                            "machine kind (default: "
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


class _RenamedFlag(argparse.Action):
    """A flag's old spelling, accepted for one release (CHANGELOG, 0.2) with a warning that
    names the new one; it stores into the new flag's destination."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is now {self.new}; the old spelling "
              "goes in the next release", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _add_renamed_flag(parser: argparse.ArgumentParser, old: str, new: str, *, dest: str,
                      **kwargs: Any) -> None:
    parser.add_argument(old, action=_RenamedFlag, new=new, dest=dest,
                        default=argparse.SUPPRESS, help=f"the old spelling of {new}", **kwargs)


def _required(args: argparse.Namespace, dest: str, flag: str) -> Any:
    """A flag that is required but may come through its old spelling (so argparse cannot
    require it)."""
    value = getattr(args, dest, None)
    if value is None:
        raise ValueError(f"{flag} is required")
    return value


def _add_seeds_flag(parser: argparse.ArgumentParser, default: int = 1) -> None:
    parser.add_argument("--seeds", type=int, default=default, metavar="N",
                        help=f"run N seeds, SEED..SEED+N-1 (default: {default}); "
                             "--parallel-seeds trains them in one vmapped program")


def _add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _add_overwrite_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the run the output folder holds and start afresh (by "
                             "default a finished run is reused, an unfinished one resumed, and "
                             "one made with other settings refused, naming the differences)")


def _seeds(args: argparse.Namespace, first: int) -> list[int]:
    """`--seeds N` consecutive seeds from `first` (the loop config's --seed)."""
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    return list(range(first, first + args.seeds))


def _train_teacher(args: argparse.Namespace) -> int:
    data = _build_config(DataConfig, args)
    train = _build_config(TeacherTrainConfig, args)
    seeds = _seeds(args, train.loop.seed)
    records = run_teacher(data=data, train=train, seeds=seeds, model_source=args.encoder,
                          pooling=args.pooling, output_dir=args.output_dir,
                          progress=not args.no_progress, overwrite=args.overwrite)
    folders = seed_folders(args.output_dir, seeds)
    summary = [{"seed": seed, "test": r["test"], "train_seconds": r["train_seconds"],
                "steps": r["steps"], "model": str(folder / "model")}
               for seed, folder, r in zip(seeds, folders, records, strict=True)]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


def _read_texts(path: str) -> list[str]:
    """The non-blank lines of `path`, one text each; checked before any model is loaded.

    Warns (UserWarning) when blank lines are skipped: outputs then follow the non-blank
    lines, not the file's line numbers (each output record carries its text).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = Path(path).read_bytes()[:error.start].count(b"\n") + 1
        raise ValueError(f"{path} is not UTF-8 text: line {line} holds the byte "
                         f"{error.object[error.start:error.start + 1]!r}; re-save it as "
                         "UTF-8") from None
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise ValueError(f"{path} holds no text (it is empty or every line is blank)")
    if len(texts) < len(lines):
        warnings.warn(f"{path}: skipped {len(lines) - len(texts)} blank line(s); the outputs "
                      f"follow the {len(texts)} non-blank lines", stacklevel=2)
    return texts


def _predict(args: argparse.Namespace) -> int:
    from smat.jobs.predict import predict_texts
    from smat.store.model_store import load

    texts = _read_texts(args.texts)
    for row in predict_texts(load(args.model), texts, batch_size=args.batch_size):
        print(json.dumps(row))
    return 0


def _train_student(args: argparse.Namespace) -> int:
    teacher = _required(args, "teacher", "--teacher")
    explainer = _required(args, "explainer", "--explainers")
    size = _required(args, "size", "--size")
    config = _build_config(StudentTrainConfig, args, explainer=explainer)
    seeds = _seeds(args, config.loop.seed)
    output_dir = args.output_dir or (Path(teacher) / "students" / f"n{size}"
                                     / explainer)
    folders = ([Path(output_dir) / f"seed{seed}" for seed in seeds] if args.output_dir is None
               else seed_folders(output_dir, seeds))
    records = run_student(teacher, config=config, seeds=seeds,
                          num_examples=size, output_dir=folders,
                          progress=not args.no_progress, overwrite=args.overwrite)
    keys = ("explainer", "seed", "num_examples", "test", "validation", "steps", "train_seconds")
    summary = [{k: r[k] for k in keys} for r in records]
    print(json.dumps(summary[0] if len(seeds) == 1 else summary, indent=2))
    return 0


def _simulability(args: argparse.Namespace) -> int:
    from smat.evaluation.simulability import plot_simulability, simulability_table
    from smat.jobs.grid import run_grid

    student = _build_config(StudentTrainConfig, args)
    seeds = _seeds(args, student.loop.seed)
    output_dir = Path(args.output_dir or Path(args.teacher) / "simulability")
    records = run_grid(args.teacher, sizes=args.sizes, explainers=args.explainers, seeds=seeds,
                       student=student, output_dir=output_dir, progress=not args.no_progress,
                       overwrite=args.overwrite)
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

    config = _build_config(ExplainConfig, args)
    texts = _read_texts(args.texts)
    trained = load(args.model, precision=config.precision)
    explanations = explain_texts(trained, texts, config)
    label_names = trained.info.get("label_names") or ()
    print(json.dumps(write_explanations(explanations, args.output_dir, texts=texts,
                                        label_names=label_names,
                                        word_pieces=args.word_pieces), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from smat.jobs.demo import run_demo

    if len(args.seeds) > 1:
        raise ValueError(f"--seeds is a count now, as in every command: for seeds "
                         f"{' '.join(map(str, args.seeds))} write --seeds {len(args.seeds)} "
                         f"--seed {args.seeds[0]} (consecutive seeds from --seed)")
    args.seeds = args.seeds[0]
    run_demo(args.output_dir, teacher_dir=args.teacher, num_examples=args.size,
             seeds=tuple(_seeds(args, args.seed)), explainers=tuple(args.explainers),
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


def _evaluation_texts(args: argparse.Namespace, explain: ExplainConfig, *,
                      groups: str | None = None) -> list[str] | None:
    """The texts an evaluation command scores, read before any model is loaded: the lines
    of ``--texts``, or the texts of a file of explanations computed elsewhere named among
    the explainers (its explanations are of those texts); None: the held-out split."""
    from smat.store.explanation_file import file_texts, is_explanation_file

    files = [str(e) for e in explain.explainers if is_explanation_file(e)]
    if files and (args.texts or groups):
        raise ValueError(f"{files[0]} explains its own texts, which are the rows evaluated: "
                         "leave out --texts and --groups")
    if files:
        return file_texts(files[0])
    return _read_texts(args.texts) if args.texts else None


def _evaluation_rows(trained: Any, texts: Sequence[str] | None,
                     num_examples: int | None) -> Any:
    """The rows an evaluation command scores: `texts` (:func:`_evaluation_texts`) or,
    without them, the model's held-out test split; the first `num_examples` of either."""
    import numpy as np

    from smat.data import take
    from smat.jobs.reports import held_out_split
    from smat.store.model_store import encode_texts

    if texts is None:
        return held_out_split(trained, num_examples=num_examples)
    data = encode_texts(trained, texts, job="evaluate")
    if num_examples is not None and num_examples < len(data.labels):
        data = take(data, np.arange(num_examples))
    return data


def _faithfulness(args: argparse.Namespace) -> int:
    from smat.jobs.reports import faithfulness_report
    from smat.store.model_store import load

    config = _build_config(FaithfulnessConfig, args)
    texts = _evaluation_texts(args, config.explain)
    trained = load(args.model, precision=config.explain.precision)
    data = _evaluation_rows(trained, texts, config.explain.num_examples)
    report = faithfulness_report(trained, data, config.explain, bins=config.bins,
                                 replacement=config.replacement)
    _write(args.output_dir, "faithfulness", report)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from smat.data import take
    from smat.jobs.agreement_study import agreement_comparison, comparison_tables
    from smat.jobs.reports import agreement_report, held_out_split, load_groups, sample_per_group
    from smat.store.model_store import load
    from smat.store.run_log import write_json_atomic

    config = _build_config(AgreementConfig, args)
    if (args.model is None) == (args.variant is None):
        raise ValueError("give either --model (one model or its seeds) or --variant NAME "
                         "MODEL... two or more times (a comparison of model variants)")
    variants = ({"model": args.model} if args.variant is None
                else {name: paths for name, *paths in args.variant})
    short = [name for name, paths in variants.items() if not paths]
    if short:
        raise ValueError(f"--variant {short[0]} names no model folder; write --variant NAME "
                         "MODEL [MODEL ...]")
    if args.texts and config.groups is not None:
        raise ValueError("--texts and --groups exclude each other: groups label the rows of "
                         "the model's own splits")
    texts = _evaluation_texts(args, config.explain, groups=config.groups)
    models = {name: [load(path, precision=config.explain.precision) for path in paths]
              for name, paths in variants.items()}
    first = next(iter(models.values()))[0]
    groups = None
    if config.groups is None:
        data = _evaluation_rows(first, texts, config.explain.num_examples)
    else:
        split, labels = load_groups(config.groups)
        data = held_out_split(first, split=split)
        if len(labels) != len(data.labels):
            raise ValueError(f"{config.groups} labels {len(labels)} rows but the model's "
                             f"{split} split has {len(data.labels)}")
        rows = sample_per_group(labels, config.per_group)
        data, groups = take(data, rows), labels[rows]
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    if args.variant is not None:
        result = agreement_comparison(models, data, config.explain, metrics=config.metrics,
                                      groups=groups)
        table = comparison_tables(result)
        write_json_atomic(Path(args.output_dir) / "comparison.json", result)
        (Path(args.output_dir) / "comparison.md").write_text(table + "\n")
        print(table)
        return 0
    report = agreement_report(models["model"], data, config.explain, metrics=config.metrics,
                              top_k=config.top_k, plot_dir=args.output_dir, groups=groups)
    _write(args.output_dir, "agreement", report)
    return 0


def _sanity(args: argparse.Namespace) -> int:
    from smat.jobs.sanity import sanity_report, sanity_table
    from smat.store.model_store import load
    from smat.store.run_log import write_json_atomic

    config = _build_config(SanityConfig, args)
    texts = _read_texts(args.texts) if args.texts else None
    trained = load(args.model, precision=config.explain.precision)
    data = _evaluation_rows(trained, texts, config.explain.num_examples)
    output = Path(args.output_dir)
    report = sanity_report(trained, data, config, plot_path=output / f"sanity_{config.mode}.png")
    table = sanity_table(report)
    write_json_atomic(output / "sanity.json", report)
    (output / "sanity.md").write_text(table + "\n")
    print(table)
    return 0


def _attack(args: argparse.Namespace) -> int:
    from smat.jobs.attacks import attack_report, attack_table
    from smat.store.model_store import load
    from smat.store.run_log import write_json_atomic

    config = _build_config(AttackConfig, args)
    texts = _read_texts(args.texts) if args.texts else None
    trained = load(args.model, precision=config.explain.precision)
    data = _evaluation_rows(trained, texts, config.explain.num_examples)
    report = attack_report(trained, data, config)
    table = attack_table(report)
    output = Path(args.output_dir)
    write_json_atomic(output / f"attack_{config.objective}.json", report)
    (output / f"attack_{config.objective}.md").write_text(table + "\n")
    print(table)
    return 0


def _study_score(args: argparse.Namespace) -> int:
    from smat.evaluation.human_study import plot_accuracy
    from smat.jobs.study import score_files, score_voted_file, study_tables
    from smat.store.run_log import write_json_atomic

    if (args.answers is None) == (args.voted is None):
        raise ValueError("give either --answers (per-annotator) or --voted (a majority-voted "
                         "table), with --tasks for --answers")
    if args.voted is not None:
        report = score_voted_file(args.voted, columns=args.voted_columns,
                                  sample_from=args.sample_from, delimiter=args.delimiter)
    else:
        if args.tasks is None:
            raise ValueError("--answers needs --tasks (the study's tasks.jsonl)")
        report = score_files(args.tasks, args.answers, lenient=args.lenient,
                             columns=(args.worker_column, args.task_column,
                                      args.answer_column),
                             min_seconds=args.min_seconds,
                             drop_all_dont_know=not args.keep_all_dont_know,
                             delimiter=args.delimiter)
    if args.compare is not None:
        from smat.evaluation.human_study import score_rank_correlation

        other = json.loads(Path(args.compare).read_text())
        report["spearman_with_compared"] = score_rank_correlation(report["score"],
                                                                  other["score"])
    table = study_tables(report)
    plot_accuracy(report, Path(args.output_dir) / "accuracy.png")
    write_json_atomic(Path(args.output_dir) / "study.json", report)
    (Path(args.output_dir) / "study.md").write_text(table + "\n")
    print(table)
    return 0


def _study_build(args: argparse.Namespace) -> int:
    from smat.jobs.study import StudyConfig, build_study, write_study
    from smat.store.model_store import load

    config = _build_config(StudyConfig, args)
    study = build_study(load(args.model, precision=config.explain.precision), config)
    write_study(study, args.output_dir)
    print(json.dumps({k: study["manifest"][k] for k in ("num_tasks", "num_annotators",
                                                        "words_cut_by_max_len")}))
    return 0


def _study_read(args: argparse.Namespace) -> int:
    from smat.jobs.study import machine_answers, read_tasks
    from smat.store.model_store import load

    answers = machine_answers(load(args.model), read_tasks(args.tasks), name=args.name,
                              hidden=args.hidden)
    output = (Path(args.output) if getattr(args, "output", None)
              else Path(args.output_dir) / f"{args.name}.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("".join(json.dumps(a) + "\n" for a in answers))
    print(f"{len(answers)} answers by {args.name} -> {output}")
    return 0


def _add_study_command(subparsers: Any) -> argparse.ArgumentParser:
    """``smat study build|read|score``: Lu et al.'s human simulability studies."""
    from smat.jobs.study import SAMPLE_RULES, StudyConfig

    study = subparsers.add_parser("study", help="human simulability studies (Lu et al.)")
    actions = study.add_subparsers(dest="action", required=True)
    build = actions.add_parser("build", help="tasks (top-k words of each method) and work "
                                             "packages from a model's held-out split")
    build.add_argument("--model", required=True, help="a `smat train-teacher` model folder")
    _add_dataclass_flags(build, StudyConfig, skip=("num_examples",))  # rows: --num-samples
    build.add_argument("--output-dir", default="runs/study",
                       help="tasks.jsonl, tasks.csv, packages.csv, manifest.json go here")
    build.set_defaults(run=_study_build)
    _add_runtime_flags(build)
    read = actions.add_parser("read", help="a model answers the tasks (a machine reader)")
    read.add_argument("--model", required=True, help="the reading model's folder")
    read.add_argument("--tasks", required=True, help="tasks.jsonl of `smat study build`")
    read.add_argument("--name", default="model", help="the reader's worker id")
    read.add_argument("--hidden", default="mask", choices=("mask", "drop"),
                      help="hidden words become the mask token, or are left out")
    read.add_argument("--output-dir", default="runs/study",
                      help="the answers go to OUTPUT_DIR/NAME.jsonl, one line per task "
                           "(default: runs/study)")
    _add_renamed_flag(read, "--output", "--output-dir (a folder; the file is NAME.jsonl)",
                      dest="output")
    read.set_defaults(run=_study_read)
    _add_runtime_flags(read)
    score = actions.add_parser("score", help="majority vote, accuracy per k, difficulty-"
                                             "weighted scores, Flips and Aids")
    score.add_argument("--tasks", default=None, help="the study's tasks (JSON lines)")
    score.add_argument("--answers", default=None,
                       help="per-annotator answers (.csv, .tsv or .jsonl)")
    score.add_argument("--voted", default=None,
                       help="instead of --tasks / --answers: a majority-voted table, one "
                            "row per sample, method and k with a 0/1 correct column")
    score.add_argument("--voted-columns", nargs=4, default=["sample", "method", "k", "correct"],
                       metavar=("SAMPLE", "METHOD", "K", "CORRECT"),
                       help="its column names (default: sample method k correct); rows "
                            "whose K is 'All' are full-text rows, not scored. Lu et al.'s "
                            "released votes: Text Saliency Words Correct --sample-from block")
    score.add_argument("--sample-from", choices=SAMPLE_RULES, default="column",
                       help="a voted row's sample: 'column' its SAMPLE cell (default); "
                            "'block' a new sample at each full-text row; 'text' the SAMPLE "
                            "(text) cell of the full-text row above it")
    score.add_argument("--delimiter", default=None,
                       help="the CSV / TSV delimiter, one character or 'tab' (default: "
                            "sniffed from the file's first lines)")
    score.add_argument("--min-seconds", type=float, default=None,
                       help="drop workers whose median time per task is below this")
    score.add_argument("--keep-all-dont-know", action="store_true",
                       help="keep workers who answered only \"I don't know\" (default: drop)")
    score.add_argument("--worker-column", default="worker",
                       help="the --answers column naming the annotator (default: worker)")
    score.add_argument("--task-column", default="task_id",
                       help="the --answers column naming the task, as in --tasks (default: "
                            "task_id)")
    score.add_argument("--answer-column", default="answer",
                       help="the --answers column holding the chosen label (default: answer)")
    score.add_argument("--lenient", action="store_true",
                       help="drop answers that do not fit the tasks with a warning "
                            "(default: an error that counts them)")
    score.add_argument("--compare", default=None,
                       help="another scored study.json (e.g. a machine reader's): report "
                            "the Spearman rho between the two studies' method scores")
    score.add_argument("--output-dir", default="runs/study",
                       help="where study.json and study.md go (default: runs/study)")
    score.set_defaults(run=_study_score)
    return study


def _plausibility(args: argparse.Namespace) -> int:
    from smat.data import load_eraser
    from smat.jobs.reports import plausibility_report
    from smat.store.model_store import load

    config = _build_config(PlausibilityConfig, args)
    trained = load(args.model, precision=config.explain.precision)
    # Plausibility explains the model's predictions: the data set's gold labels are not used.
    rationales = load_eraser(config.data_dir, split=config.split)
    if config.explain.num_examples is not None:
        rationales = rationales.select(
            range(min(config.explain.num_examples, len(rationales))))
    report = plausibility_report(trained, rationales, config.explain, max_len=config.max_len,
                                 top_k=config.top_k)
    _write(args.output_dir, "plausibility", report)
    return 0


def _model_command(subparsers: Any, name: str, *, help: str, config: type, run: Any,
                   model_help: str = "a `smat train-teacher` model folder",
                   texts: bool = False) -> argparse.ArgumentParser:
    """A sub-command over one model folder: --model, the config's flags, --output-dir, and
    with `texts` the --texts option of the evaluations."""
    parser = subparsers.add_parser(name, help=help)
    parser.add_argument("--model", required=True, help=model_help)
    if texts:
        _add_texts_flag(parser)
    _add_dataclass_flags(parser, config)
    parser.add_argument("--output-dir", default=f"runs/{name}",
                        help=f"where the results are written (default: runs/{name})")
    parser.set_defaults(run=run)
    return parser


def _add_texts_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--texts", default=None, metavar="FILE",
                        help="evaluate on your own texts, one per line (as `smat explain` "
                             "reads them), instead of the model's held-out test split")


def _add_evaluation_commands(subparsers: Any) -> list[argparse.ArgumentParser]:
    """The faithfulness, agreement, sanity, attack and plausibility sub-commands.

    All but plausibility run on the model's held-out test split (rebuilt from the data
    settings saved with it; agreement by group on the grouping's split) or on a user's
    ``--texts`` file; each writes its JSON and markdown to ``--output-dir`` and prints the
    table. None of them reads gold labels: explanations explain the predicted class.
    """
    faith = _model_command(
        subparsers, "faithfulness", config=FaithfulnessConfig, run=_faithfulness, texts=True,
        help="comprehensiveness / sufficiency of explainers (ERASER AOPC)")

    agree = subparsers.add_parser("agreement",
                                  help="pairwise agreement between explainers (Jukić et al.)")
    agree.add_argument("--model", nargs="+", default=None,
                       help="one or more model folders (seeds), sharing a tokenizer")
    agree.add_argument("--variant", nargs="+", action="append", default=None,
                       metavar=("NAME", "MODEL"),
                       help="instead of --model, two or more times: a model variant and its "
                            "seeds' model folders; compares mean agreement over explainer "
                            "pairs between variants (Jukić et al. Tables 2 and 4)")
    _add_texts_flag(agree)
    _add_dataclass_flags(agree, AgreementConfig)
    agree.add_argument("--output-dir", default="runs/agreement",
                       help="where the results are written (default: runs/agreement)")
    agree.set_defaults(run=_agreement)

    sanity = _model_command(
        subparsers, "sanity", config=SanityConfig, run=_sanity, texts=True,
        help="model-randomization sanity checks of explainers (cascading / independent "
             "block re-initialisation)")
    attack = _model_command(
        subparsers, "attack", config=AttackConfig, run=_attack, texts=True,
        help="adversarial attacks on explanations (top-k attack, unconstrained or the "
             "thesis's constrained objective)")
    plaus = _model_command(
        subparsers, "plausibility", config=PlausibilityConfig, run=_plausibility,
        help="agreement with human rationales (ERASER format)",
        model_help="a trained-model folder")
    return [faith, agree, sanity, attack, plaus]


# ------------------------------------------------------------------ roar


def _add_roar_command(subparsers: Any) -> argparse.ArgumentParser:
    """The ``roar`` sub-command over :func:`smat.jobs.roar.run_roar`. Every cell retrains
    from scratch, so the compilation cache (on by default) saves most compile time."""
    from smat.jobs.roar import PRESETS, RoarConfig

    parser = subparsers.add_parser(
        "roar", help="ROAR / Recursive ROAR faithfulness (Madsen et al., 2022)")
    _add_dataclass_flags(parser, RoarConfig, skip=("seeds",))
    _add_seeds_flag(parser, default=len(RoarConfig().seeds))
    parser.add_argument("--preset", default="small", choices=sorted(PRESETS),
                        help="model and training recipe; the training flags below "
                             "change single settings of it")
    parser.add_argument("--encoder", default=None,
                        help="the pretrained encoder: a folder or Hub id (default: the "
                             "preset's)")
    _add_renamed_flag(parser, "--model", "--encoder", dest="encoder")
    _add_dataclass_flags(parser, DataConfig, skip=("teacher_fraction",
                                                   "student_validation_size",
                                                   "student_test_size"))
    _add_dataclass_flags(parser, TeacherTrainConfig, relative=True)
    parser.add_argument("--output-dir", default="runs/roar",
                        help="where the results are written (default: runs/roar)")
    parser.set_defaults(run=_roar_command)
    return parser


def roar_configs(args: argparse.Namespace) -> tuple[DataConfig, Any, TeacherTrainConfig]:
    """The data, ROAR and training configs of parsed ``smat roar`` flags: training is the
    preset's with the given flags changed; seeds are SEED..SEED+N-1."""
    from smat.jobs.roar import PRESETS, RoarConfig

    train = _build_config(TeacherTrainConfig, args, base=PRESETS[args.preset].train)
    data = _build_config(DataConfig, args)
    roar = _build_config(RoarConfig, args, seeds=tuple(_seeds(args, train.loop.seed)),
                         **({"metric": "pearson"} if data.task == "regression" else {}))
    return data, roar, train


def _roar_command(args: argparse.Namespace) -> int:
    from smat.jobs.roar import roar_markdown_table, run_roar

    data, roar, train = roar_configs(args)
    report = run_roar(data=data, roar=roar, preset=args.preset, train=train,
                      model_source=args.encoder, output_dir=args.output_dir,
                      progress=not args.no_progress)
    print(f"{report['mode']} ({report['metric']}, mean over {len(report['seeds'])} seeds)")
    print(roar_markdown_table(report))
    return 0


# ------------------------------------------------------------------ the parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `smat` command (one sub-command per job)."""
    parser = argparse.ArgumentParser(prog="smat", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version",
                        version=f"smat {importlib.metadata.version('smat')}")
    commands = parser.add_subparsers(dest="command", required=True)

    teacher = commands.add_parser("train-teacher", help="fine-tune a teacher on gold labels")
    _add_dataclass_flags(teacher, DataConfig)
    _add_dataclass_flags(teacher, TeacherTrainConfig)
    teacher.add_argument("--encoder", default=None,
                         help="the pretrained encoder: a folder or Hub id (default: the offline "
                              "all-MiniLM-L6-v2)")
    _add_renamed_flag(teacher, "--model", "--encoder", dest="encoder")
    teacher.add_argument("--pooling", default="scalar_mix", choices=["scalar_mix", "cls", "mean"],
                         help="how the encoder's states become one vector (default: "
                              "scalar_mix, the paper's)")
    teacher.add_argument("--output-dir", default="runs/teacher",
                         help="where the results are written (default: runs/teacher)")
    _add_seeds_flag(teacher)
    _add_config_flag(teacher)
    _add_overwrite_flag(teacher)
    _add_runtime_flags(teacher)
    teacher.set_defaults(run=_train_teacher)

    student = commands.add_parser("train-student",
                                  help="train a student to simulate a teacher (SMaT)")
    student.add_argument("--teacher", default=None,
                         help="a `smat train-teacher` run folder (required)")
    student.add_argument("--explainers", dest="explainer", default=None,
                         choices=STUDENT_SETTINGS,
                         help="the student setting (one): what the student learns from besides "
                              "the teacher's predictions (required)")
    _add_renamed_flag(student, "--explainer", "--explainers", dest="explainer",
                      choices=STUDENT_SETTINGS)
    student.add_argument("--size", type=int, default=None,
                         help="student training examples, a prefix of the student pool "
                              "(required)")
    _add_renamed_flag(student, "--num-examples", "--size", dest="size", type=int)
    student.add_argument("--output-dir", default=None,
                         help="(default: TEACHER/students/n{SIZE}/{explainer}/seed{S}; with "
                              "--output-dir, several seeds go to OUTPUT_DIR/seed{S})")
    _add_seeds_flag(student)
    _add_config_flag(student)
    _add_overwrite_flag(student)
    _add_dataclass_flags(student, StudentTrainConfig, skip=("explainer",))
    _add_runtime_flags(student)
    student.set_defaults(run=_train_student)

    grid = commands.add_parser("simulability",
                               help="simulability grid over sizes x explainers x seeds")
    grid.add_argument("--teacher", required=True, help="a `smat train-teacher` run folder")
    grid.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000],
                      help="student training sizes (default: 500 1000 2000)")
    _add_seeds_flag(grid, default=5)
    grid.add_argument("--explainers", nargs="+", default=["none", "attention_all", "smat"],
                      choices=STUDENT_SETTINGS,
                      help="student settings (default: none attention_all smat)")
    grid.add_argument("--output-dir", default=None, help="(default: TEACHER/simulability)")
    _add_overwrite_flag(grid)
    _add_dataclass_flags(grid, StudentTrainConfig, skip=("explainer",))
    _add_runtime_flags(grid)
    grid.set_defaults(run=_simulability)

    explain = commands.add_parser("explain", help="explain predictions; JSON + HTML page")
    explain.add_argument("--model", required=True, help="a trained-model folder")
    _add_dataclass_flags(explain, ExplainConfig, skip=("num_examples",))
    explain.add_argument("--output-dir", default="runs/explain",
                         help="where the results are written (default: runs/explain)")
    explain.add_argument("--word-pieces", action="store_true",
                         help="show the tokenizer's word pieces on the HTML page (default: "
                              "whole words, their pieces' scores summed)")
    explain.add_argument("texts", help="text file, one example per line (blank lines are "
                                        "skipped, with a warning)")
    _add_runtime_flags(explain)
    explain.set_defaults(run=_explain)

    demo = commands.add_parser("demo", help="the main job end to end on the offline defaults")
    demo.add_argument("--output-dir", default="runs/demo",
                      help="where the results are written (default: runs/demo)")
    demo.add_argument("--teacher", default=None,
                      help="reuse this teacher run folder (default: OUTPUT_DIR/teacher)")
    demo.add_argument("--size", type=int, default=DEMO_SIZE,
                      help=f"student training examples (default: {DEMO_SIZE})")
    _add_renamed_flag(demo, "--num-examples", "--size", dest="size", type=int)
    demo.add_argument("--seeds", type=int, nargs="+", default=[len(DEMO_SEEDS)], metavar="N",
                      help=f"run N student seeds, SEED..SEED+N-1 (default: {len(DEMO_SEEDS)})")
    demo.add_argument("--seed", type=int, default=DEMO_SEEDS[0],
                      help=f"the first student seed (default: {DEMO_SEEDS[0]})")
    demo.add_argument("--explainers", nargs="+", default=list(DEMO_EXPLAINERS),
                      choices=STUDENT_SETTINGS, help="student settings, 'none' first (default: "
                                             f"{' '.join(DEMO_EXPLAINERS)})")
    _add_runtime_flags(demo)
    demo.set_defaults(run=_demo)

    _add_runtime_flags(_add_roar_command(commands))
    for evaluation in _add_evaluation_commands(commands):
        _add_runtime_flags(evaluation)
    _add_study_command(commands)

    predict = commands.add_parser("predict", help="predict a file of texts (one per line)")
    predict.add_argument("--model", required=True, help="a trained-model folder")
    predict.add_argument("--batch-size", type=int, default=64,
                         help="rows per model call (default: 64)")
    predict.add_argument("texts", help="text file, one example per line (blank lines are "
                                        "skipped, with a warning)")
    _add_runtime_flags(predict)
    predict.set_defaults(run=_predict)
    return parser


INTERRUPTED = 130  # the shell's code for a command stopped by Ctrl-C


def _interrupt(signum, frame) -> None:
    """Ctrl-C: raise KeyboardInterrupt now, and tell the training loop to raise it at its
    next step in case Python drops this one (smat.training.loop.STOP)."""
    STOP.set()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `smat` console script."""
    parser = build_parser()
    argv = list(argv if argv is not None else sys.argv[1:])
    command = _subcommand(parser, argv)
    try:
        _replay_config_file(parser, argv)
    except ValueError as error:
        print(f"{command.prog}: error: {error}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    args.flags = set(command._option_string_actions)
    output_dir = getattr(args, "output_dir", None)
    if output_dir is not None and Path(output_dir).exists() and not Path(output_dir).is_dir():
        # checked before any work: the results would be computed and then lost
        print(f"smat {args.command}: error: --output-dir {output_dir} is a file, not a "
              "folder; choose a folder", file=sys.stderr)
        return 2
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous_handler = signal.signal(signal.SIGINT, _interrupt) if in_main_thread else None
    try:
        # The mesh first: multi-host start must precede anything that touches a backend,
        # and the cache is keyed by the backend's machine.
        flag = getattr(args, "compile_cache", None)
        asked = flag is not None or os.environ.get(COMPILE_CACHE_ENV) is not None
        with _device_mesh(args), progress_bars(not getattr(args, "no_progress", False)), \
                persistent_compile_cache(compile_cache_dir(flag), asked=asked):
            return args.run(args)
    except (ValueError, FileNotFoundError, TypeError) as error:
        print(f"smat {args.command}: error: {_in_flags(str(error), args.flags)}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # on a line of its own, after any progress bar the interrupt stopped mid-line
        print(f"\nsmat {args.command}: interrupted; finished work is kept, and the same command "
              "resumes from the last checkpoint", file=sys.stderr)
        return INTERRUPTED
    finally:
        STOP.clear()
        if in_main_thread:
            signal.signal(signal.SIGINT, previous_handler)


def _subcommand(parser: argparse.ArgumentParser,
                argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the (sub-)command that `argv` runs."""
    words = [word for word in argv if not word.startswith("-")]
    while True:
        commands = next((a for a in parser._actions
                         if isinstance(a, argparse._SubParsersAction)), None)
        chosen = next((w for w in words if commands and w in commands.choices), None)
        if chosen is None:
            return parser
        parser, words = commands.choices[chosen], words[words.index(chosen) + 1:]


# What a run's config.json records -> the flags' destinations (a nested config's fields
# are "Class.field", its nested ones "Class.loop.field"); fingerprints are not settings.
_RECORDED = {
    "train-teacher": {"data": "DataConfig", "train": "TeacherTrainConfig",
                      "model_source": "encoder", "pooling": "pooling"},
    "train-student": {"student": "StudentTrainConfig", "num_examples": "size",
                      "teacher_dir": "teacher"},
}
_NOT_SETTINGS = {"data_fingerprint", "teacher"}


def _recorded_defaults(command: str, recorded: dict[str, Any], path: str) -> dict[str, Any]:
    """The flag values a run's `config.json` records, by destination."""

    def flatten(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in values.items():
            out.update(flatten(f"{prefix}.{key}", value) if isinstance(value, dict)
                       else {f"{prefix}.{key}": value})
        return out

    table, defaults = _RECORDED[command], {}
    for key, value in recorded.items():
        if key in _NOT_SETTINGS:
            continue
        if key not in table:
            raise ValueError(f"--config {path} records {key!r}, which `smat {command}` has "
                             "no flag for: is it the config.json of another command's run?")
        defaults.update(flatten(table[key], value) if isinstance(value, dict)
                        else {table[key]: value})
    if command == "train-student":  # the setting has its own flag, --explainers
        defaults["explainer"] = defaults.pop("StudentTrainConfig.explainer")
    return defaults


def _replay_config_file(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """With ``--config FILE``: the settings FILE records become the command's defaults, so
    the flags given beside it override them (and nothing else changes)."""
    given = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--config=")] + [
        argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--config"]
    if not given:
        return
    path = given[-1]
    command = _subcommand(parser, argv)
    name = command.prog.split()[-1]
    try:
        recorded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"--config {path} cannot be read as JSON: {error}") from None
    defaults = _recorded_defaults(name, recorded, path)
    known = {action.dest for action in command._actions}
    unknown = sorted(set(defaults) - known)
    if unknown:
        raise ValueError(f"--config {path} records settings this version has no flag for: "
                         f"{unknown}")
    command.set_defaults(**defaults)


def _add_config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="replay the settings of a run (its config.json); flags given "
                             "beside it override them")


def _in_flags(message: str, flags: set[str]) -> str:
    """An error message with each config field it names (``ExplainConfig.batch_size``)
    written as the command's flag (``--batch-size``) where the command has that flag."""

    def flag(match: re.Match) -> str:
        name = "--" + match.group(1).replace("_", "-")
        return name if name in flags else match.group(0)

    return re.sub(r"\b[A-Z]\w*Config\.(\w+)", flag, message)


def console_main() -> None:
    """The `smat` console script: :func:`main`, leaving at once after an interrupt (tearing
    down the XLA and checkpoint threads that Ctrl-C stopped mid-work can crash the process
    on its way out, after everything that was finished is already on disk)."""
    code = main()
    if code == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    console_main()
