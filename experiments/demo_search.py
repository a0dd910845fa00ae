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

    python experiments/demo_search.py --candidates short_outer100_n64 --output-dir runs/demo_search

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

from smat.cli.experiment import command_runtime
from smat.evaluation.simulability import paired_seed_comparison, simulability_table
from smat.jobs.demo import DEMO_DATA, DEMO_EXPLAINERS, DEMO_SIZE, DEMO_STUDENT, DEMO_TEACHER
from smat.jobs.grid import run_grid
from smat.jobs.teacher_run import run_teacher
from smat.json_files import read_json
from smat.store.run_log import write_json_atomic
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig

SEEDS = (0, 1, 2, 3, 4)
# The reference's student optimizer (SGD 5e-3, batch 32, outer Adam 5e-4, the meta step
# every step), stopped on patience within an epoch cap that fits minutes.
REFERENCE = StudentTrainConfig(loop=LoopConfig(batch_size=32, max_epochs=12, evals_per_epoch=2,
                                               patience=6, parallel_seeds=True))
# Students of a few epochs (16-32 steps): a larger SGD rate, batch 16, patience 2.
SHORT = StudentTrainConfig(inner_learning_rate=0.05, loop=LoopConfig(
    batch_size=16, max_epochs=4, patience=2, parallel_seeds=True))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One demo configuration: a student setting at one training size."""

    student: StudentTrainConfig
    size: int


CANDIDATES = {
    "reference_2layers_n500": Candidate(dataclasses.replace(REFERENCE, student_layers=2), 500),
    "short_n64": Candidate(SHORT, 64),
    # the configuration `make demo` runs (with 3 seeds)
    "short_outer100_n64": Candidate(DEMO_STUDENT, DEMO_SIZE),
    "short_outer100_n128": Candidate(dataclasses.replace(SHORT, outer_learning_rate=5e-2),
                                     128),
}
PAIRS = (("smat", "attention_all"), ("attention_all", "none"))


def summarise(records: Sequence[dict[str, Any]], seconds: dict[str, float]) -> dict[str, Any]:
    """Medians, the paired comparisons the demo must show (of the settings trained so far)
    and the time they took."""
    trained = [name for name in DEMO_EXPLAINERS if any(r["explainer"] == name
                                                        for r in records)]
    medians = {name: float(np.median([100 * r["test"]["accuracy"] for r in records
                                      if r["explainer"] == name])) for name in trained}
    steps = {name: int(np.median([r["steps"] for r in records if r["explainer"] == name]))
             for name in trained}
    pairs = {}
    for candidate, baseline in PAIRS:
        if candidate in trained and baseline in trained:
            (row,) = paired_seed_comparison(records, candidate=candidate, baseline=baseline)
            pairs[f"{candidate}_vs_{baseline}"] = {
                "wins": row["wins"], "models": row["num_models"],
                "median_difference": 100 * row["median_difference"],
                "p_value": row["p_value"]}
    shows = (len(pairs) == len(PAIRS) and pairs["smat_vs_attention_all"]["wins"] >= 4
             and pairs["attention_all_vs_none"]["wins"] >= 3)
    return {"median": medians, "paired": pairs, "median_steps": steps, "seconds": seconds,
            "student_seconds": round(sum(seconds.values()), 1), "shows_headline": shows}


def run(names: Sequence[str], *, output_dir: str | Path, progress: bool = True,
        settings: Sequence[str] = DEMO_EXPLAINERS) -> dict[str, Any]:
    """Train the demo's teacher (once) and each candidate's students of `settings` (a
    candidate stopped early keeps the ones it finished), writing each candidate's results
    after each setting; write the table."""
    output_dir = Path(output_dir)
    (teacher,) = run_teacher(data=DEMO_DATA, train=DEMO_TEACHER,
                             output_dir=output_dir / "teacher", progress=progress)
    for name in names:
        candidate = CANDIDATES[name]
        folder = output_dir / name
        path = folder / "results.json"
        # a resumed call times only what it trained: each setting keeps its first timing
        seconds = read_json(path)["seconds"] if path.is_file() else {}
        records = []
        for explainer in settings:
            start = time.perf_counter()
            records += run_grid(output_dir / "teacher", sizes=[candidate.size],
                                explainers=[explainer], seeds=SEEDS,
                                student=candidate.student, output_dir=folder / "students",
                                progress=progress)
            seconds.setdefault(explainer, round(time.perf_counter() - start, 1))
            write_json_atomic(path, {
                "candidate": name, "size": candidate.size,
                "student": dataclasses.asdict(candidate.student),
                "teacher_test": teacher["test"], "teacher_seconds": teacher["train_seconds"],
                "records": records, "table": simulability_table(records),
                **summarise(records, seconds)})
    return write_table(output_dir)


def write_table(output_dir: Path) -> dict[str, Any]:
    """The table of every candidate with results in `output_dir`: time against gap."""
    results = {path.parent.name: read_json(path)
               for path in sorted(output_dir.glob("*/results.json"))}
    (output_dir / "table.md").write_text(candidates_table(results) + "\n")
    return results


def candidates_table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: per candidate, the settings' median test simulability, the seed pairs each
    comparison wins with its median difference, the median steps and the students'
    seconds (5 seeds in one program each); "–" for a setting not trained."""

    def cell(r: dict[str, Any], key: str) -> str:
        pair = r["paired"].get(key)
        return "–" if pair is None else (f"{pair['wins']}/{pair['models']}, "
                                         f"{pair['median_difference']:+.1f}")

    lines = ["| candidate | teacher test % | n | none | attention_all | smat | SMaT vs static "
             "(wins, median) | static vs none (wins, median) | steps none / static / SMaT | "
             "student seconds (5 seeds) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        medians = " | ".join(f"{r['median'][s]:.1f}" if s in r["median"] else "–"
                             for s in DEMO_EXPLAINERS)
        steps = " / ".join(str(r["median_steps"].get(s, "–")) for s in DEMO_EXPLAINERS)
        lines.append(f"| {name} | {100 * r['teacher_test']['accuracy']:.1f} | {r['size']} | "
                     f"{medians} | "
                     f"{cell(r, 'smat_vs_attention_all')} | {cell(r, 'attention_all_vs_none')} "
                     f"| {steps} | {r['student_seconds']:.0f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES),
                        default=list(CANDIDATES))
    parser.add_argument("--settings", nargs="+", choices=DEMO_EXPLAINERS,
                        default=list(DEMO_EXPLAINERS),
                        help="train only these settings (none first)")
    parser.add_argument("--output-dir", default="runs/demo_search")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    with command_runtime(parser, driver=__file__):
        run(args.candidates, output_dir=args.output_dir, progress=not args.no_progress,
            settings=args.settings)
    print((Path(args.output_dir) / "table.md").read_text())


if __name__ == "__main__":
    main()
