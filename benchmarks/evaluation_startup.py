"""How long an evaluation of a trained teacher takes to start: its held-out rows.

An evaluation without ``--texts`` scores the teacher's held-out test rows. Rebuilding them
means loading the teacher's whole data set, tokenizing it and splitting it by the SMaT
protocol; the first evaluation caches the rows in the model folder (``held_out_test_*.npz``,
keyed by the model's facts and its data files' content), and later ones read that file.
This times, for each teacher given, in one process per measurement:

- the rows alone (``held_out_split``), rebuilt and cached;
- a whole ``smat faithfulness --explainers random --num-examples 8`` (the least work an
  evaluation can do after its rows), with no cache and with one.

    python benchmarks/evaluation_startup.py \\
        --teacher demo=runs/demo/teacher sst2=runs/smat_table1_sst2/teacher

Writes ``benchmarks/results/evaluation_startup.json`` (``--output``) and prints the table.
Time it with nothing else running.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from smat.markdown import markdown_table

ROOT = Path(__file__).resolve().parent.parent
ROWS = """
import sys, time
start = time.perf_counter()
from smat.jobs.inputs import held_out_split
from smat.store.model_store import load
trained = load(sys.argv[1])
loaded = time.perf_counter()
rows = held_out_split(trained, folder=sys.argv[1] if sys.argv[2] == "cached" else None)
print(time.perf_counter() - loaded, len(rows.labels))
"""


def clear_cache(teacher: Path) -> None:
    for path in (teacher / "model").glob("held_out_*.npz"):
        path.unlink()


def rows_seconds(teacher: Path, mode: str) -> tuple[float, int]:
    """Seconds to the held-out rows in a fresh process (the model loaded before the clock
    starts), and how many rows."""
    out = subprocess.run([sys.executable, "-c", ROWS, str(teacher / "model"), mode],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def command_seconds(teacher: Path) -> float:
    """Wall seconds of a minimal `smat faithfulness` on the teacher's held-out rows."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "smat"), "faithfulness", "--model",
                        str(teacher / "model"), "--explainers", "random", "--num-examples",
                        "8", "--output-dir", folder, "--no-progress"],
                       check=True, capture_output=True)
        return time.perf_counter() - start


def measure(teacher: Path, repeats: int) -> dict:
    clear_cache(teacher)
    rebuilt, num_rows = zip(*(rows_seconds(teacher, "rebuilt") for _ in range(repeats)),
                            strict=True)
    rows_seconds(teacher, "cached")  # writes the cache
    cached = [rows_seconds(teacher, "cached")[0] for _ in range(repeats)]
    cold = []
    for _ in range(repeats):
        clear_cache(teacher)
        cold.append(command_seconds(teacher))
    warm = [command_seconds(teacher) for _ in range(repeats)]
    data = json.loads((teacher / "model" / "model.json").read_text())["data"]
    return {"teacher": teacher.name, "data_source": Path(str(data["source"])).name,
            "rows": num_rows[0], "rows_rebuilt_s": statistics.median(rebuilt),
            "rows_cached_s": statistics.median(cached),
            "faithfulness_no_cache_s": statistics.median(cold),
            "faithfulness_cached_s": statistics.median(warm), "repeats": repeats}


def startup_table(results: dict) -> str:
    """Markdown: per teacher, the held-out rows and a minimal evaluation, without and with
    the cache (medians)."""
    return markdown_table(
        ["teacher", "held-out rows", "rows: rebuilt / cached (s)",
         "`smat faithfulness`: no cache / cached (s)"],
        [[name, r["rows"],
          f"{r['rows_rebuilt_s']:.2f} / {r['rows_cached_s']:.3f} "
          f"({r['rows_rebuilt_s'] / r['rows_cached_s']:.0f}x)",
          f"{r['faithfulness_no_cache_s']:.1f} / {r['faithfulness_cached_s']:.1f}"]
         for name, r in results["teachers"].items()])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", nargs="+", required=True, metavar="NAME=RUN",
                        help="teacher run folders (smat train-teacher --output-dir), named")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" /
                                                "evaluation_startup.json"))
    args = parser.parse_args(argv)
    teachers = dict(item.split("=", 1) for item in args.teacher)
    results = {"machine": {"cpu": platform.processor() or platform.machine(),
                           "python": platform.python_version()},
               "teachers": {name: measure(Path(path), args.repeats)
                            for name, path in teachers.items()}}
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n")
    print(startup_table(results))


if __name__ == "__main__":
    main()
