"""Compile time of the programs a user's jobs compile, and how many each job compiles.

Each job runs as the ``smat`` command runs it (``smat.cli.main``), in a process of its own
with the persistent compilation cache off, while a ``jax.monitoring`` listener records
every program JAX traces, lowers and compiles (the events name the function). The jobs, in
order (the later ones use the teacher the first trains):

- ``teacher``: ``smat train-teacher``, one epoch (the teacher step, the validation pass);
- ``student_none``, ``student_attention_all``, ``student_smat``: one simulability cell per
  setting, ``smat train-student --size N --max-epochs 1`` (the teacher cache, the student
  or SMaT step, the validation pass);
- ``explain``: ``smat explain`` over 64 sentences with one explainer of each registry family
  (gradient, integrated gradients, Lime, attention);
- ``faithfulness``: ``smat faithfulness`` (gradient and IG explanations, then AOPC) on 64
  held-out sentences.

Per job: wall seconds, the programs XLA compiled, the seconds spent tracing, lowering and
compiling, and the slowest programs by name. The job list is where a GPU user's time goes first:
on an H200 one IG program took about a minute to compile, so these numbers say where a
GPU user's first minutes go and what to cut.

Run: ``python benchmarks/compile_time.py [--output ...]`` (the offline MiniLM and the
built-in corpus; ``--smoke``: 400 generated sentences of at most 16 tokens). Writes the JSON
after every job, prints a markdown table and, last, ``RESULT compile_time <seconds>``: the
longest compile of any one program. ``--length-multiple N`` gives every job that batch
length multiple (N = max_len: one batch shape per program).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT_PATH = HERE / "results" / "compile_time.json"
EVENTS = {"/jax/core/compile/backend_compile_duration": "compile",
          "/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower"}
WORDS = ["a", "film", "great", "dull", "story", "acting", "moving", "slow", "truly", "the",
         "wonderful", "boring", "plot", "and", "cast", "awful", "music", "fun", "long", "warm"]
JOBS = ("teacher", "student_none", "student_attention_all", "student_smat", "explain",
        "faithfulness")


def job_argv(job: str, workdir: Path, *, smoke: bool,
             length_multiple: int | None = None) -> list[str]:
    """The ``smat`` command line of one job (``--length-multiple`` added when given: every
    job's command takes it, and it bounds the batch shapes each one compiles)."""
    cut = [] if length_multiple is None else ["--length-multiple", str(length_multiple)]
    return [*_job_argv(job, workdir, smoke=smoke), *cut]


def _job_argv(job: str, workdir: Path, *, smoke: bool) -> list[str]:
    teacher = workdir / "teacher"
    if job == "teacher":
        data = (["--source", str(workdir / "data.csv"), "--text-column", "sentence",
                 "--label-column", "label", "--max-len", "16"] if smoke else [])
        return ["train-teacher", *data, "--max-epochs", "1", "--evals-per-epoch", "1",
                "--warmup-steps", "10", "--student-validation-size", "64",
                "--student-test-size", "64", "--output-dir", str(teacher)]
    if job.startswith("student_"):
        return ["train-student", "--teacher", str(teacher), "--explainers",
                job.removeprefix("student_"), "--size", "64", "--max-epochs", "1",
                "--batch-size", "16", "--output-dir", str(workdir / job)]
    if job == "explain":
        return ["explain", "--model", str(teacher / "model"), "--explainers", "gradient",
                "integrated_gradients", "lime", "attention_all", "--output-dir",
                str(workdir / job), str(workdir / "texts.txt")]
    assert job == "faithfulness"
    return ["faithfulness", "--model", str(teacher / "model"), "--explainers", "gradient",
            "integrated_gradients", "--num-examples", "64", "--output-dir", str(workdir / job)]


def summarise(events: list[tuple[str, str, float]], wall: float) -> dict:
    """One job's numbers from its (kind, function name, seconds) compile events."""
    seconds: dict[str, float] = defaultdict(float)
    compiled: list[tuple[str, float]] = []
    for kind, name, duration in events:
        seconds[kind] += duration
        if kind == "compile":
            compiled.append((name, duration))
    compiled.sort(key=lambda item: -item[1])
    return {"wall_seconds": round(wall, 2), "programs": len(compiled),
            # most programs are single eager operations; these are the jitted jobs' own
            "programs_over_1s": sum(duration >= 1.0 for _, duration in compiled),
            **{f"{kind}_seconds": round(seconds[kind], 2) for kind in EVENTS.values()},
            "slowest": [{"name": name, "compile_seconds": round(duration, 2)}
                        for name, duration in compiled[:5]]}


def worker(job: str, workdir: Path, smoke: bool, length_multiple: int | None) -> None:
    """Run one job in this process and print its summary as the last line."""
    import jax

    events: list[tuple[str, str, float]] = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, fun_name="?", **_: events.append(
            (EVENTS[event], fun_name, duration)) if event in EVENTS else None)
    from smat.cli import main

    start = time.perf_counter()
    code = main([*job_argv(job, workdir, smoke=smoke, length_multiple=length_multiple),
                 "--no-progress", "--no-compile-cache"])
    if code:
        raise SystemExit(f"{job} failed (exit {code})")
    print(json.dumps(summarise(events, time.perf_counter() - start)))


def prepare(workdir: Path, smoke: bool) -> None:
    """The texts `explain` reads and, for a smoke run, a small generated CSV."""
    import numpy as np

    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, rng.integers(3, 20))) for _ in range(64)]
    (workdir / "texts.txt").write_text("\n".join(texts) + "\n")
    if not smoke:
        return
    rows = [(" ".join(rng.choice(WORDS, rng.integers(3, 10))), rng.integers(0, 2))
            for _ in range(400)]
    (workdir / "data.csv").write_text(
        "sentence,label\n" + "".join(f"{text},{'pos' if y else 'neg'}\n" for text, y in rows))


def table(results: dict) -> str:
    lines = ["| job | wall s | programs (>= 1 s) | compile s | trace s | lower s | "
             "slowest program |", "|---|---|---|---|---|---|---|"]
    for job, r in results["jobs"].items():
        slowest = r["slowest"][0] if r["slowest"] else {"name": "-", "compile_seconds": 0}
        lines.append(f"| {job} | {r['wall_seconds']:.1f} | {r['programs']} "
                     f"({r['programs_over_1s']}) | "
                     f"{r['compile_seconds']:.1f} | {r['trace_seconds']:.1f} | "
                     f"{r['lower_seconds']:.1f} | {slowest['name']} "
                     f"({slowest['compile_seconds']:.1f} s) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="400 generated sentences of at most 16 tokens instead of the "
                             "built-in corpus")
    parser.add_argument("--only", nargs="+", choices=JOBS, default=list(JOBS),
                        help="these jobs (the student, explain and faithfulness jobs need "
                             "the teacher job in the same --workdir)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the jobs' runs go (default: a temporary folder)")
    parser.add_argument("--output", type=Path, default=RESULT_PATH)
    parser.add_argument("--length-multiple", type=int, default=None,
                        help="every job's --length-multiple (default: each command's own, "
                             "16; the max_len gives one batch shape per program)")
    parser.add_argument("--worker", choices=JOBS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="smat_compile_time_"))
    if args.worker:
        worker(args.worker, workdir, args.smoke, args.length_multiple)
        return
    import jax

    workdir.mkdir(parents=True, exist_ok=True)
    prepare(workdir, args.smoke)
    results = {"device": str(jax.devices()[0].device_kind), "platform": jax.default_backend(),
               "machine": platform.processor() or platform.machine(),
               "data": "generated, max_len 16 (smoke)" if args.smoke else "movie-snippets",
               "length_multiple": args.length_multiple, "jobs": {}}
    for job in args.only:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", job,
                   "--workdir", str(workdir)] + (["--smoke"] if args.smoke else []) + (
                   [] if args.length_multiple is None
                   else ["--length-multiple", str(args.length_multiple)])
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
        if done.returncode:
            raise SystemExit(f"job {job} failed (exit {done.returncode}); its output is above")
        results["jobs"][job] = json.loads(done.stdout.strip().splitlines()[-1])
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(results, indent=1) + "\n")  # after every job
        print(f"{job}: {results['jobs'][job]['programs']} programs, "
              f"{results['jobs'][job]['compile_seconds']:.1f} s compiling", file=sys.stderr)
    print(table(results))
    print(f"RESULT compile_time {slowest_program(results):.2f}")


def slowest_program(results: dict) -> float:
    """The longest XLA compile of any one program in any job, in seconds (the goal:
    at most 10 s on an H100/H200)."""
    return max((r["slowest"][0]["compile_seconds"] for r in results["jobs"].values()
                if r["slowest"]), default=0.0)


if __name__ == "__main__":
    main()
