"""The ``smat roar`` sub-command: a thin parser over :func:`smat.evaluation.roar_job.run_roar`.

    smat roar [--recursive] --explainers attention gradient input_x_gradient \\
        --ratios 0:100:20 --seeds 3 --preset small --num-examples 1500 --output-dir runs/roar

Register it in ``smat.cli.build_parser`` with ``build_roar_parser(commands)``. Every cell
retrains from scratch, so set ``JAX_COMPILATION_CACHE_DIR`` to reuse compiled steps.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

from smat.evaluation.roar import check_ratios
from smat.evaluation.roar_job import EXPLAINERS, PRESETS, RoarConfig, run_roar
from smat.pipeline import DataConfig
from smat.train import TeacherTrainConfig

__all__ = ["build_roar_parser", "format_table", "parse_ratios"]


def format_table(report: dict[str, Any]) -> str:
    """Markdown table of a ``roar.json`` report: curve means per ratio and Eq. 3 [95% CI]."""
    ratios = report["ratios"]
    header = ("| explainer | " + " | ".join(f"{100 * r:g}%" for r in ratios)
              + " | faithfulness (Eq. 3) [95% CI] |")
    lines = [header, "|" + "---|" * (len(ratios) + 2)]
    rows = [("random", report["random"], None), *((e, v, report["summary"][e])
                                                   for e, v in report["curves"].items())]
    for name, values, summary in rows:
        means = np.mean(np.asarray(values), axis=0)
        eq3 = "—" if summary is None else (
            "undefined" if summary["num_defined"] == 0 else
            f"{100 * summary['mean']:.1f} [{100 * summary['low']:.1f}, "
            f"{100 * summary['high']:.1f}]" + (f" ({summary['num_undefined']} undefined)"
                                               if summary["num_undefined"] else ""))
        lines.append(f"| {name} | " + " | ".join(f"{100 * m:.1f}" for m in means)
                     + f" | {eq3} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ command line


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


def build_roar_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``roar`` sub-command to the ``smat`` parser's subparsers; returns it.

    It sets ``run`` to a function of the parsed arguments returning an exit code, like the
    other sub-commands of :mod:`smat.cli`.
    """
    parser = subparsers.add_parser(
        "roar", help="ROAR / Recursive ROAR faithfulness (Madsen et al., 2022)")
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
    print(format_table(report))
    return 0

