"""Work split over processes that share a folder: ``--share I/N`` and the join's wait.

Each of N processes (on one machine, or on hosts with a shared file system) does the I-th
of N parts of a job and writes its finished units where the others can read them; share 0
then waits for the others' units and writes the report. The processes never talk to each
other, so a host that dies loses only its unfinished units: rerunning its share does them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Unit = TypeVar("Unit")


def parse_share(text: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N): the share of a job's work one process does, 0 <= I < N.

    Raises:
      ValueError: naming --share, for anything else.
    """
    index, slash, count = text.partition("/")
    if not (slash and index.strip().isdigit() and count.strip().isdigit()
            and 0 <= int(index) < int(count)):
        raise ValueError(f"--share {text!r}: expected I/N with 0 <= I < N, e.g. 0/2 and 1/2 "
                         "for two processes")
    return int(index), int(count)


def wait_for(check: Callable[[], Any], *, timeout: float, waiting: Callable[[], str],
             timed_out: Callable[[], str]) -> Any:
    """What `check` returns once it is not None (a share waiting for another's work on a
    shared folder), polled for at most `timeout` seconds; `waiting()` is printed once when
    it must wait.

    Raises:
      TimeoutError: with `timed_out()`'s message.
    """
    deadline, told = time.monotonic() + timeout, False
    while (found := check()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(timed_out())
        if not told:
            print(waiting(), file=sys.stderr, flush=True)
            told = True
        time.sleep(min(5.0, max(timeout / 20, 0.1)))
    return found


def join_shares(units: Sequence[Unit], finished: Callable[[Unit], bool], *,
                share: tuple[int, int], timeout: float,
                describe: Callable[[Sequence[Unit]], str]) -> None:
    """Share 0's wait until every unit of a job is finished, unit i being share i mod N's.

    Args:
      units: the job's units, in the order they were dealt to the shares.
      finished: whether a unit's work is on the shared folder.
      share: (this share, number of shares).
      timeout: seconds to wait at most.
      describe: names units for a message ("2 students (n8/none/seeds 0, ...)").

    Raises:
      TimeoutError: naming the unfinished units and the shares to rerun.
    """
    def missing() -> list[Unit]:
        return [unit for unit in units if not finished(unit)]

    def timed_out() -> str:
        left = missing()
        shares = sorted({units.index(unit) % share[1] for unit in left})
        return (f"--share {share[0]}/{share[1]}: after {timeout:.0f} s, {describe(left)} "
                f"are unfinished; run --share "
                f"{' and --share '.join(f'{s}/{share[1]}' for s in shares)} again (finished "
                "cells are reused), then this command")

    wait_for(lambda: None if missing() else True, timeout=timeout, timed_out=timed_out,
             waiting=lambda: f"share {share[0]}/{share[1]}: waiting for "
                             f"{describe(missing())} of the other shares")
