"""The queue of SST-2 cells behind "what makes SMaT teach": one student per call, committed.

Every cell is one call of ``experiments/smat_table1.py --variant sst2`` at the reference's
time scale (SGD 5e-3, batch 32, patience 10, outer Adam 5e-4, the meta step every step, one
shared student initialisation) that trains one seed of one setting, so a machine that is
lent for a few hours loses at most the student it was training. A student pairs only with
students of the same teacher weights (a teacher retrained on another kind of CPU has other
weights), so each finished cell goes to

    docs/results/smat_table1_sst2/n<size>/teacher_<weights fingerprint>/<setting>_seed<s>.json

(and ``.md``) and is committed; a cell whose file exists for this machine's teacher is done
and never trained again. Cells run in the order of :func:`plan`: the first teacher's
none / attention_all / SMaT students seed by seed, then the settings that need them.

    python scripts/evidence_queue.py status      # every planned cell: done / running / waiting
    python scripts/evidence_queue.py run         # train the waiting cells one after another
    touch runs/evidence_pause                    # interrupt the running cell (it checkpoints)
                                                 # and wait until the file is removed

A cell's process is interrupted (SIGINT: it checkpoints its running step) and restarted when
its resident memory passes ``--limit-gb`` (the student process grows between evaluations); a
cell that fails three times without being interrupted stops the queue. After each committed
cell the queue starts afresh, so that cells planned since are picked up.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import docs_tables  # beside this file

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results" / "smat_table1_sst2"
RUNS = ROOT / "runs" / "smat_evidence_sst2"
PAUSE = ROOT / "runs" / "evidence_pause"
LOCK = ROOT / "runs" / "evidence_queue.lock"
RUNNING = RUNS / "running.json"
DRIVER = ROOT / "experiments" / "smat_table1.py"
SEEDS = (0, 1, 2, 3, 4)
TEACHER_SEEDS = (0, 1, 2)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One student: a setting of the Table 1 driver at one size and seed, of one teacher."""

    teacher_seed: int
    size: int
    setting: str
    seed: int
    source: str = "text"  # what the teacher explains (the controls' --explanation-source)

    @property
    def arm(self) -> str:
        """The setting, and the explanation source when it is not the row's own text."""
        return self.setting + ("" if self.source == "text" else f"_{self.source}")

    @property
    def name(self) -> str:
        return f"teacher{self.teacher_seed}/n{self.size}/{self.arm}_seed{self.seed}"

    @property
    def needs(self) -> Cell | None:
        """The cell whose SMaT student this one's coefficients come from."""
        return (dataclasses.replace(self, setting="smat", source="text")
                if self.setting in FROM_SMAT else None)

    @property
    def output(self) -> Path:
        """The driver's folder (one per teacher and explanation source)."""
        return RUNS / (f"teacher{self.teacher_seed}_students"
                       + ("" if self.source == "text" else f"_{self.source}"))

    def driver_args(self, fingerprint: str) -> list[str]:
        args = ["--explainers", self.setting, "--sizes", str(self.size),
                "--seeds", str(self.seed)]
        if self.source != "text":
            args += ["--explanation-source", self.source]
        if self.needs is not None:
            args += ["--smat-cells", str(destination(self.needs, fingerprint).with_suffix(
                ".json"))]
        return args


FROM_SMAT = ("smat_frozen", "random_heads")
LAYERS = tuple(f"layer{k}" for k in range(6))
# The leakage controls (setting, explanation source): the positive control, an explainer
# whose mass encodes only the teacher's class, on the text and on shuffled text (a probe and
# the shuffled-text students must both see it); SMaT's coefficients frozen on shuffled text
# (the same heads, the text taken away); SMaT and static attention with the explanations of
# other rows of the same teacher class (what the mass says about the class kept, what it
# says about the row's words taken away).
CONTROLS = (("label_leak", "text"), ("label_leak", "shuffled_text"),
            ("smat_frozen", "shuffled_text"), ("smat", "swapped_same_label"),
            ("attention_all", "swapped_same_label"))


def plan() -> list[Cell]:
    """Every planned cell, in the order they train: the first teacher's Table 1 core at
    n=500, the ablations of SMaT's gain, the leakage controls, the single layers, the rest
    of Table 1 and Table 7, two more teachers, then the first teacher's Table 1 at
    n=1000."""
    cells = [Cell(0, 500, setting, seed) for seed in SEEDS
             for setting in ("smat", "attention_all", "none")]
    cells += [Cell(0, 500, setting, seed) for setting in (*FROM_SMAT, "smat_pool_outer")
              for seed in SEEDS]
    cells += [Cell(0, 500, setting, seed, source) for setting, source in CONTROLS
              for seed in SEEDS]
    cells += [Cell(0, 500, setting, seed) for setting in LAYERS for seed in SEEDS]
    cells += [Cell(0, 500, setting, seed)
              for setting in ("gradient", "attention_last", "input_x_gradient",
                              "integrated_gradients", "smat_softmax", "smat_entmax15")
              for seed in SEEDS]
    cells += [Cell(teacher, 500, setting, seed) for teacher in TEACHER_SEEDS[1:]
              for seed in SEEDS for setting in ("smat", "attention_all", "none")]
    cells += [Cell(0, 1000, setting, seed) for seed in SEEDS
              for setting in ("smat", "attention_all", "none")]
    cells += [Cell(0, 1000, setting, seed)
              for setting in ("gradient", "attention_last", "input_x_gradient",
                              "integrated_gradients") for seed in SEEDS]
    return cells


def teacher_dir(teacher_seed: int) -> Path:
    return RUNS / f"teacher{teacher_seed}"


def teacher_fingerprint(teacher_seed: int) -> str | None:
    """The weights fingerprint of this machine's finished teacher (None before it is
    trained)."""
    model = teacher_dir(teacher_seed) / "model"
    if not (teacher_dir(teacher_seed) / "result.json").is_file():
        return None
    from smat.store.model_store import saved_params_fingerprint
    return saved_params_fingerprint(model)


def destination(cell: Cell, fingerprint: str) -> Path:
    return RESULTS / f"n{cell.size}" / f"teacher_{fingerprint}" / f"{cell.arm}_seed{cell.seed}"


def running_cell() -> str | None:
    """The cell a live queue process is training, if any."""
    if not RUNNING.is_file():
        return None
    state = json.loads(RUNNING.read_text())
    try:
        os.kill(state["pid"], 0)
    except OSError:
        return None
    return state["cell"]


def status(cells: Sequence[Cell]) -> list[tuple[str, str]]:
    """(cell, state) for every cell: done (its file is committed for this machine's teacher),
    running, or waiting (with the teacher's weights when they are known)."""
    fingerprints = {seed: teacher_fingerprint(seed) for seed in {c.teacher_seed for c in cells}}
    current = running_cell()
    rows = []
    for cell in cells:
        fingerprint = fingerprints[cell.teacher_seed]
        if fingerprint is not None and destination(cell, fingerprint).with_suffix(
                ".json").is_file():
            state = f"done ({fingerprint})"
        elif cell.name == current:
            state = "running"
        else:
            state = "waiting" + ("" if fingerprint else " (teacher not trained here)")
        rows.append((cell.name, state))
    return rows


def run_driver(name: str, args: Sequence[str], *, output: Path, data_dir: str,
               limit_kb: int) -> None:
    """Run the driver until it exits 0, restarting it after an interruption (memory, pause).

    Raises:
      SystemExit: three failures that were not interruptions.
    """
    failures = 0
    while True:
        while PAUSE.exists():
            time.sleep(30)
        command = [sys.executable, str(DRIVER), "--variant", "sst2", "--data-dir", data_dir,
                   "--output-dir", str(output), "--no-progress", *args]
        process = subprocess.Popen(command, cwd=ROOT,
                                   env={**os.environ, "MALLOC_ARENA_MAX": "2"})
        RUNNING.parent.mkdir(parents=True, exist_ok=True)
        RUNNING.write_text(json.dumps({"cell": name, "pid": os.getpid()}))
        interrupted = False
        while process.poll() is None:
            resident = _resident_kb(process.pid)
            if not interrupted and (PAUSE.exists() or resident > limit_kb):
                print(f"{_now()} {name}: interrupting (resident {resident} kB)", flush=True)
                interrupted = True
                process.send_signal(signal.SIGINT)  # once: it checkpoints and exits
            time.sleep(20)
        if process.returncode == 0:
            return
        if not interrupted:
            failures += 1
            print(f"{_now()} {name}: exit {process.returncode} ({failures} failures)",
                  flush=True)
            if failures >= 3:
                raise SystemExit(f"{name}: failed three times; stopping the queue")


def _resident_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def commit(files: Sequence[Path], message: str) -> None:
    subprocess.run(["git", "add", *map(str, files)], cwd=ROOT, check=True)
    subprocess.run(["git", "commit", "-q", "-m", message, "--", *map(str, files)], cwd=ROOT,
                   check=True)


def regenerated_pages() -> list[Path]:
    """The pages whose result tables a new cell changed, rewritten (scripts/docs_tables.py);
    a page with uncommitted edits is left alone and named, so that the queue never commits
    someone's unfinished text."""
    pages = []
    for page in docs_tables.PAGES:
        edited = subprocess.run(["git", "diff", "--quiet", "--", str(page)], cwd=ROOT).returncode
        if edited:
            print(f"{_now()} {page.relative_to(ROOT)} has uncommitted edits: its tables are "
                  "not regenerated (run scripts/docs_tables.py --write)", flush=True)
        elif docs_tables.rewrite(page):
            pages.append(page)
    return pages


def run(cells: Sequence[Cell], *, data_dir: str, limit_kb: int) -> None:
    """Train every waiting cell in order (each teacher first, when its first cell comes)."""
    for cell in cells:
        if PAUSE.exists():
            print(f"{_now()} paused (remove {PAUSE.relative_to(ROOT)} to go on)", flush=True)
        teacher = teacher_dir(cell.teacher_seed)
        if teacher_fingerprint(cell.teacher_seed) is None:
            run_driver(f"teacher{cell.teacher_seed}",
                       ["--teacher", str(teacher), "--teacher-seed", str(cell.teacher_seed),
                        "--teacher-only"],
                       output=RUNS / f"teacher{cell.teacher_seed}_students", data_dir=data_dir,
                       limit_kb=limit_kb)
        fingerprint = teacher_fingerprint(cell.teacher_seed)
        dest = destination(cell, fingerprint)
        if dest.with_suffix(".json").is_file():
            continue
        if cell.needs and not destination(cell.needs, fingerprint).with_suffix(
                ".json").is_file():
            print(f"{_now()} {cell.name}: waits for {cell.needs.name}", flush=True)
            continue
        output = cell.output
        run_driver(cell.name, ["--teacher", str(teacher), *cell.driver_args(fingerprint)],
                   output=output, data_dir=data_dir, limit_kb=limit_kb)
        results = json.loads((output / "results.json").read_text())
        learned = {record["teacher_params"] for record in results["records"]}
        if learned != {fingerprint}:
            raise SystemExit(f"{cell.name}: its students learned from teacher weights "
                             f"{sorted(learned)}, not {fingerprint}; stopping the queue")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.with_suffix(".json").write_text((output / "results.json").read_text())
        dest.with_suffix(".md").write_text((output / "table.md").read_text())
        commit([dest.with_suffix(".json"), dest.with_suffix(".md"), *regenerated_pages()],
               f"SST-2 cell {dest.relative_to(RESULTS)}")
        print(f"{_now()} {dest.relative_to(ROOT)}: committed", flush=True)
        # start afresh, so that cells planned (or code changed) since are picked up
        os.execv(sys.executable, [sys.executable, __file__, *sys.argv[1:]])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("status", "run"))
    parser.add_argument("--data-dir", default=os.environ.get("SST2_DIR", "data/sst2_glue"),
                        help="GLUE SST-2's folder (train.tsv, dev.tsv, test-labeled.tsv)")
    parser.add_argument("--limit-gb", type=float, default=14.0,
                        help="restart a cell whose process holds more resident memory")
    args = parser.parse_args(argv)
    cells = plan()
    if args.command == "status":
        rows = status(cells)
        width = max(len(name) for name, _ in rows)
        for name, state in rows:
            print(f"{name:<{width}}  {state}")
        done = sum(state.startswith("done") for _, state in rows)
        print(f"{done} of {len(rows)} cells done")
        return
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a+") as lock:
        try:  # two queues would train the same cell into the same folders
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise SystemExit(f"another evidence queue is running (pid {lock.read().strip()}); "
                             f"pause it with `touch {PAUSE}`") from None
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        run(cells, data_dir=args.data_dir, limit_kb=int(args.limit_gb * 1e6))


if __name__ == "__main__":
    main()
