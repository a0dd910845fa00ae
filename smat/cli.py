"""The `smat` command line: a thin parser over the typed configs of smat.pipeline.

    smat train-teacher [--source movie-snippets] [--output-dir runs/teacher] ...
    smat predict --model runs/teacher/model texts.txt
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from smat.pipeline import DataConfig, run_teacher
from smat.train import TeacherTrainConfig


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, *,
                         skip: Sequence[str] = ()) -> None:
    """One `--flag` per field of a config dataclass, typed and defaulted from the field."""
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        kind = type(default) if default is not None else str
        parser.add_argument(flag, dest=f"{cls.__name__}.{field.name}", type=kind,
                            default=default, help=f"(default: {default})")


def _build_config(cls: type, args: argparse.Namespace, **overrides):
    values = {f.name: getattr(args, f"{cls.__name__}.{f.name}")
              for f in dataclasses.fields(cls) if hasattr(args, f"{cls.__name__}.{f.name}")}
    return cls(**{**values, **overrides})


def _train_teacher(args: argparse.Namespace) -> int:
    data = _build_config(DataConfig, args)
    train = _build_config(TeacherTrainConfig, args)
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
    teacher.add_argument("--no-progress", action="store_true")
    teacher.set_defaults(run=_train_teacher)

    predict = commands.add_parser("predict", help="predict a file of texts (one per line)")
    predict.add_argument("--model", required=True, help="a trained-model folder")
    predict.add_argument("--batch-size", type=int, default=64)
    predict.add_argument("texts", help="text file, one example per line")
    predict.set_defaults(run=_predict)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `smat` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, TypeError) as error:
        print(f"smat {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
