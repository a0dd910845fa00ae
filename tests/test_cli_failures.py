"""Tests for smat.cli.failures: how a command that cannot finish ends."""

import json
import signal

import jax.numpy as jnp
import pytest

from smat.cli.failures import (
    INPUT_ERROR,
    INTERNAL_ERROR,
    INTERRUPTED,
    CommandEnded,
    raised_by_check,
    reported_failures,
)
from smat.training import loop


def _ended(capsys, failing, **options):
    with pytest.raises(CommandEnded) as ended, reported_failures("smat x", **options):
        failing()
    return ended.value.code, capsys.readouterr().err


def test_smats_own_check_ends_in_one_line_with_exit_2(capsys):
    def refused():
        loop.check_seeds([0, 0], 2)  # a smat input check

    code, err = _ended(capsys, refused, rewrite=str.upper)
    assert code == INPUT_ERROR and err.startswith("smat x: error: ") and "Traceback" not in err
    assert err.strip() == err.strip().splitlines()[0]  # one line
    assert "SEEDS" in err  # the message went through `rewrite`


def test_a_missing_file_is_an_input_error_wherever_it_was_opened(tmp_path, capsys):
    # Path.read_text raises inside pathlib, not in smat: still the user's file
    code, err = _ended(capsys, lambda: (tmp_path / "none.json").read_text())
    assert code == INPUT_ERROR and "none.json" in err and "Traceback" not in err


@pytest.mark.parametrize("bug", [
    lambda: jnp.ones(3) + jnp.ones(4),  # TypeError raised inside jax
    lambda: json.loads("{"),  # ValueError raised inside json
], ids=["jax", "json"])
def test_an_error_raised_inside_a_library_keeps_its_traceback(bug, capsys):
    code, err = _ended(capsys, bug)
    assert code == INTERNAL_ERROR and "Traceback (most recent call last)" in err
    assert "smat x: internal error" in err and "not by one of smat's input checks" in err
    assert ("inside jax" in err) or ("inside json" in err)


def test_a_drivers_folder_counts_as_checks_when_named(tmp_path, capsys):
    driver = tmp_path / "driver.py"
    driver.write_text("def check():\n    raise ValueError('--size must be positive')\n")
    namespace = {}
    exec(compile(driver.read_text(), str(driver), "exec"), namespace)
    code, err = _ended(capsys, namespace["check"])
    assert code == INTERNAL_ERROR  # not smat's code: a traceback
    code, err = _ended(capsys, namespace["check"], code_folders=(tmp_path,))
    assert code == INPUT_ERROR and err == "smat x: error: --size must be positive\n"


def test_ctrl_c_ends_in_one_line_saying_what_is_kept(capsys):
    def interrupted():
        # inside, Ctrl-C stops training loops before their next step
        assert signal.getsignal(signal.SIGINT) is loop._interrupt
        raise KeyboardInterrupt

    code, err = _ended(capsys, interrupted, kept="; finished work is kept")
    assert code == INTERRUPTED and err == "\nsmat x: interrupted; finished work is kept\n"
    assert signal.getsignal(signal.SIGINT) is not loop._interrupt


def test_other_exceptions_pass_through_untouched():
    with pytest.raises(RuntimeError, match="a bug"), reported_failures("smat x"):
        raise RuntimeError("a bug")


def test_raised_by_check_looks_at_the_innermost_frame():
    try:
        loop.check_seeds([0, 0], 2)
    except ValueError as error:
        assert raised_by_check(error)
    try:
        jnp.ones(3) + jnp.ones(4)
    except TypeError as error:
        assert not raised_by_check(error)
