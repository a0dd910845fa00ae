"""Which configuration should `make demo` run? Candidates timed against the gap they show.

The demo must show, on the built-in corpus and within minutes on 2 CPU cores, what the SST-2
runs show at the reference's time scale: students that learn from SMaT's explanations
simulate the teacher better than students of static attention, which beat students of no
explainer. Each candidate here is one demo configuration (the demo's teacher, and a student
setting: its size, optimizer, stopping, how many encoder layers it keeps); it trains none /
attention_all / SMaT students over 5 seeds from one shared initialisation and reports each
setting's median test simulability, the seed pairs SMaT wins against static attention and
static attention against none, and the wall time of each setting's students (5 seeds in one
vmapped program) and of the teacher.

    python experiments/demo_search.py --candidates ref_l2 ref_l2_outer --output-dir runs/demo_search

Resumable (finished students are reused); writes ``<candidate>/results.json`` and
``table.md`` (every candidate run so far) into the output folder.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from command_line import command_runtime

from smat.evaluation.simulability import paired_seed_comparison, simulability_table
from smat.jobs.demo import DEMO_DATA, DEMO_EXPLAINERS, DEMO_TEACHER
from smat.jobs.grid import run_grid
from smat.jobs.runs import run_teacher
from smat.json_files import read_json
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig

SEEDS = (0, 1, 2, 3, 4)
# The reference's student optimizer (SGD 5e-3, batch 32, outer Adam 5e-4, the meta step
# every step), stopped on patience within an epoch cap that fits minutes.
REFERENCE = StudentTrainConfig(loop=LoopConfig(batch_size=32, max_epochs=12, evals_per_epoch=2,
                                               patience=6, parallel_seeds=True))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One demo configuration: a student setting at one training size."""

    student: StudentTrainConfig
    size: int = 500


CANDIDATES = {
    "ref_l6": Candidate(REFERENCE),
    "ref_l2": Candidate(dataclasses.replace(REFERENCE, student_layers=2)),
    "ref_l2_outer": Candidate(dataclasses.replace(REFERENCE, student_layers=2,
                                                  outer_learning_rate=5e-3)),
    "ref_l3": Candidate(dataclasses.replace(REFERENCE, student_layers=3)),
    "sgd05_l2": Candidate(dataclasses.replace(REFERENCE, student_layers=2,
                                              inner_learning_rate=0.05)),
}


def summarise(records: Sequence[dict[str, Any]], seconds: dict[str, float]) -> dict[str, Any]:
    """Medians, the paired comparisons the demo must show, and the time they took."""
    medians = {name: float(np.median([100 * r["test"]["accuracy"] for r in records
                                      if r["explainer"] == name])) for name in DEMO_EXPLAINERS}
    pairs = {}
    for candidate, baseline in (("smat", "attention_all"), ("attention_all", "none")):
        (row,) = paired_seed_comparison(records, candidate=candidate, baseline=baseline)
        pairs[f"{candidate}_vs_{baseline}"] = {
            "wins": row["wins"], "models": row["num_models"],
            "median_difference": 100 * row["median_difference"], "p_value": row["p_value"]}
    steps = {name: int(np.median([r["steps"] for r in records if r["explainer"] == name]))
             for name in DEMO_EXPLAINERS}
    return {"median": medians, "paired": pairs, "median_steps": steps,
            "seconds": seconds, "student_seconds": round(sum(seconds.values()), 1),
            "shows_headline": pairs["smat_vs_attention_all"]["wins"] >= 4
            and pairs["attention_all_vs_none"]["wins"] >= 3}


def run(names: Sequence[str], *, output_dir: str | Path, progress: bool = True
        ) -> dict[str, Any]:
    """Train the demo's teacher (once) and each candidate's students; write the table."""
    output_dir = Path(output_dir)
    (teacher,) = run_teacher(data=DEMO_DATA, train=DEMO_TEACHER,
                             output_dir=output_dir / "teacher", progress=progress)
    for name in names:
        candidate = CANDIDATES[name]
        folder = output_dir / name
        records, seconds = [], {}
        for explainer in DEMO_EXPLAINERS:
            start = time.perf_counter()
            records += run_grid(output_dir / "teacher", sizes=[candidate.size],
                                explainers=[explainer], seeds=SEEDS,
                                student=candidate.student, output_dir=folder / "students",
                                progress=progress)
            seconds[explainer] = round(time.perf_counter() - start, 1)
        previous = (read_json(folder / "results.json") if (folder / "results.json").is_file()
                    else {})
        # a resumed call times only what it trained: keep the first full timing
        seconds = previous.get("seconds_first_call", seconds)
        write_json_atomic(folder / "results.json", {
            "candidate": name, "size": candidate.size,
            "student": dataclasses.asdict(candidate.student),
            "teacher_test": teacher["test"], "teacher_seconds": teacher["train_seconds"],
            "records": records, "table": simulability_table(records),
            "seconds_first_call": seconds, **summarise(records, seconds)})
    return write_table(output_dir)


def write_table(output_dir: Path) -> dict[str, Any]:
    """The table of every candidate with results in `output_dir`: time against gap."""
    results = {path.parent.name: read_json(path)
               for path in sorted(output_dir.glob("*/results.json"))}
    lines = ["| candidate | none | attention_all | smat | SMaT vs static (wins, median) | "
             "static vs none (wins, median) | steps none / static / SMaT | student "
             "seconds (5 seeds) |", "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        smat, static = r["paired"]["smat_vs_attention_all"], r["paired"]["attention_all_vs_none"]
        lines.append(
            f"| {name} | {r['median']['none']:.1f} | {r['median']['attention_all']:.1f} | "
            f"{r['median']['smat']:.1f} | {smat['wins']}/{smat['models']}, "
            f"{smat['median_difference']:+.1f} | {static['wins']}/{static['models']}, "
            f"{static['median_difference']:+.1f} | "
            + " / ".join(str(r["median_steps"][s]) for s in DEMO_EXPLAINERS)
            + f" | {r['student_seconds']:.0f} |")
    (output_dir / "table.md").write_text("\n".join(lines) + "\n")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES),
                        default=list(CANDIDATES))
    parser.add_argument("--output-dir", default="runs/demo_search")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    with command_runtime(parser):
        run(args.candidates, output_dir=args.output_dir, progress=not args.no_progress)
    print((Path(args.output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
