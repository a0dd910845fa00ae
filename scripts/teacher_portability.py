"""Which XLA CPU flags, if any, make a teacher's weights the same on every kind of machine.

Students pair only under one teacher, and the SST-2 teacher trained on machines
of different instruction sets came out with different weights (the float summation order
differs). This trains the smoke variant's teacher (``smat_table1.py --variant smoke
--teacher-only``, about a minute on 2 cores) once per flag set below, records each weights
fingerprint in ``docs/results/teacher_portability/<machine>.json`` (one file per CPU model
and instruction set), and prints, for every flag set, the fingerprints of all machines
recorded so far and whether they agree. A flag set on which all machines agree is the one
to train a shared teacher with.

    python scripts/teacher_portability.py            # probe this machine, then compare
    python scripts/teacher_portability.py --compare  # only compare the recorded machines
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "teacher_portability"
# From the machine's own default to the most constrained: the instruction set the generated
# code may use, and whether Eigen splits a contraction over threads (both change the
# summation order on one machine, see CHANGELOG).
FLAG_SETS = (
    "",
    "--xla_cpu_multi_thread_eigen=false",
    "--xla_cpu_max_isa=AVX2",
    "--xla_cpu_max_isa=AVX2 --xla_cpu_multi_thread_eigen=false",
    "--xla_cpu_max_isa=AVX2 --xla_cpu_multi_thread_eigen=false --xla_cpu_use_xnnpack=false",
    "--xla_cpu_max_isa=SSE4_2 --xla_cpu_multi_thread_eigen=false",
)
_WEIGHTS = re.compile(r"weights ([0-9a-f]{16})\s*$")


def machine() -> dict:
    """This CPU's model name, family/model/stepping numbers and the vector instruction sets
    it reports (Linux): two virtual machines may share a model name and differ in these."""
    text = Path("/proc/cpuinfo").read_text()

    def field(name: str) -> str:
        found = re.search(rf"^{name}\s*:\s*(.+)$", text, re.M)
        return found.group(1).strip() if found else "unknown"

    isa = sorted(f for f in field("flags").split()
                 if f.startswith(("avx", "sse", "fma", "amx")))
    return {"model": field("model name"), "isa": isa, "cores": os.cpu_count(),
            "family_model_stepping": "/".join(field(name) for name in
                                               ("cpu family", "model", "stepping"))}


def machine_key(info: dict) -> str:
    """A file name for one kind of machine: its model name and a digest of its numbers and
    instruction sets."""
    digest = hashlib.sha256((info["family_model_stepping"] + " " + " ".join(info["isa"]))
                            .encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9]+", "_", info["model"]).strip("_") + "_" + digest


def weights_fingerprint(output: str) -> str:
    """The fingerprint that ``smat_table1.py --teacher-only`` prints on its last line."""
    lines = output.strip().splitlines()
    found = _WEIGHTS.search(lines[-1]) if lines else None
    if not found:
        raise ValueError(f"no weights fingerprint in the teacher's output: {output[-500:]!r}")
    return found.group(1)


def probe(flags: str, python: str) -> str:
    """Train the smoke teacher under `flags` (added to XLA_FLAGS) in a scratch folder."""
    env = {**os.environ, "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [python, "experiments/smat_table1.py", "--variant", "smoke", "--teacher-only",
             "--output-dir", scratch, "--no-progress"],
            cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the smoke teacher failed under XLA_FLAGS={flags!r}:\n"
                         f"{done.stderr[-2000:]}")
    return weights_fingerprint(done.stdout)


def comparison(records: dict[str, dict]) -> str:
    """A markdown table: one row per flag set, one column per machine, and whether the
    machines that probed it agree."""
    keys = sorted(records)
    lines = ["| XLA_FLAGS | " + " | ".join(keys) + " | machines agree |",
             "|---|" + "---|" * (len(keys) + 1)]
    for flags in FLAG_SETS:
        prints = [records[key]["weights"].get(flags) for key in keys]
        known = {p for p in prints if p}
        verdict = ("only one machine" if sum(map(bool, prints)) < 2
                   else "yes" if len(known) == 1 else "no")
        lines.append(f"| `{flags or '(default)'}` | "
                     + " | ".join(p or "–" for p in prints) + f" | {verdict} |")
    return "\n".join(lines)


def load_records(folder: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="store_true",
                        help="only print the comparison of the machines recorded so far")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the teacher (default this one)")
    args = parser.parse_args(argv)
    if not args.compare:
        info = machine()
        path = RESULTS / f"{machine_key(info)}.json"
        record = json.loads(path.read_text()) if path.exists() else {**info, "weights": {}}
        for flags in FLAG_SETS:
            if flags not in record["weights"]:
                record["weights"][flags] = probe(flags, args.python)
                print(f"XLA_FLAGS={flags!r}: weights {record['weights'][flags]}", flush=True)
                RESULTS.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record, indent=1) + "\n")
    print(comparison(load_records(RESULTS)))


if __name__ == "__main__":
    main()
