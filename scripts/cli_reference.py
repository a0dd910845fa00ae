"""Write the command-line reference page of the documentation from the parser itself.

    python scripts/cli_reference.py > docs/cli_reference.md

Every sub-command's ``--help`` (nested ones such as ``study build`` included), so the page
can never drift from the flags; ``tests/test_docs.py`` fails when the page is stale.
"""

from __future__ import annotations

import argparse
import os


def _subcommands(parser: argparse.ArgumentParser, prefix: str):
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not actions:
        yield prefix, parser
        return
    for name, sub in actions[0].choices.items():
        yield from _subcommands(sub, f"{prefix} {name}")


def reference() -> str:
    """The markdown page: one section per command with its help text."""
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: fix the width
    from smat.cli import build_parser

    parser = build_parser()
    parts = ["# Command-line reference", "",
             "Generated from the parser by `python scripts/cli_reference.py`; every flag's "
             "text comes from the docstring of the config field it sets.", "",
             "```text", parser.format_help().rstrip(), "```"]
    for name, sub in _subcommands(parser, "smat"):
        parts += ["", f"## {name}", "", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
