"""Reading a JSON file that a user or an earlier run wrote, with errors that name it.

``json.loads`` reports a broken file as "Expecting value: line 1 column 1 (char 0)",
naming neither the file nor that it is one; every file smat reads back (run folders'
``config.json`` / ``result.json`` / ``model.json``, checkpoints' configs, grouping files)
goes through :func:`read_json` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["read_json"]


def read_json(path: str | Path) -> Any:
    """The JSON value the file `path` holds.

    Raises:
      FileNotFoundError: no file at `path`.
      ValueError: the file is not UTF-8 JSON (naming it, with the line and column), e.g.
        a file cut off mid-write or edited by hand.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error.msg} at line {error.lineno}, "
                         f"column {error.colno}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a UTF-8 text file (byte {error.start}); is it the "
                         "JSON file it should be?") from None
