"""How a command that cannot finish ends: the `smat` command's and the experiment drivers'.

smat's input checks raise ValueError (a refused value), FileNotFoundError (a missing file)
or TypeError (a value of the wrong kind) with a message that names the flag, file or row;
a share of a split run that waited too long for the others raises TimeoutError naming what
to rerun (:func:`smat.jobs.shares.wait_for`). Inside :func:`reported_failures` such an
error ends the command with that message on one line and exit status 2, no traceback. One
of these raised inside another library (JAX, NumPy, ...) is not one of those checks but a
bug, or an input smat does not check yet: it keeps its traceback, followed by one line
saying so, and exits with 1. Ctrl-C lets a training loop finish and checkpoint its running step
(:func:`~smat.training.loop.stop_on_interrupt`) and ends with one line saying what is kept,
exit status 130 (the shell's). A warning of smat's prints as one line naming the command,
not smat's source file.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from smat.training.loop import stop_on_interrupt

__all__ = ["INPUT_ERROR", "INTERNAL_ERROR", "INTERRUPTED", "CommandEnded", "raised_by_check",
           "reported_failures"]

INPUT_ERROR = 2  # as argparse's own errors
INTERNAL_ERROR = 1
INTERRUPTED = 130

SMAT_CODE = Path(__file__).resolve().parents[1]


class CommandEnded(SystemExit):
    """A command ended by a refused input, a bug or Ctrl-C, its lines already on stderr
    (``code``: the exit status). Uncaught, it exits like any SystemExit."""


def _innermost_frame(error: BaseException) -> types.FrameType | None:
    """The frame that raised `error`: the last of its traceback."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame


def raised_by_check(error: BaseException, code_folders: Sequence[Path] = ()) -> bool:
    """Whether `error` was raised by smat's code or code under one of `code_folders`: the
    innermost frame of its traceback lies there (a ``raise`` of an input check), not inside
    another library."""
    frame = _innermost_frame(error)
    return frame is not None and any(
        Path(frame.f_code.co_filename).resolve().is_relative_to(folder.resolve())
        for folder in (SMAT_CODE, *code_folders))


def _raising_module(error: BaseException) -> str:
    """The top-level package whose code raised `error` (e.g. ``jax``)."""
    frame = _innermost_frame(error)
    return "?" if frame is None else frame.f_globals.get("__name__", "?").split(".")[0]


@contextlib.contextmanager
def _warnings_as_lines(prog: str, folders: Sequence[Path]) -> Iterator[None]:
    """Inside, a warning smat's code (or code under `folders`) issues prints as one line,
    ``PROG: warning: MESSAGE``, without the source file and line a user has no use for;
    other libraries' warnings print as Python prints them."""
    original = warnings.formatwarning

    def one_line(message, category, filename, lineno, line=None) -> str:
        if any(Path(filename).resolve().is_relative_to(folder.resolve()) for folder in folders):
            return f"{prog}: warning: {message}\n"
        return original(message, category, filename, lineno, line)

    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = original


@contextlib.contextmanager
def reported_failures(prog: str, *, kept: str = "",
                      rewrite: Callable[[str], str] = lambda message: message,
                      code_folders: Sequence[Path] = ()) -> Iterator[None]:
    """Inside, a failure ends the command as the module docstring says, raising
    :class:`CommandEnded` after its lines.

    Args:
      prog: the command's name, which starts every line (``smat train-student``).
      kept: what an interrupted command keeps, appended to ``PROG: interrupted``
        (``"; finished work is kept, ..."``).
      rewrite: applied to an input error's message (the CLI writes config fields as flags).
      code_folders: folders whose code raises input checks too, besides smat's (an
        experiment driver's folder).
    """
    try:
        with stop_on_interrupt(), _warnings_as_lines(prog, (SMAT_CODE, *code_folders)):
            yield
    except KeyboardInterrupt:
        # on a line of its own, after any progress bar the interrupt stopped mid-line
        print(f"\n{prog}: interrupted{kept}", file=sys.stderr)
        raise CommandEnded(INTERRUPTED) from None
    except (ValueError, FileNotFoundError, TypeError, TimeoutError) as error:
        # a missing file is always about the input, wherever the open call was
        if isinstance(error, FileNotFoundError) or raised_by_check(error, code_folders):
            print(f"{prog}: error: {rewrite(str(error))}", file=sys.stderr)
            raise CommandEnded(INPUT_ERROR) from None
        traceback.print_exc()
        print(f"{prog}: internal error: the {type(error).__name__} above was raised inside "
              f"{_raising_module(error)}, not by one of smat's input checks; please report it "
              "with the command that caused it", file=sys.stderr)
        raise CommandEnded(INTERNAL_ERROR) from None
