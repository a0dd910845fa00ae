"""Summarise a profiled test run (``make test-profile``): where the suite's time goes.

Reads the JSON lines that tests/conftest.py writes per test when SMAT_TEST_PROFILE is set
(wall seconds of setup + call + teardown, and the seconds JAX spent tracing, lowering and
compiling XLA programs inside them) and writes a markdown report: totals, the modules and
the tests that take longest, each split into compile (trace + lower + XLA compile) and the
rest (running, data, I/O).

    python scripts/test_profile.py build/test-profile > build/test-profile.md
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def load(folder: Path) -> list[dict]:
    """Every test record of the run, from all workers."""
    records = [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
               for line in path.read_text().splitlines() if line.strip()]
    if not records:
        raise SystemExit(f"{folder} holds no test records: run `make test-profile` first")
    return records


def compile_seconds(record: dict) -> float:
    return sum(record.get(name, 0.0) for name in ("trace", "lower", "compile"))


def report(records: list[dict], *, top: int = 30) -> str:
    """The markdown report of :func:`load`'s records."""
    wall = sum(r["seconds"] for r in records)
    compiled = sum(compile_seconds(r) for r in records)
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in records:
        entry = modules[r["test"].split("::")[0]]
        entry[0] += r["seconds"]
        entry[1] += compile_seconds(r)
        entry[2] += 1
    lines = [f"{len(records)} tests, {wall / 60:.1f} min of test time summed over workers, "
             f"{compiled / 60:.1f} min of it ({100 * compiled / max(wall, 1e-9):.0f}%) tracing, "
             "lowering and compiling XLA programs.", "",
             "| module | tests | seconds | compile s | compile % |", "|---|---|---|---|---|"]
    for name, (seconds, comp, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"| {name} | {count} | {seconds:.0f} | {comp:.0f} | "
                     f"{100 * comp / max(seconds, 1e-9):.0f} |")
    lines += ["", "| test | seconds | compile s | XLA compile s |", "|---|---|---|---|"]
    for r in sorted(records, key=lambda r: -r["seconds"])[:top]:
        lines.append(f"| {r['test']} | {r['seconds']:.1f} | {compile_seconds(r):.1f} | "
                     f"{r.get('compile', 0.0):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the SMAT_TEST_PROFILE folder of a run")
    parser.add_argument("--top", type=int, default=30, help="rows per table (default: 30)")
    args = parser.parse_args()
    print(report(load(args.folder), top=args.top))


if __name__ == "__main__":
    main()
