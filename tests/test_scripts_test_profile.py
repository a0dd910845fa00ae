"""Tests for scripts/test_profile.py: the summary of a profiled test run."""

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "test_profile", Path(__file__).resolve().parents[1] / "scripts" / "test_profile.py")
test_profile = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(test_profile)


def test_report_splits_each_module_into_compile_and_the_rest(tmp_path):
    rows = [{"test": "tests/test_a.py::one", "seconds": 10.0, "trace": 1.0, "lower": 1.0,
             "compile": 6.0},
            {"test": "tests/test_a.py::two", "seconds": 2.0, "freed": 1.0},
            {"test": "tests/test_b.py::three", "seconds": 4.0, "compile": 1.0}]
    (tmp_path / "gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (tmp_path / "gw1.jsonl").write_text(json.dumps(rows[2]) + "\n")
    text = test_profile.report(test_profile.load(tmp_path))
    assert text.startswith("3 tests, 0.3 min of test time summed over workers, 0.1 min of it "
                           "(56%) tracing")  # 9 of 16 s
    assert "compiled programs freed 1 times." in text
    assert "| tests/test_a.py | 2 | 12 | 8 | 67 |" in text
    assert text.index("tests/test_a.py::one") < text.index("tests/test_b.py::three")
    with pytest.raises(SystemExit, match="holds no test records"):
        test_profile.load(tmp_path / "empty")


def test_first_line_gives_the_wall_time_and_the_machines_matmul_rate(tmp_path, monkeypatch):
    (tmp_path / "gw0.jsonl").write_text(json.dumps({"test": "tests/test_a.py::one",
                                                    "seconds": 60.0}) + "\n")
    assert test_profile.machine_line(tmp_path, 1) == ""  # not written by `make test`
    (tmp_path / "started").write_text("1000\n")
    (tmp_path / "matmul.json").write_text('{"gflops": 126.4}\n')
    monkeypatch.setattr(test_profile.time, "time", lambda: 1000.0 + 90 * 60)
    line = test_profile.machine_line(tmp_path, 1)
    assert line == ("1 tests in 90.0 min of wall time on a machine whose float32 matmul "
                    "(2048 x 2048, XLA) runs at 126 GFLOP/s; ")
    text = test_profile.report(test_profile.load(tmp_path), machine=line)
    assert text.startswith(line + "1 tests, 1.0 min of test time summed over workers")


def test_programs_table_sums_each_program_over_the_tests_that_compiled_it(tmp_path):
    rows = [{"test": "tests/test_a.py::one", "seconds": 9.0,
             "programs": {"jit(step)": [2, 5.0], "jit(add)": [1, 0.5]}},
            {"test": "tests/test_a.py::two", "seconds": 3.0, "programs": {"jit(step)": [1, 2.0]}},
            {"test": "tests/test_b.py::old", "seconds": 1.0}]  # written without names
    (tmp_path / "gw0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = test_profile.report(test_profile.load(tmp_path))
    assert "4 compiles of 2 program names, 0.1 min of lowering + XLA compile." in text
    assert "| `jit(step)` | 3 | 7.0 | 2 |" in text
    assert text.index("`jit(step)`") < text.index("`jit(add)`")
    assert test_profile.programs_table(rows[2:], top=5) == []
