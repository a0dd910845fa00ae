"""`--share I/N`: processes split a job over a shared folder without talking to each other
(`smat simulability`: the grid's students; `smat roar`: the seeds' cells); share 0 joins
the report, equal to one process's, and a share that stopped trains only what it had not
finished."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smat.cli import main
from smat.jobs.shares import parse_share
from tests.helpers import run_and_kill

SMAT = str(Path(sys.executable).parent / "smat")
TIMEOUT = 600  # seconds a process may take; both are killed past it


def _start_shares(command: list[str], env: dict[str, str]) -> list[str]:
    """Run shares 0/2 and 1/2 of `command` at once (each killed past TIMEOUT); their output."""
    processes = [subprocess.Popen([SMAT, *command, "--share", f"{i}/2", "--join-timeout",
                                   str(TIMEOUT)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    try:
        outputs = [p.communicate(timeout=TIMEOUT)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
    assert [p.returncode for p in processes] == [0, 0], outputs
    return outputs


def _grid(teacher, output, *extra):
    return ["simulability", "--teacher", str(teacher), "--sizes", "8", "--explainers", "none",
            "attention_all", "--seeds", "1", "--batch-size", "4", "--max-epochs", "1",
            "--output-dir", str(output), "--no-progress", *extra]


def test_two_shares_split_the_grid_and_share_zero_joins_it(tiny_teacher, tmp_path, capsys,
                                                           subprocess_compile_cache):
    shared = tmp_path / "shared"
    outputs = _start_shares(_grid(tiny_teacher, shared),
                            {**os.environ, **subprocess_compile_cache})
    # each share trained its own cell, none both
    assert "share 0/2: training n8/none/seeds 0" in outputs[0]
    assert "share 1/2: training n8/attention_all/seeds 0" in outputs[1]
    assert "attention_all" not in outputs[0].split("share 0/2: training")[1].splitlines()[0]
    joined = json.loads((shared / "results.json").read_text())
    assert [(r["explainer"], r["seed"]) for r in joined] == [("none", 0), ("attention_all", 0)]

    # one process over the same grid gives the same students
    alone = tmp_path / "alone"
    assert main(_grid(tiny_teacher, alone)) == 0
    single = json.loads((alone / "results.json").read_text())
    assert [r["test"] for r in joined] == [r["test"] for r in single]
    assert (shared / "table.md").read_text() == (alone / "table.md").read_text()

    # share 1 "dies": its student is gone; share 0 alone waits, then names what to rerun
    lost = shared / "n8" / "attention_all" / "seed0" / "result.json"
    lost.unlink()
    capsys.readouterr()
    assert main(_grid(tiny_teacher, shared, "--share", "0/2", "--join-timeout", "1")) == 2
    err = capsys.readouterr().err
    assert "1 students (n8/attention_all/seeds 0) are unfinished" in err
    assert "run --share 1/2 again" in err
    kept = (shared / "n8" / "none" / "seed0" / "result.json").stat().st_mtime_ns
    # the restarted share trains only its own unfinished student; share 0 then joins
    assert main(_grid(tiny_teacher, shared, "--share", "1/2")) == 0
    assert lost.is_file()
    assert main(_grid(tiny_teacher, shared, "--share", "0/2", "--join-timeout", "1")) == 0
    assert (shared / "n8" / "none" / "seed0" / "result.json").stat().st_mtime_ns == kept
    assert json.loads((shared / "results.json").read_text())[0] == joined[0]


@pytest.mark.parametrize("text", ["2/2", "1", "a/b", "-1/2", "0/0"])
def test_a_share_outside_its_count_is_refused_by_name(text):
    with pytest.raises(ValueError, match="--share"):
        parse_share(text)
    assert parse_share("1/3") == (1, 3)


def _roar(checkpoint, data, output):
    return ["roar", "--recursive", "--explainers", "gradient", "--ratios", "0:100:50",
            "--seeds", "2", "--encoder", str(checkpoint), "--source", str(data),
            "--text-column", "sentence", "--label-column", "sentiment", "--max-len", "16",
            "--max-epochs", "1", "--batch-size", "16", "--warmup-steps", "1", "--output-dir",
            str(output), "--no-progress"]


def _cells(output: Path) -> dict[str, dict]:
    """Each ROAR cell's record but its training time."""
    return {str(path.parent.relative_to(output)): {
        k: v for k, v in json.loads(path.read_text()).items() if k != "train_seconds"}
        for path in sorted((output / "cache").rglob("result.json"))}


def test_roar_shares_split_the_seeds_a_killed_share_resumes_and_share_zero_reports(
        tiny_checkpoint, csv_data, tmp_path, subprocess_compile_cache):
    """Each share trains the 4 cells of its seed (0%, 100%, random and recursive gradient
    at 50%). Share 1 is killed (SIGKILL, as when its host is lost) as its gradient cell
    starts, while that cell's step compiles; rerun, it trains that cell alone. Share 0
    waits meanwhile, then reads share 1's cells back and writes the report: every cell and
    the report equal one process's."""
    shared = tmp_path / "shared"
    command = [SMAT, *_roar(tiny_checkpoint, csv_data, shared), "--join-timeout",
               str(TIMEOUT)]
    cached = {**os.environ, **subprocess_compile_cache}
    gradient_cells = "cache/*/*/*/gradient/recursive/seed1/*"  # data set / model / settings
    with (tmp_path / "share0.log").open("w") as log:
        zero = subprocess.Popen([*command, "--share", "0/2"], env=cached, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            # without the cache, so that the kill lands while the cell's step compiles
            run_and_kill([*command, "--share", "1/2"], timeout=TIMEOUT,
                         at=lambda: any(shared.glob(f"{gradient_cells}/train")),
                         what="the start of seed 1's gradient cell")
            (gradient,) = shared.glob(gradient_cells)
            assert not (gradient / "result.json").exists()
            (unmasked,) = shared.glob("cache/*/*/*/unmasked/roar/seed1/*/result.json")
            stamp = unmasked.stat().st_mtime_ns
            rerun = subprocess.run([*command, "--share", "1/2"], env=cached, timeout=TIMEOUT,
                                   capture_output=True, text=True)
            assert rerun.returncode == 0, rerun.stderr[-3000:]
            assert zero.wait(timeout=TIMEOUT) == 0
        finally:
            zero.kill()
            zero.wait()
    said = (tmp_path / "share0.log").read_text()
    assert "share 0/2: training the cells of seeds 0" in said, said[-3000:]
    assert ("share 1/2: the cells of seeds 1 are finished (1 trained now)"
            in rerun.stdout + rerun.stderr)
    assert unmasked.stat().st_mtime_ns == stamp  # a finished cell is not redone
    report = json.loads((shared / "roar.json").read_text())
    assert report["seeds"] == [0, 1] and report["cells_trained"] == 4  # its own seed's only

    alone = tmp_path / "alone"
    assert main(_roar(tiny_checkpoint, csv_data, alone)) == 0
    single = json.loads((alone / "roar.json").read_text())
    assert _cells(shared) == _cells(alone) and len(_cells(alone)) == 8
    assert ({k: v for k, v in report.items() if k != "cells_trained"}
            == {k: v for k, v in single.items() if k != "cells_trained"})
