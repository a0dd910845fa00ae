"""The command line of the experiment drivers (``experiments/*.py``): variant flags, the
grid's flags generated from :class:`smat.jobs.experiment.ExperimentConfig`, runtime, earlier
runs.

Each driver's ``main`` builds its parser with :func:`variant_parser` (``--variant``,
``--smoke``, ``--output-dir`` defaulting to ``runs/<name>_<variant>``, and ``--data-dir`` /
``--teacher`` where the driver reads them; ``grid=True`` adds ``--sizes``, ``--seeds`` and
``--explainers``, which :func:`chosen_grid` applies to the variant's config), resolves it
with :func:`parse_variant_args` and runs its work inside :func:`command_runtime`, which
gives it what `smat` gives a command.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from smat.cli.failures import reported_failures
from smat.cli.flags import add_config_flags, build_config, in_flags
from smat.compile_cache import command_compile_cache
from smat.data.hub_sets import MIRROR_ENV, cache_root, hub_data_dir
from smat.data.protocol import DataConfig
from smat.jobs.experiment import GRID_FLAGS, ExperimentConfig
from smat.jobs.shares import parse_share
from smat.json_files import read_json
from smat.parallel import JOIN_TIMEOUT


def _driver_options(*, name: str, variants: Sequence[str], data_dir_help: str | None,
                    reuses_teacher: bool, grid: bool) -> type:
    """The options a driver's command line takes, as a config class whose fields (and so
    flags, generated as the `smat` command's are) say this driver's variants and inputs."""
    default = "cpu" if "cpu" in variants else variants[0]

    def option(kind: Any, value: Any, doc: str, **metadata: Any) -> tuple:
        return kind, dataclasses.field(default=value, metadata={"doc": doc, **metadata})

    fields = {"variant": option(str, default, "the grid and hardware scale (described above)",
                                choices=tuple(variants)),
              "smoke": option(bool, False, "the same as --variant smoke")}
    if data_dir_help is not None:
        fields["data_dir"] = option(str | None, None, data_dir_help, shown="none")
    if reuses_teacher:
        fields["teacher"] = option(str | None, None,
                                   "a finished `smat train-teacher` run to reuse", shown="none")
    fields["output_dir"] = option(str | None, None, "results folder",
                                  shown=f"runs/{name}_<variant>")
    fields["no_progress"] = option(bool, False, "hide progress bars")
    if grid:
        fields["share"] = option(
            str, "0/1", "train only share I of N of the work (\"I/N\", 0-based), one share per "
            "process or host over a shared output folder: share 0 trains the teacher and the "
            "others wait for it, each trains every N-th cell of the grid from the I-th, and "
            "share 0 waits for the others' students, trains the ablation arms and writes the "
            "report", metavar="I/N")
        fields["join_timeout"] = option(
            int, JOIN_TIMEOUT, "with --share: seconds a share waits for the teacher or for the "
            "other shares' students before it stops, naming what to rerun")
    return dataclasses.make_dataclass("DriverOptions", [(key, *value)
                                                        for key, value in fields.items()],
                                      frozen=True)


def variant_parser(description: str, *, name: str,
                   variants: Sequence[str] = ("paper", "cpu", "smoke"),
                   data_dir_help: str | None = None,
                   reuses_teacher: bool = False, grid: bool = False) -> argparse.ArgumentParser:
    """The flags every variant experiment shares, generated from config fields.

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
      grid: whether the driver runs an :class:`ExperimentConfig`, whose grid (sizes, seeds,
        settings) the command line may narrow or change (flags default to the variant's),
        and may split over processes (``--share``, ``--join-timeout``).
    """
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    options = _driver_options(name=name, variants=variants, data_dir_help=data_dir_help,
                              reuses_teacher=reuses_teacher, grid=grid)
    add_config_flags(parser, options)
    if grid:
        add_config_flags(parser, ExperimentConfig, relative=True,
                         skip=[f.name for f in dataclasses.fields(ExperimentConfig)
                               if f.name not in GRID_FLAGS])
    parser.set_defaults(default_name=name, driver_options=options)
    return parser


def chosen_grid(config: ExperimentConfig, args: argparse.Namespace) -> ExperimentConfig:
    """The variant's `config` with the grid flags given on the command line (sizes sorted).

    Raises:
      ValueError: a grid :class:`ExperimentConfig` refuses (naming the flag).
    """
    chosen = build_config(ExperimentConfig, args, base=config)
    return dataclasses.replace(chosen, sizes=tuple(sorted(chosen.sizes)))


def grid_options(args: argparse.Namespace) -> dict[str, Any]:
    """A grid driver's ``run`` arguments from its command line (``variant_parser(grid=True)``):
    ``grid``, the variant's experiment as the flags narrow it (:func:`chosen_grid`), and
    ``share`` and ``join_timeout`` (:func:`smat.jobs.experiment.run_experiment`).

    Raises:
      ValueError: a malformed ``--share`` (naming it).
    """
    return {"grid": lambda config: chosen_grid(config, args), "share": parse_share(args.share),
            "join_timeout": args.join_timeout}


def finished_share(summary: dict[str, Any]) -> bool:
    """Whether `summary` is the records of a share other than 0 (which writes no report), and
    if so say so on stdout."""
    if "share" not in summary:
        return False
    count = summary["share"].partition("/")[2]
    print(f"share {summary['share']}: {len(summary['records'])} students finished; share "
          f"0/{count} writes the report")
    return True


def parse_variant_args(parser: argparse.ArgumentParser,
                       argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse (each driver option also under its own name: ``args.variant``), resolve
    ``--smoke`` and the default output folder."""
    args = parser.parse_args(argv)
    options = build_config(args.driver_options, args)
    for field in dataclasses.fields(options):
        setattr(args, field.name, getattr(options, field.name))
    if args.smoke:
        args.variant = "smoke"
    args.output_dir = args.output_dir or f"runs/{args.default_name}_{args.variant}"
    return args


@contextlib.contextmanager
def command_runtime(parser: argparse.ArgumentParser, *, driver: str,
                    resumes: bool = True) -> Iterator[None]:
    """Around a driver's work, what `smat` gives each command: the persistent compilation
    cache (``SMAT_COMPILE_CACHE`` as for `smat`: a resumed or repeated run loads its
    programs instead of compiling them again) and :func:`smat.cli.failures.reported_failures`
    (a refused input or a missing file in one line, exit 2; a bug with its traceback, exit
    1; Ctrl-C in one line saying what is kept, exit 130; an error raised in the folder of
    the `driver` file counts as smat's own). `resumes`: whether the same command continues
    from the finished work."""
    kept = ("; finished work is kept, and the same command resumes from the last checkpoints"
            if resumes else "")
    flags = {option for action in parser._actions for option in action.option_strings}
    with reported_failures(parser.prog, kept=kept, code_folders=(Path(driver).resolve().parent,),
                           rewrite=lambda message: in_flags(message, flags)), \
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


def data_dir_or_hub(data_dir: str | None, hub_name: str | None) -> str | None:
    """`data_dir` (``--data-dir``) when given, else the Hub data set `hub_name` converted
    once into the cache (:func:`smat.data.hub_sets.hub_data_dir`); None when the variant
    reads no data folder.

    Raises:
      FileNotFoundError: neither a folder nor the Hub (or a mirror) to read it from.
    """
    if data_dir is not None or hub_name is None:
        return data_dir
    print(f"no --data-dir: {hub_name} from the Hugging Face Hub, converted once into "
          f"{cache_root() / hub_name}", file=sys.stderr)
    try:
        return str(hub_data_dir(hub_name))
    except OSError as error:  # no network, no such id: the same advice
        raise FileNotFoundError(
            f"no --data-dir and {hub_name} could not be read from the Hugging Face Hub "
            f"({type(error).__name__}: {error}); pass --data-dir (docs/datasets.md), or "
            f"set {MIRROR_ENV} to a folder of save_to_disk copies") from None
