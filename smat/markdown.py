"""The one writer of the Markdown tables reports print: a header and rows of cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table: `header`'s cells, the rule, one line per row (cells as `str` gives
    them; format numbers before).

    Raises:
      ValueError: a row whose length is not the header's (naming it).
    """
    for number, row in enumerate(rows):
        if len(row) != len(header):
            raise ValueError(f"table row {number} has {len(row)} cells for a header of "
                             f"{len(header)}: {list(row)}")
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)
