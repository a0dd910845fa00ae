"""Simulability across student data sizes, the layout of Table 1 of the SMaT paper.

Fernandes et al, "Learning to Scaffold: Optimizing Model Explanations for Teaching", 2022,
Table 1 (text classification): students with no explainer, static attention explainers and
SMaT, trained on 500 / 1,000 / 2,000 examples, 5 seeds, `median [q25:q75]` of test
simulability, `*` where the IQR lies above the no-explainer baseline's.

This reproduction uses the offline movie-snippets corpus and all-MiniLM-L6-v2 (the paper
used IMDB and ELECTRA); pass `--source` to `smat train-teacher` for another data set.

    python experiments/table1_simulability.py --teacher runs/teacher --output-dir runs/table1
    python experiments/table1_simulability.py --teacher runs/teacher --smoke   # 1 size, 2 seeds

Expected runtime on 2 CPU cores: the full grid (60 students) takes many hours. The smoke
variant (8 students of 256 examples) should take about 20-25 minutes. That figure is
estimated from the demo's per-student times, not measured. Each cell is resumable, and
the resolved config is saved next to the results.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from smat.evaluation.simulability import plot_simulability, simulability_table
from smat.jobs.grid import run_grid
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig


def get_config(smoke: bool) -> dict:
    """The grid: the paper's sizes and seeds, or a smoke variant sized for a CPU."""
    if smoke:
        return {"sizes": [256], "seeds": [0, 1],
                "explainers": ["none", "attention_all", "attention_last", "smat"],
                "student": StudentTrainConfig(
                    inner_learning_rate=0.05, meta_interval=2,
                    loop=LoopConfig(batch_size=16, max_epochs=2, patience=2,
                                    length_multiple=64))}
    return {"sizes": [500, 1000, 2000], "seeds": [0, 1, 2, 3, 4],
            "explainers": ["none", "attention_all", "attention_last", "smat"],
            "student": StudentTrainConfig()}  # DESIGN 4 reference defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", required=True, help="a `smat train-teacher` run folder")
    parser.add_argument("--output-dir", default="runs/table1")
    parser.add_argument("--smoke", action="store_true", help="one size, two seeds")
    args = parser.parse_args()
    config = get_config(args.smoke)
    output_dir = Path(args.output_dir)
    write_json_atomic(output_dir / "config.json",
                      {**config, "student": dataclasses.asdict(config["student"]),
                       "teacher": args.teacher})
    records = run_grid(args.teacher, sizes=config["sizes"], explainers=config["explainers"],
                       seeds=config["seeds"], student=config["student"], output_dir=output_dir)
    table = simulability_table(records)
    (output_dir / "table.md").write_text(table + "\n")
    plot_simulability(records, output_dir / "simulability.png")
    print(table)


if __name__ == "__main__":
    main()
