"""Table 6 of the SMaT paper: plausibility of the QE teacher's explanations on MLQE-PE.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
**Table 6**: word-level ROC-AUC of each explainer against MLQE-PE's word tags (BAD = a word
the post-editor changed), on the source side and on the translation side, per language
pair and overall, computed only on the translations that contain errors (the Explainable
QE shared task's protocol, Fomicheva et al., 2021): the static explainers, the SMaT
explainer of the median student at the middle size of Table 5, and two oracles that pick
with the human tags (the best layer's head mean, the best single head).

The teacher and the learned explainer come from a finished ``smat_table5_mlqe.py`` run;
the rows are the test20 pairs of that run's language pairs (which neither the teacher nor
the students trained on); IG uses 10 steps as in the paper's appendix.

    python experiments/smat_table6_mlqe_plausibility.py --table5 runs/smat_table5_mlqe_cpu \\
        --data-dir data/mlqe_pe --output-dir runs/smat_table6_mlqe_cpu

``--data-dir`` is the MLQE-PE folder the Table 5 run read; without it, en-de from the
Hugging Face Hub (converted once into the data cache, ``docs/datasets.md``). The Hub's
word tags stop at dev (its test split is WMT20's blind test set), so without a folder
holding test20's tags the run stops with an error naming ``--data-dir`` (the GitHub
release).

``--num-examples N`` scores the first N translations with errors of each pair (default:
all). Writes ``table.md`` and ``results.json`` (each side's plausibility report and
oracle per pair).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.cli.experiment import command_runtime, data_dir_or_hub, earlier_run_file
from smat.data.mlqe import load_mlqe
from smat.jobs.explain import ExplainConfig
from smat.jobs.plausibility import head_plausibility, plausibility_report
from smat.jobs.simulability_report import median_record
from smat.store import model_store
from smat.store.run_log import write_json_atomic

STATIC = ("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
          "attention_last")
IG_STEPS = 10  # the paper's appendix
SIDES = {"src": 0, "tgt": 1}  # text segment of each side

# Table 6 of the paper (XLM-R-base, AUC), overall over six pairs: (source, target).
PAPER_TABLE6_OVERALL = {"gradient": (0.67, 0.59), "input_x_gradient": (0.61, 0.54),
                        "integrated_gradients": (0.62, 0.53), "attention_all": (0.62, 0.59),
                        "attention_last": (0.54, 0.50), "smat": (0.66, 0.60),
                        "best layer*": (0.65, 0.65), "best head*": (0.67, 0.66)}


def with_errors(data_dir: str | Path, pair: str, num_examples: int | None):
    """The test20 pairs of `pair` whose translation holds at least one BAD word (the first
    `num_examples` of them)."""
    rationales = load_mlqe(data_dir, language_pairs=pair, split="test")
    rows = [i for i, mask in enumerate(rationales.pair_word_masks) if mask.any()]
    return rationales.select(rows[:num_examples])


def side_aucs(trained: model_store.TrainedModel, rationales: Any, explain: ExplainConfig,
              learned: str, *, batch_size: int) -> dict[str, Any]:
    """Per side: every explainer's and both oracles' mean ROC-AUC, and the reports."""
    out: dict[str, Any] = {}
    for side, segment in SIDES.items():
        report = plausibility_report(trained, rationales, explain, segment=segment)
        oracle = head_plausibility(trained, rationales, batch_size=batch_size,
                                   segment=segment)
        auc = {("smat" if name == learned else name): row["roc_auc"]
               for name, row in report["explainers"].items()}
        auc["best layer*"] = oracle["best_layer_auc"]
        auc["best head*"] = oracle["best_head_auc"]
        out[side] = {"auc": auc, "report": report, "oracle": oracle}
    return out


def run(table5_dir: str | Path, data_dir: str | Path, *, output_dir: str | Path,
        num_examples: int | None = None, batch_size: int = 16) -> dict[str, Any]:
    """Score every explainer and the two oracles per pair and side; write the table."""
    table5_dir, output_dir = Path(table5_dir), Path(output_dir)
    config = earlier_run_file(table5_dir, "config.json", flag="--table5")
    results = earlier_run_file(table5_dir, "results.json", flag="--table5")
    sizes = config["sizes"]
    middle = sizes[len(sizes) // 2]
    median = median_record(results["records"], explainer="smat", num_examples=middle,
                           metric="pearson")
    learned = str(table5_dir / "students" / f"n{middle}" / "smat" / f"seed{median['seed']}"
                  / "explainer")
    trained = model_store.load(table5_dir / "teacher" / "model")
    explain = ExplainConfig(explainers=(*STATIC, learned), ig_steps=IG_STEPS,
                            batch_size=batch_size)
    start = time.perf_counter()
    per_pair = {}
    for pair in config["pairs"]:
        rationales = with_errors(data_dir, pair, num_examples)
        per_pair[pair] = {"num_examples": len(rationales),
                          **side_aucs(trained, rationales, explain, learned,
                                      batch_size=batch_size)}
    names = list(per_pair[config["pairs"][0]]["src"]["auc"])
    header = [f"{pair} {side}" for pair in config["pairs"] for side in SIDES]
    lines = ["| explainer | " + " | ".join(header) + " | paper overall src / tgt |",
             "|---|" + "---|" * (len(header) + 1)]
    for name in names:
        cells = [f"{per_pair[pair][side]['auc'][name]:.3f}" for pair in config["pairs"]
                 for side in SIDES]
        paper = PAPER_TABLE6_OVERALL[name]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {paper[0]:.2f} / {paper[1]:.2f} |")
    table = "\n".join(lines)
    counts = ", ".join(f"{pair}: {per_pair[pair]['num_examples']}" for pair in config["pairs"])
    (output_dir / "table.md").parent.mkdir(parents=True, exist_ok=True)
    (output_dir / "table.md").write_text(
        f"MLQE-PE test20 translations with at least one BAD word ({counts}); word-level "
        f"ROC-AUC with BAD words as positives; SMaT explainer of the median Table 5 student "
        f"at n={middle} (seed {median['seed']}); * = picks with the human tags.\n\n"
        f"{table}\n")
    summary = {"table": table, "per_pair": per_pair, "learned_explainer": learned,
               "seconds": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table5", required=True,
                        help="a finished smat_table5_mlqe.py output folder")
    parser.add_argument("--data-dir", default=None,
                        help="the MLQE-PE folder (direct-assessments/ and post-editing/); "
                             "without it, en-de from the Hugging Face Hub, converted once "
                             "into the data cache")
    parser.add_argument("--output-dir", default="runs/smat_table6_mlqe")
    parser.add_argument("--num-examples", type=int, default=None,
                        help="score the first N translations with errors of each pair")
    parser.add_argument("--batch-size", type=int, default=16, help="rows per jitted call")
    args = parser.parse_args(argv)
    if args.num_examples is not None and args.num_examples < 1:
        parser.error(f"--num-examples must be >= 1, got {args.num_examples}")
    with command_runtime(parser, driver=__file__, resumes=False):
        summary = run(args.table5, data_dir_or_hub(args.data_dir, "mlqe_pe"),
                      output_dir=args.output_dir,
                      num_examples=args.num_examples, batch_size=args.batch_size)
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds']} s")


if __name__ == "__main__":
    main()
