"""Summarise a profiled test run (``make test`` writes one): where the suite's time goes.

Reads the JSON lines that tests/conftest.py writes per test when SMAT_TEST_PROFILE is set
(wall seconds of setup + call + teardown, and the seconds JAX spent tracing, lowering and
compiling XLA programs inside them) and writes a markdown report: totals, the modules and
the tests that take longest, each split into compile (trace + lower + XLA compile) and the
rest (running, data, I/O), and the programs (by name) whose compiling cost most over the
suite, with how often each was compiled. Its first line gives the suite's wall time (from the
``started`` file ``make test`` writes, in epoch seconds, to now) and the machine's float32
matmul rate (``matmul.json``, from ``benchmarks/ig_vs_captum.py --worker matmul``, measured
just before the tests), so times from different machines can be compared.

    python scripts/test_profile.py build/test-profile > build/test-profile.md
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path


def load(folder: Path) -> list[dict]:
    """Every test record of the run, from all workers."""
    records = [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
               for line in path.read_text().splitlines() if line.strip()]
    if not records:
        raise SystemExit(f"{folder} holds no test records: run `make test` first")
    return records


def compile_seconds(record: dict) -> float:
    return sum(record.get(name, 0.0) for name in ("trace", "lower", "compile"))


def machine_line(folder: Path, num_tests: int) -> str:
    """The suite's wall time and the machine's matmul rate, from the files ``make test``
    writes beside the records (empty when they are missing, e.g. a hand-made profile)."""
    started, matmul = folder / "started", folder / "matmul.json"
    if not (started.is_file() and matmul.is_file()):
        return ""
    wall = time.time() - float(started.read_text())
    gflops = json.loads(matmul.read_text().strip().splitlines()[-1])["gflops"]
    return (f"{num_tests} tests in {wall / 60:.1f} min of wall time on a machine whose "
            f"float32 matmul (2048 x 2048, XLA) runs at {gflops:.0f} GFLOP/s; ")


def report(records: list[dict], *, top: int = 30, machine: str = "") -> str:
    """The markdown report of :func:`load`'s records, opening with `machine`
    (:func:`machine_line`)."""
    wall = sum(r["seconds"] for r in records)
    compiled = sum(compile_seconds(r) for r in records)
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in records:
        entry = modules[r["test"].split("::")[0]]
        entry[0] += r["seconds"]
        entry[1] += compile_seconds(r)
        entry[2] += 1
    lines = [f"{machine}{len(records)} tests, {wall / 60:.1f} min of test time summed over "
             "workers, "
             f"{compiled / 60:.1f} min of it ({100 * compiled / max(wall, 1e-9):.0f}%) tracing, "
             "lowering and compiling XLA programs; compiled programs freed "
             f"{sum(int(r.get('freed', 0)) for r in records)} times.", "",
             "| module | tests | seconds | compile s | compile % |", "|---|---|---|---|---|"]
    for name, (seconds, comp, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"| {name} | {count} | {seconds:.0f} | {comp:.0f} | "
                     f"{100 * comp / max(seconds, 1e-9):.0f} |")
    lines += ["", "| test | seconds | compile s | XLA compile s |", "|---|---|---|---|"]
    for r in sorted(records, key=lambda r: -r["seconds"])[:top]:
        lines.append(f"| {r['test']} | {r['seconds']:.1f} | {compile_seconds(r):.1f} | "
                     f"{r.get('compile', 0.0):.1f} |")
    lines += programs_table(records, top=top)
    return "\n".join(lines)


def programs_table(records: list[dict], *, top: int) -> list[str]:
    """The programs that cost most lowering + XLA compile time over the suite, by name
    (``jit(op)`` is an eager operation): how often they were compiled and in how many
    tests; empty for records written without program names."""
    programs: dict[str, list] = defaultdict(lambda: [0, 0.0, 0])
    for r in records:
        for name, (count, seconds) in r.get("programs", {}).items():
            entry = programs[name]
            entry[0] += count
            entry[1] += seconds
            entry[2] += 1
    if not programs:
        return []
    total = sum(seconds for _, seconds, _ in programs.values())
    lines = ["", f"{sum(c for c, _, _ in programs.values())} compiles of "
             f"{len(programs)} program names, {total / 60:.1f} min of lowering + XLA "
             "compile.", "",
             "| program | compiles | seconds | tests |", "|---|---|---|---|"]
    for name, (count, seconds, tests) in sorted(programs.items(),
                                                key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"| `{name}` | {count} | {seconds:.1f} | {tests} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the SMAT_TEST_PROFILE folder of a run")
    parser.add_argument("--top", type=int, default=30, help="rows per table (default: 30)")
    args = parser.parse_args()
    records = load(args.folder)
    print(report(records, top=args.top, machine=machine_line(args.folder, len(records))))


if __name__ == "__main__":
    main()
