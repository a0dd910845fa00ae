"""Long jobs resume after a SIGKILL that lands while a program is compiling.

Each job runs as the `smat` command in a subprocess, is killed at a chosen point (the
moment a given cell starts training, i.e. while its step compiles, before any checkpoint),
is rerun to the end, and must then equal an uninterrupted run of the same command, without
redoing the cells that had finished before the kill.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import run_and_kill

TIMEOUT = 600


def _smat(*args: str) -> list[str]:
    return [sys.executable, "-m", "smat.cli", *args]


def _run(command: list[str], cache: dict[str, str]) -> None:
    """Run `command` to the end with the persistent compilation cache `cache` (environment
    variables): the uninterrupted run fills it and the resumed run loads from it, while
    the run that is killed compiles, so the kill lands while a program compiles."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **cache})
    assert done.returncode == 0, done.stderr[-3000:]


def _started_training(cell: Path) -> Callable[[], bool]:
    """The cell's training loop has made its folder: its first step is being compiled."""
    return cell.is_dir


def _results(folder: Path) -> dict[str, dict]:
    """Every result.json under `folder` without wall times, by relative path."""
    results = {}
    for path in sorted(folder.rglob("result.json")):
        record = json.loads(path.read_text())
        results[str(path.relative_to(folder))] = {
            k: v for k, v in record.items() if "seconds" not in k and k != "output_dir"}
    return results


def _killed_then_resumed(command: Callable[[Path], list[str]], tmp_path: Path,
                         cache: dict[str, str], *, cell: str,
                         finished_before: str) -> tuple[dict, dict]:
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    _run(command(reference), cache)
    run_and_kill(command(resumed), at=_started_training(resumed / cell),
                 what=f"the start of {cell}", timeout=TIMEOUT)
    assert not (resumed / cell / "last").exists(), "killed after the first checkpoint"
    assert not (resumed / cell / "result.json").exists()
    finished = resumed / finished_before / "result.json"
    stamp = finished.stat().st_mtime_ns
    _run(command(resumed), cache)
    assert finished.stat().st_mtime_ns == stamp, f"{finished_before} was redone"
    return _results(reference), _results(resumed)


@pytest.mark.slow  # tests/test_jobs_shares.py kills and resumes `smat roar` in the default suite
def test_simulability_grid_resumes_after_kill_during_compilation(tiny_teacher, tmp_path,
                                                                 subprocess_compile_cache):
    def command(folder: Path) -> list[str]:
        return _smat("simulability", "--teacher", str(tiny_teacher), "--sizes", "32",
                     "--seeds", "1", "--explainers", "none", "smat", "--batch-size", "16",
                     "--max-epochs", "1", "--output-dir", str(folder), "--no-progress")

    reference, resumed = _killed_then_resumed(command, tmp_path, subprocess_compile_cache,
                                              cell="n32/smat/seed0",
                                              finished_before="n32/none/seed0")
    assert len(reference) == 2 and resumed == reference


@pytest.mark.slow  # tests/test_jobs_shares.py kills and resumes `smat roar` in the default suite
def test_demo_resumes_after_kill_during_compilation(tiny_teacher, tmp_path,
                                                    subprocess_compile_cache):
    def command(folder: Path) -> list[str]:
        return _smat("demo", "--teacher", str(tiny_teacher), "--size", "32",
                     "--seeds", "1", "--output-dir", str(folder), "--no-progress")

    reference, resumed = _killed_then_resumed(
        command, tmp_path, subprocess_compile_cache, cell="students/n32/smat/seed0",
        finished_before="students/n32/attention_all/seed0")
    assert len(reference) == 3 and resumed == reference
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    expected = json.loads((tmp_path / "reference" / "summary.json").read_text())
    assert summary["table"] == expected["table"]
