"""Run logging: JSON-lines metrics that survive a resume, the non-finite loss guard, and
the atomic files and array cache that every resumable job writes through.

Steps return metrics as device values; the host fetches them only at logging intervals,
checks them (a NaN loss must stop the run with the step range, not train on silently) and
writes one JSON object per line. A resumed run first drops the lines it is about to redo,
so the file never holds a step twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from jax.typing import ArrayLike

from smat.json_files import read_json
from smat.parallel import is_primary


def check_finite(
    metrics: Mapping[str, ArrayLike] | Sequence[Mapping[str, ArrayLike]],
    *,
    first_step: int,
    last_step: int,
) -> None:
    """Host-side check, at logging time, that the metrics of steps first..last are finite.

    Args:
      metrics: one metrics dict (values of any shape, e.g. stacked over steps) or a list of them.
      first_step: first step the metrics cover (for the message).
      last_step: last step the metrics cover.

    Raises:
      RuntimeError: naming the non-finite metrics and the step range.
    """
    records = [metrics] if isinstance(metrics, Mapping) else list(metrics)
    bad = sorted({name for record in records for name, value in record.items()
                  if not np.all(np.isfinite(np.asarray(value)))})
    if bad:
        raise RuntimeError(
            f"Non-finite {', '.join(bad)} between steps {first_step} and {last_step}; lower the "
            "learning rate(s) or check the inputs."
        )


def mean_metrics(records: Sequence[Mapping[str, ArrayLike]]) -> dict[str, float]:
    """Mean of each metric over a window of steps, as plain floats for JSON."""
    if not records:
        return {}
    return {name: float(np.mean([np.asarray(r[name]) for r in records])) for name in records[0]}


class MetricsWriter:
    """Appends one JSON object per line to `path`; resumable without duplicate steps. In a
    multi-process run only process 0 writes (every process logs the same global metrics).

    Args:
      path: the `.jsonl` file (its folder is created).
      resume_step: lines whose "step" is greater than this are dropped on opening (they
        belong to work that a resumed run redoes); None keeps every line.
    """

    def __init__(self, path: str | Path, *, resume_step: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.writes = is_primary()
        if self.writes and resume_step is not None and self.path.exists():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= resume_step]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, self.path)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append `record` as one line and flush it to disk."""
        if not self.writes:
            return
        with self.path.open("a") as f:
            f.write(json.dumps(dict(record), sort_keys=True) + "\n")
            f.flush()


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write `payload` as indented JSON to `path` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")  # processes of one run never share it
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def write_arrays_atomic(path: str | Path, **arrays: ArrayLike) -> None:
    """Save named arrays as a compressed ``.npz`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, path)


def read_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The named arrays of an ``.npz`` file, loaded into memory."""
    with np.load(path) as stored:
        return {name: stored[name] for name in stored.files}


def cached_arrays(path: str | Path,
                  compute: Callable[[], Mapping[str, ArrayLike]]) -> dict[str, np.ndarray]:
    """The arrays cached at `path`, or `compute()`'s, saved there first (atomically, so a
    killed job never leaves a partial cache behind)."""
    if not Path(path).is_file():
        write_arrays_atomic(path, **compute())
    return read_arrays(path)


def settings_hash(settings: Mapping[str, Any]) -> str:
    """First 12 hex digits of the SHA-256 of JSON-able settings (sorted keys): a cache key."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _as_json(value: Any) -> Any:
    """`value` as it reads back from a JSON file (tuples become lists)."""
    return json.loads(json.dumps(value))


def _differences(old: Any, new: Any, path: str = "") -> tuple[list[str], list[str]]:
    """(settings that differ as "path: old -> new", paths recorded in `new` only)."""
    if isinstance(old, dict) and isinstance(new, dict):
        changed, added = [], []
        for key in sorted(set(old) | set(new)):
            where = f"{path}.{key}" if path else key
            if key not in new:
                changed.append(f"{where}: {old[key]!r} -> (not set)")
            elif key not in old:
                added.append(where)
            else:
                inner_changed, inner_added = _differences(old[key], new[key], where)
                changed += inner_changed
                added += inner_added
        return changed, added
    return ([] if old == new else [f"{path}: {old!r} -> {new!r}"]), []


def check_run_settings(folder: str | Path, settings: Mapping[str, Any], *,
                       overwrite: bool = False, ignored: Sequence[str] = ()) -> bool:
    """Make sure a run folder is never reused for other settings than those it holds.

    A folder whose ``config.json`` records other settings (any value, a data file's
    content fingerprint included) is refused, naming every difference. `overwrite` deletes
    whatever run the folder holds (other settings, or the same ones with a damaged
    checkpoint), so the caller starts afresh. Settings that an older smat did not record
    are not a difference: the folder's ``config.json`` is completed with them.

    Args:
      folder: the run folder (may not exist yet).
      settings: the JSON-able settings that determine the run's result.
      overwrite: delete the run the folder holds, whatever its settings.
      ignored: top-level entries of ``config.json`` that are not settings (the version of
        the code that wrote it): never a difference, kept when the file is completed.

    Returns:
      True when the folder already holds a run with these settings (finished or not).

    Raises:
      ValueError: the folder holds a run with other settings and `overwrite` is False.
    """
    folder = Path(folder)
    path = folder / "config.json"
    if not path.is_file():
        return False
    if overwrite:
        shutil.rmtree(folder)
        return False
    recorded = read_json(path)
    kept = {key: recorded.pop(key) for key in ignored if key in recorded}
    changed, added = _differences(recorded, _as_json(settings))
    if changed:
        listed = "; ".join(changed[:8]) + (f"; and {len(changed) - 8} more"
                                           if len(changed) > 8 else "")
        raise ValueError(f"{folder} holds a run with other settings ({listed}); pass "
                         "--overwrite to replace it, or choose another --output-dir")
    if added:
        write_json_atomic(path, {**settings, **kept})
    return True

