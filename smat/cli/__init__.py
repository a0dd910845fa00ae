"""smat: train explainers that teach (SMaT), run Captum's explainers in JAX, evaluate any explainer.

One sub-command per entry of the command table (:func:`smat.cli.commands.commands`),
which pairs each command's config with the function that runs it; every flag is a field
of that config (:mod:`smat.cli.flags`). `smat --help` shows these examples:

    smat demo --output-dir runs/demo
    smat train-teacher --source reviews.csv --text-column review --label-column sentiment
    smat train-student --teacher runs/teacher --explainers smat --size 500 --seed 0
    smat simulability --teacher runs/teacher --sizes 500 1000 --seeds 5 --explainers none smat
    smat explain texts.txt --model runs/teacher/model --explainers gradient attention_all
    smat benchmark --model runs/teacher/model --explainers gradient attention_all random
    smat faithfulness --model runs/teacher/model --explainers gradient attention_all random
    smat agreement --model runs/teacher/model --explainers gradient attention_all random
    smat agreement --variant base runs/b/model --variant tying runs/t/model --explainers gradient
    smat plausibility --model runs/teacher/model --data-dir ERASER/movies --explainers gradient
    smat sanity --model runs/teacher/model --mode cascading --explainers gradient
    smat attack --model runs/teacher/model --objective constrained --explainers gradient
    smat study build --model runs/teacher/model --explainers integrated_gradients random
    smat study read --model runs/teacher/model --tasks runs/study/tasks.jsonl --name teacher
    smat study score --tasks runs/study/tasks.jsonl --answers answers.csv
    smat roar --recursive --explainers attention gradient --ratios 0:100:20 --seeds 3
    smat predict --model runs/teacher/model texts.txt

Training commands run `--seeds N` seeds (from `--seed`, default 0), one after another or,
with `--parallel-seeds`, in one vmapped program. Every command takes --devices N (shard
batches over N devices, default all), on several hosts --coordinator / --num-processes /
--process-id or --distributed (see smat.parallel), and --compile-cache DIR /
--no-compile-cache for the persistent compilation cache (on by default, for this command
only).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.cli.commands import GROUPS, Command, commands
from smat.cli.failures import INTERRUPTED, CommandEnded, reported_failures
from smat.cli.flags import add_config_flags, build_config, in_flags
from smat.compile_cache import command_compile_cache
from smat.json_files import read_json
from smat.models.inference import progress_bars
from smat.store import run_record

KEPT = "; finished work is kept, and the same command resumes from the last checkpoint"


def installed_version() -> str:
    """smat's version from its package metadata; a checkout used through PYTHONPATH (as on
    a device machine that receives only the working tree) has none."""
    try:
        return importlib.metadata.version("smat")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: run from a source tree)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "arguments are required" error shows the help when the
    command itself is missing (``smat``), and says when a list flag (``--explainers a b``)
    may have taken the missing positional argument as one of its words: ``smat explain
    --explainers gradient new.txt`` reads new.txt as an explainer."""

    def parse_known_args(self, args=None, namespace=None):
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        required = "the following arguments are required: "
        commands = {f"{required}{action.dest}" for action in self._actions
                    if isinstance(action, argparse._SubParsersAction)}
        if message in commands:  # `smat`, `smat study`: the sub-command itself is missing
            self.print_help(sys.stderr)
            sys.stderr.write("\n")
        if message.startswith(required):
            words = getattr(self, "_words", [])
            lists = [option for action in self._actions if action.nargs in ("+", "*")
                     for option in action.option_strings if option in words]
            missing = [name for name in message[len(required):].split(", ")
                       if not name.startswith("-")]
            if lists and missing:
                message += (f" ({lists[-1]} takes every word up to the next flag: put "
                            f"{' and '.join(missing)} before it, or end its list with --)")
        if message.startswith("unrecognized arguments: --model") and "train-teacher" in getattr(
                self, "_words", []):
            message += (" (--model names a model smat trained, everywhere; a teacher starts "
                        "from a pretrained encoder: --encoder FOLDER_OR_HUB_ID)")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `smat` command: one sub-command per :func:`commands`
    entry, its flags those of the entry's config."""
    examples = [line.strip() for line in __doc__.splitlines() if line.startswith("    smat ")]
    parser = _Parser(prog="smat", description=__doc__.splitlines()[0],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog="examples:\n" + "\n".join(f"  {line}" for line in examples) +
                     "\n\n`smat COMMAND --help` lists a command's flags.")
    parser.add_argument("--version", action="version",
                        version=f"smat {installed_version()}")
    top = parser.add_subparsers(dest="command", required=True)
    groups: dict[str, Any] = {}
    for command in commands():
        *group, name = command.name.split()
        subparsers = top
        if group:
            if group[0] not in groups:
                parent = top.add_parser(group[0], help=GROUPS[group[0]])
                groups[group[0]] = parent.add_subparsers(dest="action", required=True)
            subparsers = groups[group[0]]
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        add_config_flags(sub, command.config)
        sub.set_defaults(command_entry=command)
    return parser


def parse_command(argv: Sequence[str],
                  parser: argparse.ArgumentParser | None = None) -> tuple[Command, Any]:
    """The command `argv` runs and its built config (``--config FILE`` replayed first), by
    `parser` (default: a new :func:`build_parser`).

    Raises:
      SystemExit: argparse's error on unknown or malformed flags;
      ValueError: an unreadable ``--config`` file, a missing flag, or as the config's
        checks.
    """
    parser = parser or build_parser()
    _replay_config_file(parser, argv)
    args = parser.parse_args(argv)
    command = args.command_entry
    return command, build_config(command.config, args)


@contextlib.contextmanager
def _runtime(runtime: Any):
    """Multi-host start, the data mesh as JAX's ambient mesh, the progress bars and the
    compilation cache of a command's runtime settings (None: progress bars only)."""
    if runtime is None:
        yield
        return
    import jax

    from smat.parallel import data_mesh, finish_distributed, initialize_distributed

    # The mesh first: multi-host start must precede anything that touches a backend, and
    # the cache is keyed by the backend's machine.
    initialize_distributed(coordinator_address=runtime.coordinator,
                           num_processes=runtime.num_processes, process_id=runtime.process_id,
                           auto=runtime.distributed, timeout=runtime.join_timeout)
    with jax.set_mesh(data_mesh(runtime.devices)), progress_bars(not runtime.no_progress), \
            command_compile_cache(runtime.cache_flag):
        yield
    finish_distributed()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `smat` console script: the command's exit status (argparse's own
    errors and ``--version`` exit as argparse does)."""
    argv = list(argv if argv is not None else sys.argv[1:])
    parser = build_parser()
    prog, flags = _subcommand(parser, argv).prog, _flags(parser, argv)
    try:
        with reported_failures(prog, kept=KEPT, rewrite=lambda message: in_flags(message, flags)):
            command, config = parse_command(argv, parser)
            output_dir = getattr(config, "output_dir", None)
            if output_dir is not None and Path(output_dir).exists() \
                    and not Path(output_dir).is_dir():
                # checked before any work: the results would be computed and then lost
                raise ValueError(f"--output-dir {output_dir} is a file, not a folder; choose "
                                 "a folder")
            with _runtime(getattr(config, "runtime", None)):
                return command.run(config)
    except CommandEnded as ended:
        return ended.code


def _subcommand(parser: argparse.ArgumentParser,
                argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the (sub-)command that `argv` runs."""
    words = [word for word in argv if not word.startswith("-")]
    while True:
        commands = next((a for a in parser._actions
                         if isinstance(a, argparse._SubParsersAction)), None)
        chosen = next((w for w in words if commands and w in commands.choices), None)
        if chosen is None:
            return parser
        parser, words = commands.choices[chosen], words[words.index(chosen) + 1:]


def _flags(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The option strings of the command `argv` runs."""
    return set(_subcommand(parser, argv)._option_string_actions)




def _recorded_defaults(command: Command, recorded: dict[str, Any],
                       path: str) -> dict[str, Any]:
    """The flag values a run's `config.json` records, by destination."""

    def flatten(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in values.items():
            name = f"{prefix}.{key}" if prefix else key
            nested = isinstance(value, dict) and value  # an empty dict is a setting too
            out.update(flatten(name, value) if nested else {name: value})
        return out

    defaults = {}
    for key, value in flatten("", recorded).items():
        if key.split(".")[0] in run_record.FACTS:  # not settings: nothing to replay
            continue
        parts = key.split(".")
        prefix = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                       if ".".join(parts[:n]) in command.replay), None)
        if prefix is None:
            raise ValueError(f"--config {path} records {key!r}, which `smat {command.name}` "
                             "has no flag for: is it the config.json of another command's "
                             "run?")
        field = ".".join([command.replay[prefix], *parts[len(prefix.split(".")):]])
        defaults[f"{command.config.__name__}.{field}"] = value
    return defaults


def _replay_config_file(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """With ``--config FILE``: the settings FILE records become the command's defaults, so
    the flags given beside it override them (and nothing else changes)."""
    given = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--config=")] + [
        argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--config"]
    if not given:
        return
    path = given[-1]
    subparser = _subcommand(parser, argv)
    command = subparser.get_default("command_entry")
    if command is None or not command.replay:
        return  # argparse reports --config as unknown to this command
    try:
        recorded = read_json(path)
    except (OSError, ValueError) as error:
        raise ValueError(f"--config: {error}") from None
    defaults = _recorded_defaults(command, recorded, path)
    known = {action.dest for action in subparser._actions}
    unknown = sorted(set(defaults) - known)
    if unknown:
        raise ValueError(f"--config {path} records settings this version has no flag for: "
                         f"{unknown}")
    subparser.set_defaults(**defaults)
    for action in subparser._actions:  # a required flag the file records is given
        if action.dest in defaults:
            action.required = False


def console_main() -> None:
    """The `smat` console script: :func:`main`, leaving at once after an interrupt (tearing
    down the XLA and checkpoint threads that Ctrl-C stopped mid-work can crash the process
    on its way out, after everything that was finished is already on disk)."""
    code = main()
    if code == INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
