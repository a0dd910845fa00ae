"""The ``smat faithfulness``, ``smat agreement`` and ``smat plausibility`` sub-commands.

    smat faithfulness --model runs/teacher/model --explainers gradient input_x_gradient \\
        integrated_gradients attention_all attention_last random
    smat agreement --model runs/teacher/model [more seeds' models] --explainers ...
    smat plausibility --model runs/teacher/model --data-dir ERASER/movies --max-len 512 \\
        --explainers gradient input_x_gradient attention_all

Thin parsers over :mod:`smat.evaluation.explainer_eval`. Faithfulness and agreement run on
the model's held-out test split (rebuilt from the data settings saved with it); each command
writes ``{command}.json`` and ``{command}.md`` to ``--output-dir`` and prints the table.
Register them in ``smat.cli.build_parser`` with ``build_evaluation_parsers(commands)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from smat.evaluation.agreement import AGREEMENT_METRICS
from smat.evaluation.faithfulness import DEFAULT_BINS

__all__ = ["build_evaluation_parsers"]

EXPLAINERS_HELP = ("static names (gradient, input_x_gradient, integrated_gradients, "
                   "attention_all, attention_last, attention_rollout, random) or saved "
                   "learned-explainer folders")


def _write(output_dir: str, kind: str, report: dict[str, Any]) -> None:
    from smat.evaluation.explainer_eval import markdown_table
    from smat.run_log import write_json_atomic

    table = markdown_table(kind, report)
    write_json_atomic(Path(output_dir) / f"{kind}.json", report)
    (Path(output_dir) / f"{kind}.md").write_text(table + "\n")
    print(table)


def _faithfulness(args: argparse.Namespace) -> int:
    from smat.evaluation.explainer_eval import faithfulness_report, held_out_split
    from smat.model_store import load

    trained = load(args.model)
    data = held_out_split(trained, num_examples=args.num_examples)
    report = faithfulness_report(trained, data, args.explainers,
                                 bins=[b / 100 for b in args.bins], replacement=args.replacement,
                                 ig_steps=args.ig_steps, batch_size=args.batch_size)
    _write(args.output_dir, "faithfulness", report)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from smat.evaluation.explainer_eval import agreement_report, held_out_split
    from smat.model_store import load

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
    from smat.evaluation.explainer_eval import plausibility_report
    from smat.model_store import load

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
    parser.add_argument("--explainers", nargs="+", required=True, help=EXPLAINERS_HELP)
    parser.add_argument("--num-examples", type=int, default=None,
                        help="evaluate the first N examples (default: all)")
    parser.add_argument("--ig-steps", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=batch_size)


def build_evaluation_parsers(subparsers: Any) -> list[argparse.ArgumentParser]:
    """Add the three evaluation sub-commands to the ``smat`` parser; returns them."""
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
