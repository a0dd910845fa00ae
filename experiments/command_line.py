"""The command line the experiment drivers share: variant flags, runtime, earlier runs.

Each driver's ``main`` builds its parser with :func:`variant_parser` (``--variant``,
``--smoke``, ``--output-dir`` defaulting to ``runs/<name>_<variant>``, and ``--data-dir`` /
``--teacher`` where the driver reads them), resolves it with :func:`parse_variant_args` and
runs its work inside :func:`command_runtime`, which gives it what `smat` gives a command.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from smat.cli.failures import reported_failures
from smat.compile_cache import command_compile_cache
from smat.data.protocol import DataConfig, data_fingerprint
from smat.json_files import read_json
from smat.store.run_record import saved_data_config

EXPERIMENTS = Path(__file__).resolve().parent


def variant_parser(description: str, *, name: str,
                   variants: Sequence[str] = ("paper", "cpu", "smoke"),
                   data_dir_help: str | None = None,
                   reuses_teacher: bool = False) -> argparse.ArgumentParser:
    """The flags every variant experiment shares.

    Args:
      description: the driver's docstring, which ``--help`` shows whole (it describes
        the variants).
      name: the default output folder is ``runs/<name>_<variant>``.
      variants: the ``--variant`` choices; the default is ``cpu``, or the first where
        there is no cpu variant.
      data_dir_help: what ``--data-dir`` holds; None for a driver that reads no data
        folder (then it has no such flag).
      reuses_teacher: whether the driver takes ``--teacher``, a finished `smat
        train-teacher` run to reuse.
    """
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    default = "cpu" if "cpu" in variants else variants[0]
    parser.add_argument("--variant", choices=variants, default=default,
                        help=f"the grid and hardware scale (described above; default {default})")
    parser.add_argument("--smoke", action="store_true", help="the same as --variant smoke")
    if data_dir_help is not None:
        parser.add_argument("--data-dir", default=None, help=data_dir_help)
    if reuses_teacher:
        parser.add_argument("--teacher", default=None,
                            help="a finished `smat train-teacher` run to reuse")
    parser.add_argument("--output-dir", default=None,
                        help=f"results folder (default runs/{name}_<variant>)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(default_name=name)
    return parser


def parse_variant_args(parser: argparse.ArgumentParser,
                       argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, resolve ``--smoke`` and the default output folder."""
    args = parser.parse_args(argv)
    if args.smoke:
        args.variant = "smoke"
    args.output_dir = args.output_dir or f"runs/{args.default_name}_{args.variant}"
    return args


@contextlib.contextmanager
def command_runtime(parser: argparse.ArgumentParser, *, resumes: bool = True) -> Iterator[None]:
    """Around a driver's work, what `smat` gives each command: the persistent compilation
    cache (``SMAT_COMPILE_CACHE`` as for `smat`: a resumed or repeated run loads its
    programs instead of compiling them again) and :func:`smat.cli.failures.reported_failures`
    (a refused input or a missing file in one line, exit 2; a bug with its traceback, exit
    1; Ctrl-C in one line saying what is kept, exit 130). `resumes`: whether the same
    command continues from the finished work."""
    kept = ("; finished work is kept, and the same command resumes from the last checkpoints"
            if resumes else "")
    with reported_failures(parser.prog, kept=kept, code_folders=(EXPERIMENTS,)), \
            command_compile_cache():
        yield


def earlier_run_file(folder: str | Path, name: str, *, flag: str) -> dict[str, Any]:
    """The JSON file `name` (``config.json``, ``results.json``) of the earlier experiment run
    in `folder`, which the command line's `flag` gave.

    Raises:
      FileNotFoundError: the folder holds no such file (naming `flag`).
      ValueError: the file is not JSON (naming it).
    """
    path = Path(folder) / name
    if not path.is_file():
        raise FileNotFoundError(f"{flag} {folder} holds no {name}: pass the output folder of "
                                "a finished run of the experiment it names")
    return read_json(path)


def check_data_files(data: DataConfig, data_dir: str | Path) -> None:
    """Refuse a `data_dir` that lacks a file `data` reads, naming every missing one.

    Raises:
      FileNotFoundError: ``--data-dir DIR lacks NAME, ...``.
    """
    files = [file for source in (data.source, data.student_source) if source is not None
             for file in ([source] if isinstance(source, str) else source)]
    missing = [Path(file).name for file in files if not Path(file).is_file()]
    if missing:
        raise FileNotFoundError(f"--data-dir {data_dir} lacks {', '.join(missing)}")


class OtherDataTeacherWarning(UserWarning):
    """A ``--teacher`` reused by a variant was trained on other data than the variant's."""


def check_reused_teacher(teacher_dir: str | Path, data: DataConfig, *, variant: str) -> None:
    """Warn when a ``--teacher`` was trained on other data than the variant reads: its
    students and table are of the teacher's data (which the run records), under the
    variant's name. Its training settings may differ (it is reused as it is); data files
    at other paths with the same content are the same data."""
    saved = saved_data_config(teacher_dir)
    ours, theirs = dataclasses.asdict(data), dataclasses.asdict(saved)
    differ = [key for key in ours if ours[key] != theirs[key]]
    if differ:
        fingerprint = data_fingerprint(data)
        if fingerprint is not None and fingerprint == data_fingerprint(saved):
            differ = [key for key in differ if key not in ("source", "student_source")]
    if differ:
        listed = "; ".join(f"{key}: {theirs[key]!r}, the variant's {ours[key]!r}"
                           for key in differ)
        warnings.warn(f"--teacher {teacher_dir} was trained on other data than the {variant} "
                      f"variant reads ({listed}): its students and table are of the teacher's "
                      "data", OtherDataTeacherWarning, stacklevel=2)
