"""The tables in README.md and docs/ that are made from committed result files.

A generated table sits between two markers in a page::

    <!-- table: NAME -->
    ...
    <!-- /table -->

and :data:`TABLES` says how NAME is made from files under ``docs/results/`` or
``benchmarks/results/``. ``tests/test_docs.py`` regenerates every marked table and fails
when a page's copy differs, so a table can never drift from its results;
``python scripts/docs_tables.py --write`` rewrites them after new results are committed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "experiments"), str(ROOT / "benchmarks")]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
_MARKED = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                     re.S)


def _json(path: str) -> dict:
    return json.loads((ROOT / path).read_text())


def demo_summary() -> str:
    """`make demo`'s printed summary, from its committed ``summary.json``."""
    from smat.jobs.demo import summary_markdown

    return "```\n" + summary_markdown(_json("docs/results/demo/summary.json")) + "```\n"


def demo_timing() -> str:
    """The wall time of each stage of the committed demo run."""
    seconds = _json("docs/results/demo/summary.json")["seconds"]
    stages = ("teacher", "students", "head_weights", "explanations")  # in the order they run
    lines = ["| stage (2 cores, empty compilation cache) | wall time |", "|---|---|"]
    lines += [f"| {stage.replace('_', ' ')} | {seconds[stage] / 60:.1f} min |"
              for stage in stages]
    lines.append(f"| the whole demo | {sum(seconds.values()) / 60:.1f} min |")
    return "\n".join(lines) + "\n"


def demo_candidates() -> str:
    """The demo configurations tried: time against the gap they show."""
    import demo_search

    results = {path.parent.name: json.loads(path.read_text())
               for path in sorted((ROOT / "docs/results/demo_search").glob("*/results.json"))}
    return demo_search.candidates_table(results) + "\n"


def run_footprint() -> str:
    """Disk and memory of the tutorial's runs, with and without the resumable state."""
    import run_footprint

    return run_footprint.footprint_table(_json("benchmarks/results/run_footprint.json")) + "\n"


def evaluation_startup() -> str:
    """Seconds to a teacher's held-out rows and a minimal evaluation, without and with the
    rows cached in the model folder."""
    import evaluation_startup

    return evaluation_startup.startup_table(
        _json("benchmarks/results/evaluation_startup.json")) + "\n"


def benchmark_demo() -> str:
    """`smat benchmark`'s table of the demo's teacher, from its committed report."""
    from smat.jobs.benchmark import benchmark_table

    return benchmark_table(_json("docs/results/benchmark_demo/benchmark.json")) + "\n"


def benchmark_default() -> str:
    """`smat benchmark --model` alone on the demo's teacher, from its committed report."""
    from smat.jobs.benchmark import benchmark_table

    return benchmark_table(_json("docs/results/benchmark_default/benchmark.json")) + "\n"


def benchmark_vs_ferret() -> str:
    """Where the whole report's seconds go, smat against ferret, from the committed run."""
    import benchmark_vs_ferret

    return benchmark_vs_ferret.timing_table(
        _json("benchmarks/results/benchmark_vs_ferret.json")) + "\n"


def _pair(records: list[dict], candidate: str, baseline: str, *, metric: str = "accuracy"
          ) -> str:
    """Medians and the paired comparison over seeds of two settings' students."""
    import numpy as np

    from smat.evaluation.simulability import paired_seed_comparison

    (row,) = paired_seed_comparison(records, candidate=candidate, baseline=baseline,
                                    metric=metric)
    medians = [100 * float(np.median([r["test"][metric] for r in records
                                      if r["explainer"] == name]))
               for name in (candidate, baseline)]
    return (f"{medians[0]:.1f} vs {medians[1]:.1f}; {row['wins']} of {row['num_models']} "
            f"seed pairs, p = {row['p_value']:.3f}")


def established() -> str:
    """README's results in brief: each claim with its number, from the committed cells."""
    sst2 = "docs/results/smat_table1_sst2"
    n500 = [r for name in ("none", "attention_all", "smat")
            for r in _json(f"{sst2}/n500_{name}.json")["records"]]
    n1000 = _json(f"{sst2}/n1000_teacher_742acae66bdb9b61/results.json")["records"]
    control = _json(f"{sst2}/control_n500_comparison.json")["records"]
    digits = _json("docs/results/smat_digits_reference/results.json")["records"]
    link = "[SMaT](docs/reproduce/smat.md)"
    rows = [
        ("SMaT teaches better than static attention (SST-2, 500 sentences)",
         _pair(n500, "smat", "attention_all"), link),
        ("... and with 1,000 sentences (one teacher)", _pair(n1000, "smat", "attention_all"),
         link),
        ("Static attention teaches better than no explainer (500 / 1,000)",
         f"{_pair(n500, 'attention_all', 'none')} / {_pair(n1000, 'attention_all', 'none')}",
         link),
        ("What SMaT adds goes with the text: its students beat students of its explanations "
         "of shuffled text", _pair(control, "smat", "smat_shuffled_text"),
         link),
        ("Gradient explanations teach about as much as none (1,000, 3 seeds)",
         _pair([r for r in n1000 if r["seed"] in (0, 1, 2)], "gradient", "none"), link),
        ("On images (240 digits, a small ViT) static attention teaches better than SMaT "
         "(test-digit bootstrap interval excludes 0)",
         _pair([r for r in digits if r["num_examples"] == 240], "attention_all", "smat"),
         link),
    ]
    lines = ["| claim | test simulability %, paired over seeds | details |", "|---|---|---|"]
    lines += [f"| {claim} | {number} | {where} |" for claim, number, where in rows]
    return "\n".join(lines) + "\n"


def _cells_by_teacher(size: int) -> str:
    """SST-2 students at the reference's time scale of one size, trained one per call, per
    teacher and seed (the teacher with the most students first), and the seed pairs each
    setting wins per teacher."""
    from smat.jobs.simulability_report import seed_pair_wins, seed_pairs_table

    folders = sorted((ROOT / f"docs/results/smat_table1_sst2/n{size}").glob("teacher_*"),
                     key=lambda folder: (-len(list(folder.glob("*.json"))), folder.name))
    records = [record for folder in folders
               for setting in ("none", "attention_all", "smat")
               for path in sorted(folder.glob(f"{setting}_seed*.json"))
               for record in json.loads(path.read_text())["records"]]
    return seed_pairs_table(records) + "\n\n" + seed_pair_wins(records) + "\n"


def digits_reference() -> str:
    """The digits at the reference's time scale: simulability, the steps each student took,
    the paired comparisons over seeds and how far SMaT's coefficients moved."""
    from smat.evaluation.simulability import simulability_table
    from smat.jobs.simulability_report import (
        coefficient_movement,
        comparisons_table,
        intervals_table,
        paired_comparisons,
        per_student_table,
        test_row_intervals,
    )

    records = _json("docs/results/smat_digits_reference/results.json")["records"]
    return "\n\n".join([
        simulability_table(records),
        "Steps per student (median [min:max]; a SMaT student's are all meta steps):\n\n"
        + per_student_table(records),
        comparisons_table(paired_comparisons(records)),
        "Bootstrap over the 400 test digits (500 resamples of half of them; a setting's "
        "score is its students' mean):\n\n" + intervals_table(test_row_intervals(records)),
        "SMaT's head coefficients (16 heads, each 1/16 = 0.0625 at the start):\n\n"
        + coefficient_movement(records)]) + "\n"


TABLES: dict[str, Callable[[], str]] = {
    "established": established,
    "smat-n500-by-teacher": lambda: _cells_by_teacher(500),
    "smat-n1000-by-teacher": lambda: _cells_by_teacher(1000),
    "digits-reference": digits_reference,
    "demo-summary": demo_summary,
    "demo-timing": demo_timing,
    "demo-candidates": demo_candidates,
    "run-footprint": run_footprint,
    "benchmark-vs-ferret": benchmark_vs_ferret,
    "evaluation-startup": evaluation_startup,
    "benchmark-demo": benchmark_demo,
    "benchmark-default": benchmark_default,
}


def marked_tables(page: Path) -> list[tuple[str, str]]:
    """(name, the page's copy) of every marked table in `page`."""
    return [(match["name"], match["body"]) for match in _MARKED.finditer(page.read_text())]


def rewrite(page: Path) -> bool:
    """Regenerate every marked table of `page` in place; whether anything changed.

    Raises:
      KeyError: a marker naming no table of :data:`TABLES`.
    """
    text = page.read_text()
    new = _MARKED.sub(lambda m: m.group(1) + TABLES[m["name"]]() + m.group(4), text)
    if new != text:
        page.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true",
                        help="rewrite the pages (default: list the tables that differ)")
    args = parser.parse_args(argv)
    for page in PAGES:
        if args.write:
            if rewrite(page):
                print(f"rewrote {page.relative_to(ROOT)}")
            continue
        for name, body in marked_tables(page):
            if TABLES[name]() != body:
                print(f"{page.relative_to(ROOT)}: table {name} differs from its results")


if __name__ == "__main__":
    main()
