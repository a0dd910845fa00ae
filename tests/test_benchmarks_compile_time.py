"""benchmarks/compile_time.py: every job's command line is one the `smat` parser takes, with
the batch-length multiple reaching each job's config, and the RESULT it prints."""

from pathlib import Path

import pytest

from smat import cli

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def compile_time(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import compile_time

    return compile_time


def test_every_job_parses_with_its_length_multiple(compile_time, tmp_path):
    parser = cli.build_parser()
    for job in compile_time.JOBS:
        values = vars(parser.parse_args(
            compile_time.job_argv(job, tmp_path, smoke=True, length_multiple=64)))
        cut = {k: v for k, v in values.items() if k.endswith(".length_multiple")}
        assert list(cut.values()) == [64], (job, cut)
        # without the option, each command keeps its own default
        values = vars(parser.parse_args(compile_time.job_argv(job, tmp_path, smoke=True)))
        assert [v for k, v in values.items() if k.endswith(".length_multiple")] == [16], job


def test_result_is_the_slowest_program_of_any_job(compile_time):
    results = {"jobs": {
        "teacher": compile_time.summarise(
            [("compile", "jit(step)", 27.9), ("compile", "jit(batch_logits)", 17.0),
             ("trace", "jit(step)", 40.0)], wall=80.0),
        "explain": compile_time.summarise([("compile", "jit(ig)", 31.5)], wall=40.0),
        "empty": compile_time.summarise([], wall=1.0)}}
    assert results["jobs"]["teacher"]["programs"] == 2
    assert results["jobs"]["teacher"]["trace_seconds"] == 40.0
    assert compile_time.slowest_program(results) == 31.5  # compile only, not tracing
