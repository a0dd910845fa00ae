"""What the tutorial's runs leave on disk and how much memory they hold.

Runs the tutorial's own commands (``docs/tutorial.md``: its example data, the teacher, the
simulability grid of 3 settings x 2 sizes x 3 seeds) as a user would, each `smat` command in
a process of its own, and records per command its peak resident memory (the process's
high-water mark) and wall seconds, then the disk the teacher folder and each finished grid
cell hold. Two modes, each from nothing in its own folder:

- ``lean``: the commands as the tutorial writes them (a finished run keeps its result,
  model or learned explainer, metrics log and cache, and deletes its resumable state);
- ``kept``: the same with ``--keep-checkpoints`` (and ``--keep-students`` for the grid),
  what every run kept before those were options.

    python benchmarks/run_footprint.py --modes lean kept

Writes ``benchmarks/results/run_footprint.json`` (``--output``) after each mode and prints a
table. Wall seconds depend on what else runs on the machine; memory and disk do not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "docs" / "tutorial.md"
KEEP = {"train-teacher": ["--keep-checkpoints"],
        "simulability": ["--keep-checkpoints", "--keep-students"]}


def tutorial_commands() -> tuple[str, list[list[str]]]:
    """The tutorial's data-writing Python block and its teacher and grid commands."""
    text = TUTORIAL.read_text()
    python = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    commands = [shlex.split(block.replace("\\\n", " "))
                for block in re.findall(r"```bash\n(.*?)```", text, re.S)]
    wanted = [c for c in commands if c[:2] in (["smat", "train-teacher"],
                                               ["smat", "simulability"])]
    return python, wanted


def peak_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def run_command(command: list[str], folder: Path) -> dict[str, float]:
    """Run one `smat` command in `folder`; its wall seconds and peak resident memory (the
    high-water mark read just before it exits, polled every second)."""
    start = time.perf_counter()
    process = subprocess.Popen([str(Path(sys.executable).parent / "smat"), *command[1:],
                                "--no-progress"], cwd=folder, stdout=subprocess.DEVNULL)
    peak = 0
    while process.poll() is None:
        try:
            peak = max(peak, peak_kb(process.pid))
        except (OSError, ValueError):
            pass
        time.sleep(1.0)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with exit {process.returncode}")
    return {"seconds": round(time.perf_counter() - start, 1), "peak_gb": round(peak / 1e6, 2)}


def disk_mb(folder: Path) -> float:
    return round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6, 1)


def run_mode(mode: str, folder: Path) -> dict:
    python, commands = tutorial_commands()
    folder.mkdir(parents=True)
    here = Path.cwd()
    os.chdir(folder)  # the block writes my_reviews.csv where it runs
    try:
        exec(compile(python, str(TUTORIAL), "exec"), {"__name__": "tutorial"})
    finally:
        os.chdir(here)
    result = {"commands": {}}
    for command in commands:
        if mode == "kept":
            command = [*command, *KEEP[command[1]]]
        result["commands"][command[1]] = run_command(command, folder)
    runs = folder / "runs"
    cells = sorted(path.parent for path in (runs / "my_grid").rglob("result.json"))
    result["disk_mb"] = {"teacher": disk_mb(runs / "my_teacher"),
                         "grid": disk_mb(runs / "my_grid"),
                         "cells": len(cells),
                         "per_cell_mean": round(sum(map(disk_mb, cells)) / len(cells), 1),
                         "per_cell_max": max(map(disk_mb, cells))}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", choices=("lean", "kept"), default=["lean", "kept"])
    parser.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "footprint",
                        help="where each mode's folder is made (it must not exist yet)")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" /
                                                "run_footprint.json"))
    args = parser.parse_args(argv)
    output = Path(args.output)
    results = json.loads(output.read_text()) if output.is_file() else {}
    results["machine"] = {"cpu": platform.processor() or platform.machine(),
                          "python": platform.python_version()}
    for mode in args.modes:
        results[mode] = run_mode(mode, args.work_dir.resolve() / mode)
        output.write_text(json.dumps(results, indent=2) + "\n")
    print(footprint_table(results))


def footprint_table(results: dict) -> str:
    """Markdown: per mode, the peak memory and seconds of each command and the disk."""
    lines = ["| mode | teacher: peak GB, s | grid: peak GB, s | teacher MB | grid MB | "
             "per cell MB (mean / max) |", "|---|---|---|---|---|---|"]
    for mode in ("kept", "lean"):
        if mode not in results:
            continue
        r = results[mode]
        teacher, grid = r["commands"]["train-teacher"], r["commands"]["simulability"]
        disk = r["disk_mb"]
        lines.append(f"| {mode} | {teacher['peak_gb']:.2f}, {teacher['seconds']:.0f} | "
                     f"{grid['peak_gb']:.2f}, {grid['seconds']:.0f} | {disk['teacher']:.0f} | "
                     f"{disk['grid']:.1f} | {disk['per_cell_mean']:.1f} / "
                     f"{disk['per_cell_max']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
