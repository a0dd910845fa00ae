"""Table 2 of the SMaT paper: plausibility of the teacher's explanations on ERASER movies.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
**Table 2**: word-level ROC-AUC against the human rationales of ERASER Movie Reviews
(DeYoung et al, 2020) of the static explainers (Gradient L2, Gradient x Input, Integrated
Gradients, attention over all layers and over the last layer), of the SMaT explainer
learned by the median student trained on the middle size of Table 1, and of two oracles
that pick with the human labels: the best layer (its head mean) and the best single head.

The teacher and the learned explainer come from a finished ``smat_table1.py`` run; IG uses
10 steps as in the paper's appendix; reviews are read up to ``--max-len`` tokens (512, the
encoder's limit; rationale words beyond it are counted and not scored).

    python experiments/smat_table2_plausibility.py --table1 runs/smat_table1_cpu \\
        --data-dir data/eraser_movies --output-dir runs/smat_table2_cpu

Writes ``table.md``, ``results.json`` (the plausibility report and the per-head / per-layer
AUCs) and ``head_auc.png`` (the per-head oracle as a layer x head heatmap). Measured
runtime: docs/reproduce/smat.md.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from smat.cli.experiment import command_runtime, data_dir_or_hub, earlier_run_file
from smat.data import load_eraser
from smat.jobs.explain import ExplainConfig
from smat.jobs.plausibility import head_plausibility, plausibility_report
from smat.jobs.simulability_report import median_record
from smat.store import model_store
from smat.store.render import plot_head_weights
from smat.store.run_log import write_json_atomic

STATIC = ("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
          "attention_last")
IG_STEPS = 10  # the paper's appendix

# Table 2 of the paper (IMDB teacher, ERASER movies, AUC); * = uses human labels.
PAPER_TABLE2 = {"gradient": 0.65, "input_x_gradient": 0.51, "integrated_gradients": 0.53,
                "attention_all": 0.68, "attention_last": 0.61, "smat": 0.73,
                "best layer*": 0.75, "best head*": 0.75}


def run(table1_dir: str | Path, data_dir: str | Path, *, output_dir: str | Path,
        max_len: int = 512, split: str = "test", batch_size: int = 8) -> dict[str, Any]:
    """Score every explainer and the two oracles; write the table and the heatmap."""
    table1_dir, output_dir = Path(table1_dir), Path(output_dir)
    config = earlier_run_file(table1_dir, "config.json", flag="--table1")
    results = earlier_run_file(table1_dir, "results.json", flag="--table1")
    sizes = config["sizes"]
    middle = sizes[len(sizes) // 2]
    median = median_record(results["records"], explainer="smat", num_examples=middle)
    learned = table1_dir / "students" / f"n{middle}" / "smat" / f"seed{median['seed']}" \
        / "explainer"
    trained = model_store.load(Path(config["teacher_dir"]) / "model")
    rationales = load_eraser(data_dir, split=split)
    start = time.perf_counter()
    explain = ExplainConfig(explainers=(*STATIC, str(learned)), ig_steps=IG_STEPS,
                            batch_size=batch_size)
    report = plausibility_report(trained, rationales, explain, max_len=max_len)
    oracle = head_plausibility(trained, rationales, max_len=max_len, batch_size=batch_size)
    auc = {name: row["roc_auc"] for name, row in report["explainers"].items()}
    auc["smat"] = auc.pop(str(learned))
    auc["best layer*"] = oracle["best_layer_auc"]
    auc["best head*"] = oracle["best_head_auc"]
    lines = ["| explainer | ROC-AUC (measured) | paper |", "|---|---|---|"]
    lines += [f"| {name} | {value:.3f} | {PAPER_TABLE2[name]:.2f} |"
              for name, value in auc.items()]
    table = "\n".join(lines)
    layer, head = oracle["best_head"]
    (output_dir / "table.md").parent.mkdir(parents=True, exist_ok=True)
    (output_dir / "table.md").write_text(
        f"ERASER movies {split} ({report['num_examples']} reviews, max_len {max_len}); "
        f"SMaT explainer of the median student at n={middle} (seed {median['seed']}); "
        f"best layer {oracle['best_layer']}, best head (layer {layer}, head {head}).\n\n"
        f"{table}\n")
    plot_head_weights(np.asarray(oracle["head_auc"]), output_dir / "head_auc.png",
                      title="word-level ROC-AUC of each head")
    summary = {"table": table, "auc": auc, "report": report, "oracle": oracle,
               "learned_explainer": str(learned), "max_len": max_len,
               "seconds": round(time.perf_counter() - start, 1)}
    write_json_atomic(output_dir / "results.json", summary)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table1", required=True, help="a finished smat_table1.py folder")
    parser.add_argument("--data-dir", default=None,
                        help="ERASER movies folder (test.jsonl and docs/; default: from the "
                             "Hugging Face Hub, converted once into the data cache)")
    parser.add_argument("--output-dir", default="runs/smat_table2")
    parser.add_argument("--max-len", type=int, default=512, help="tokens read per review")
    parser.add_argument("--split", default="test", help="ERASER split")
    parser.add_argument("--batch-size", type=int, default=8,
                        help="reviews per jitted call (memory grows with it: 8 reviews of "
                             "512 tokens with IG take about 20 GB on the CPU)")
    args = parser.parse_args(argv)
    with command_runtime(parser, driver=__file__, resumes=False):
        summary = run(args.table1, data_dir_or_hub(args.data_dir, "eraser_movies"),
                      output_dir=args.output_dir,
                      max_len=args.max_len, split=args.split, batch_size=args.batch_size)
    print((Path(args.output_dir) / "table.md").read_text())
    print(f"{summary['seconds']} s")


if __name__ == "__main__":
    main()
