"""Compare the installed distributions with a pip constraints file (the tested lock).

    python scripts/check_constraints.py constraints.txt

Prints every constrained package whose installed version differs from its pin (or that is
missing) and exits 1 if there is any; installed packages that the file does not pin are
listed as a warning. A pin without a local label (``torch==2.13.0``) matches an installed
local build of that version (``2.13.0+cpu``), as pip itself reads it (PEP 440).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

# Installed by the tooling itself or by `pip install -e .`, never pinned.
UNPINNED = {"pip", "setuptools", "wheel", "smat"}


def canonical(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a constraints file -> {canonical name: version}."""
    pins = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version.strip():
            raise ValueError(f"{path}:{number}: expected 'name==version', got {raw!r}")
        pins[canonical(name.split("[", 1)[0].strip())] = version.strip()
    return pins


def matches(installed: str, pinned: str) -> bool:
    if "+" in pinned:
        return installed == pinned
    return installed.split("+", 1)[0] == pinned


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    pins = read_pins(Path(argv[0]))
    installed = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    differing = [f"  {name}: installed {installed.get(name, '(missing)')}, constraints {pin}"
                 for name, pin in sorted(pins.items())
                 if not matches(installed.get(name, ""), pin)]
    extra = sorted(set(installed) - set(pins) - UNPINNED)
    if extra:
        print(f"warning: installed but not pinned in {argv[0]}: {', '.join(extra)}")
    if differing:
        print(f"installed versions that differ from {argv[0]}:\n" + "\n".join(differing))
        return 1
    print(f"{len(pins)} pinned packages match {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
