"""Reading a JSON file that a user or an earlier run wrote, with errors that name it.

``json.loads`` reports a broken file as "Expecting value: line 1 column 1 (char 0)",
naming neither the file nor that it is one; every file smat reads back (run folders'
``config.json`` / ``result.json`` / ``model.json``, checkpoints' configs, grouping files)
goes through :func:`read_json` instead, and a config dataclass a file records is rebuilt
with :func:`recorded_dataclass`, which names the file and the keys it cannot take.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["read_json", "recorded_dataclass"]

T = TypeVar("T")


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


def recorded_dataclass(cls: type[T], values: Mapping[str, Any], *, source: str | Path) -> T:
    """``cls(**values)`` for the settings a file records, refusing keys that do not fit.

    Raises:
      ValueError: `values` has keys `cls` has no field for, or lacks a field without a
        default (naming `source`, e.g. a file written by another version of smat).
    """
    fields = [field for field in dataclasses.fields(cls) if field.init]
    unknown = sorted(set(values) - {field.name for field in fields})
    missing = [field.name for field in fields if field.name not in values
               and field.default is dataclasses.MISSING
               and field.default_factory is dataclasses.MISSING]
    if unknown or missing:
        said = "; ".join(part for part in (
            f"keys {cls.__name__} has no field for: {unknown}" if unknown else "",
            f"no value for {missing}" if missing else "") if part)
        raise ValueError(f"{source} records settings this version of smat cannot read ({said}); "
                         "was it written by another version?")
    return cls(**values)
