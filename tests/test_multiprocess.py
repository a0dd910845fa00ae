"""Two real JAX processes on localhost (gloo collectives over a coordinator on a free port),
each with 2 CPU devices, forming one 4-device mesh: a teacher trained data-parallel over
it equals the one-process run over 4 devices, and its model loads in one process.

The processes are `smat` commands as a user would start them on two hosts
(``--coordinator``, ``--num-processes``, ``--process-id``); ``--devices 4`` exists only in
the joined mesh (each process alone has 2 devices), so a run whose processes did not join
fails instead of passing as two independent runs.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

pytestmark = pytest.mark.multidevice

TIMEOUT = 300  # seconds a process may take; both are killed past it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


SMAT = str(Path(sys.executable).parent / "smat")


def _run_processes(commands: list[list[str]], devices: int, tmp_path: Path) -> list[str]:
    """Start every command at once, each with `devices` CPU devices; their outputs. Any
    that fails or outlives TIMEOUT ends all of them and the test."""
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    logs = [tmp_path / f"process{i}.log" for i in range(len(commands))]
    files = [log.open("w") for log in logs]
    processes = [subprocess.Popen(command, env=env, stdout=file, stderr=subprocess.STDOUT)
                 for command, file in zip(commands, files, strict=True)]
    try:
        codes = [p.wait(timeout=TIMEOUT) for p in processes]
    finally:
        for p, file in zip(processes, files, strict=True):
            p.kill()
            p.wait()
            file.close()
    outputs = [log.read_text(errors="replace") for log in logs]
    for code, output in zip(codes, outputs, strict=True):
        assert code == 0, output[-3000:]
    return outputs


def _params(folder: Path) -> list[np.ndarray]:
    from smat.models import functional
    from smat.store.model_store import load

    return [np.asarray(leaf) for leaf in
            jax.tree.leaves(functional.split(load(folder / "model").model)[1])]


def test_a_teacher_trained_over_two_processes_equals_one_process(tiny_teacher_args,
                                                                 tmp_path):
    args = [a for a in tiny_teacher_args if a != "--no-progress"]
    common = ["train-teacher", *args, "--no-progress", "--no-compile-cache",
              "--max-epochs", "1", "--devices", "4"]
    port = _free_port()
    _run_processes([[SMAT, *common, "--output-dir",
                     str(tmp_path / "two"), "--coordinator", f"localhost:{port}",
                     "--num-processes", "2", "--process-id", str(i)] for i in (0, 1)],
                   devices=2, tmp_path=tmp_path)
    _run_processes([[SMAT, *common, "--output-dir",
                     str(tmp_path / "one")]], devices=4, tmp_path=tmp_path)
    two, one = _params(tmp_path / "two"), _params(tmp_path / "one")
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(two, one, strict=True)) < 1e-5
    # process 0 alone logged the metrics: one line per evaluation, as in one process
    lines = {name: (tmp_path / name / "checkpoints" / "metrics.jsonl").read_text().splitlines()
             for name in ("two", "one")}
    assert len(lines["two"]) == len(lines["one"])
    # the finished run kept no resumable state, removed once by process 0
    assert not (tmp_path / "two" / "checkpoints" / "last").exists()


def test_two_processes_that_do_not_join_cannot_claim_the_joined_mesh(tiny_teacher_args,
                                                                     tmp_path):
    """The check the test above rests on: without the coordinator a process has its own 2
    devices, and `--devices 4` is refused."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    result = subprocess.run([SMAT, "train-teacher",
                             *tiny_teacher_args, "--devices", "4", "--output-dir",
                             str(tmp_path / "alone")], env=env, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert result.returncode != 0
    assert "devices" in result.stderr
