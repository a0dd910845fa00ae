"""Tests for scripts/evidence_queue.py: the plan, its status, and that a committed cell is
never trained again."""

import importlib.util
import json
import os
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # as when the script runs: docs_tables beside it
_SPEC = importlib.util.spec_from_file_location("evidence_queue",
                                               SCRIPTS / "evidence_queue.py")
queue = importlib.util.module_from_spec(_SPEC)
sys.modules["evidence_queue"] = queue  # its dataclass looks its module up
_SPEC.loader.exec_module(queue)


def test_the_plan_pairs_every_setting_with_smat_seed_by_seed_under_one_teacher():
    cells = queue.plan()
    assert len({cell.name for cell in cells}) == len(cells)
    first = [c for c in cells if c.teacher_seed == 0 and c.size == 500]
    arms = {c.arm for c in first}
    assert {"none", "attention_all", "smat", "smat_frozen", "random_heads", "layer3",
            "smat_pool_outer", "gradient", "integrated_gradients", "label_leak",
            "label_leak_shuffled_text", "smat_frozen_shuffled_text",
            "smat_swapped_same_label", "attention_all_swapped_same_label"} <= arms
    for arm in arms:
        assert sorted(c.seed for c in first if c.arm == arm) == [0, 1, 2, 3, 4]
    # a control trains apart from the plain students, told its explanation source; frozen
    # coefficients come from the plain SMaT student
    control = next(c for c in first if c.arm == "smat_frozen_shuffled_text")
    assert control.needs == queue.Cell(0, 500, "smat", control.seed)
    assert control.output != control.needs.output
    args = control.driver_args("abc")
    assert args[args.index("--explanation-source") + 1] == "shuffled_text"
    assert str(queue.destination(control, "abc")).endswith(
        "n500/teacher_abc/smat_frozen_shuffled_text_seed" + str(control.seed))
    # an ablation of SMaT's coefficients comes after the SMaT student it reads
    order = {cell.name: i for i, cell in enumerate(cells)}
    for cell in cells:
        if cell.needs is not None:
            assert order[cell.needs.name] < order[cell.name]
            assert "--smat-cells" in cell.driver_args("abc")


def test_status_says_done_running_or_waiting(tmp_path, monkeypatch):
    monkeypatch.setattr(queue, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(queue, "RUNNING", tmp_path / "running.json")
    fingerprints = {0: "f00d", 1: None, 2: None}
    monkeypatch.setattr(queue, "teacher_fingerprint", lambda seed: fingerprints[seed])
    cells = [queue.Cell(0, 500, "smat", 0), queue.Cell(0, 500, "none", 0),
             queue.Cell(0, 500, "attention_all", 0), queue.Cell(1, 500, "smat", 0)]
    done = queue.destination(cells[0], "f00d").with_suffix(".json")
    done.parent.mkdir(parents=True)
    done.write_text("{}")
    (tmp_path / "running.json").write_text(json.dumps({"cell": cells[1].name,
                                                       "pid": os.getpid()}))
    assert [state for _, state in queue.status(cells)] == [
        "done (f00d)", "running", "waiting", "waiting (teacher not trained here)"]
    # a cell committed under another teacher's weights is not this machine's
    fingerprints[0] = "beef"
    assert queue.status(cells)[0][1] == "waiting"


def test_a_committed_cell_is_never_trained_again(tmp_path, monkeypatch):
    monkeypatch.setattr(queue, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(queue, "teacher_fingerprint", lambda seed: "f00d")
    cell = queue.Cell(0, 500, "none", 3)
    path = queue.destination(cell, "f00d").with_suffix(".json")
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    trained = []
    monkeypatch.setattr(queue, "run_driver", lambda *args, **kwargs: trained.append(args))
    queue.run([cell], data_dir="data", limit_kb=1)
    assert trained == []


def test_a_second_queue_is_refused_while_one_runs(tmp_path, monkeypatch, capsys):
    import fcntl

    import pytest

    monkeypatch.setattr(queue, "LOCK", tmp_path / "queue.lock")
    monkeypatch.setattr(queue, "run", lambda *args, **kwargs: None)
    with (tmp_path / "queue.lock").open("w") as held:  # the queue already running
        held.write("4242")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SystemExit, match="another evidence queue is running \\(pid 4242\\)"):
            queue.main(["run"])
    queue.main(["run"])  # once it has ended, the next one starts
    assert (tmp_path / "queue.lock").read_text() == str(os.getpid())


def test_a_committed_cell_regenerates_the_tables_of_pages_nobody_is_editing(
        tmp_path, monkeypatch, capsys):
    """The queue rewrites the result tables a new cell changes and commits those pages, but
    leaves a page with uncommitted edits alone (and says so)."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    marked = "<!-- table: cells -->\nold\n<!-- /table -->\n"
    clean, edited = tmp_path / "clean.md", tmp_path / "edited.md"
    for page in (clean, edited):
        page.write_text(marked)
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "pages")
    edited.write_text("a sentence being written\n" + marked)
    monkeypatch.setattr(queue, "ROOT", tmp_path)
    monkeypatch.setattr(queue.docs_tables, "PAGES", (clean, edited))
    monkeypatch.setattr(queue.docs_tables, "TABLES", {"cells": lambda: "new\n"})
    assert queue.regenerated_pages() == [clean]
    assert clean.read_text() == marked.replace("old", "new")
    assert "old" in edited.read_text()
    assert "edited.md has uncommitted edits" in capsys.readouterr().out
