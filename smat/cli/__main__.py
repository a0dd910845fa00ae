"""``python -m smat.cli``: the `smat` console script."""

from smat.cli import console_main

console_main()
