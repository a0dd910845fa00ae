"""Atomic orbax checkpoints of parameter pytrees plus JSON metadata.

A checkpoint is one directory holding three orbax items: ``state`` (the arrays),
``metadata`` (the caller's JSON dictionary) and ``tree`` (path -> shape / dtype of every
leaf, used to explain a mismatch before orbax sees it). It is written into a temporary
sibling directory and renamed into place, so a crash never leaves a half-written
checkpoint under ``path``; overwriting swaps the old directory out only after the new
one is complete. Restoring is exact (bit-for-bit) and can target an abstract pytree
(e.g. ``nnx.state(nnx.eval_shape(...))``) to get the caller's container types back, as
uncommitted arrays that run on any devices, whatever process count wrote them.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from smat.parallel import is_primary


class Restored(NamedTuple):
    """What :func:`restore` returns.

    Attributes:
      pytree: the restored arrays, in ``target``'s structure when a target was given,
        else nested dictionaries.
      metadata: the JSON dictionary given to :func:`save`.
    """

    pytree: Any
    metadata: dict[str, Any]


def _key_name(key: Any) -> str:
    if isinstance(key, jax.tree_util.DictKey | jax.tree_util.FlattenedIndexKey):
        return str(key.key)
    if isinstance(key, jax.tree_util.GetAttrKey):
        return key.name
    if isinstance(key, jax.tree_util.SequenceKey):
        return str(key.idx)
    return str(key)


def tree_spec(pytree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """Dotted leaf path -> (shape, dtype name) of every leaf of ``pytree``.

    Works for arrays and abstract leaves (``jax.ShapeDtypeStruct``) alike.
    """
    leaves = jax.tree_util.tree_flatten_with_path(pytree)[0]
    return {
        ".".join(_key_name(k) for k in path): (tuple(np.shape(leaf)), str(np.dtype(leaf.dtype)))
        for path, leaf in leaves
    }


def _checkpointer() -> ocp.Checkpointer:
    return ocp.Checkpointer(ocp.CompositeCheckpointHandler())


def save(path: str | Path, pytree: Any, *, metadata: Mapping[str, Any],
         overwrite: bool = False) -> Path:
    """Saves ``pytree`` and ``metadata`` atomically under the directory ``path``.

    Args:
      path: checkpoint directory to create.
      pytree: any pytree of arrays (e.g. an ``nnx.State`` of parameters).
      metadata: JSON-serialisable dictionary (config, step, metrics, ...).
      overwrite: replace an existing checkpoint at ``path``.

    Returns:
      The absolute checkpoint path.

    Raises:
      FileExistsError: ``path`` exists and ``overwrite`` is False.
      TypeError: ``metadata`` is not a JSON-serialisable dictionary.
    """
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict, got {type(metadata).__name__}")
    try:
        json.dumps(dict(metadata))
    except TypeError as err:
        raise TypeError(f"metadata must be JSON-serialisable: {err}") from err
    path = Path(path).expanduser().resolve()
    if path.exists() and not overwrite:
        raise FileExistsError(f"checkpoint {path} exists; pass overwrite=True to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    # every process of a multi-process run writes its shards into the same folder, and
    # process 0 alone moves it into place once all have written
    tmp = path.parent / f".{path.name}.tmp-{_shared_token()}"
    primary = is_primary()
    spec = {name: [list(shape), dtype] for name, (shape, dtype) in tree_spec(pytree).items()}
    try:
        _checkpointer().save(tmp, ocp.args.Composite(
            state=ocp.args.StandardSave(pytree),
            metadata=ocp.args.JsonSave(dict(metadata)),
            tree=ocp.args.JsonSave(spec),
        ))
        if primary and path.exists():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex}"
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old)
        elif primary:
            tmp.rename(path)
    finally:
        if primary and tmp.exists():
            shutil.rmtree(tmp)
        _all_processes_reach(f"smat checkpoint {path}")
    return path


def _shared_token() -> str:
    """A fresh random name, the same in every process (process 0's)."""
    token = uuid.uuid4().int % 2**62
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        token = int(multihost_utils.broadcast_one_to_all(np.int64(token)))
    return f"{token:016x}"


def _all_processes_reach(name: str) -> None:
    """Wait until every process of a multi-process run gets here (no-op in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata dictionary of the checkpoint at ``path`` (arrays are not read).

    Raises:
      FileNotFoundError: no checkpoint at ``path``.
    """
    path = _existing(path)
    return _checkpointer().restore(path, ocp.args.Composite(
        metadata=ocp.args.JsonRestore())).metadata


def _existing(path: str | Path) -> Path:
    path = Path(path).expanduser().resolve()
    if not (path / "state").is_dir():
        raise FileNotFoundError(f"no smat checkpoint at {path} (expected {path / 'state'})")
    return path


def _check_target(path: Path, target: Any) -> None:
    saved = {name: (tuple(shape), dtype) for name, (shape, dtype) in _checkpointer().restore(
        path, ocp.args.Composite(tree=ocp.args.JsonRestore())).tree.items()}
    wanted = tree_spec(target)
    problems = [f"  missing from the checkpoint: {name} {wanted[name][0]}"
                for name in sorted(set(wanted) - set(saved))]
    problems += [f"  not in the target: {name} {saved[name][0]}"
                 for name in sorted(set(saved) - set(wanted))]
    problems += [
        f"  {name}: checkpoint {saved[name][0]} {saved[name][1]} vs target "
        f"{wanted[name][0]} {wanted[name][1]}"
        for name in sorted(set(saved) & set(wanted)) if saved[name] != wanted[name]
    ]
    if problems:
        raise ValueError(f"checkpoint {path} does not match the target:\n" + "\n".join(problems))


def restore(path: str | Path, *, target: Any = None) -> Restored:
    """Restores a checkpoint written by :func:`save`.

    Args:
      path: checkpoint directory.
      target: optional pytree (arrays or ``jax.ShapeDtypeStruct`` leaves, e.g. an abstract
        ``nnx.State``) whose structure, shapes and dtypes the checkpoint must match.

    Returns:
      :class:`Restored` ``(pytree, metadata)``; with a `target`, its arrays are uncommitted
      on the default device (``jax.device_put`` of the values read), so they run on one
      device or sharded over any mesh, in one process or several.

    Raises:
      FileNotFoundError: no checkpoint at ``path``.
      ValueError: ``target`` does not match, listing every missing / extra leaf and every
        shape or dtype mismatch (leaf path and both shapes); or the stored bytes cannot be
        read (a truncated or damaged file).
    """
    path = _existing(path)
    if target is not None:
        _check_target(path, target)
        # read into this host's memory, whatever devices or processes wrote it (a model
        # trained over 8 GPUs loads on a laptop): orbax restores a NumPy leaf as a NumPy
        # array, here a view of one element that only gives the shape and dtype
        abstract = jax.tree.map(
            lambda x: np.broadcast_to(np.empty((), x.dtype), np.shape(x)), target)
        state_args = ocp.args.StandardRestore(abstract)
    else:
        state_args = ocp.args.StandardRestore()
    reason = None
    try:
        restored = _checkpointer().restore(path, ocp.args.Composite(
            state=state_args, metadata=ocp.args.JsonRestore()))
    except Exception as error:  # orbax and tensorstore raise bare Exceptions on bad bytes
        while error.__cause__ is not None or error.__context__ is not None:
            error = error.__cause__ or error.__context__  # the root says what is wrong
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    if reason is not None:
        _drop_failed_reads()
        raise ValueError(f"the checkpoint {path} cannot be read, it is damaged or incomplete "
                         f"({reason}); retrain it (rerun the command that wrote it, with "
                         "--overwrite)")
    pytree = restored.state
    if target is not None:
        # uncommitted on the default device, as fresh arrays are: a jitted computation takes
        # them to the devices of its other inputs or of its mesh, over one process or
        # several (arrays committed to one device of one process would meet neither)
        pytree = jax.tree.map(jax.device_put, pytree)
    return Restored(pytree=pytree, metadata=restored.metadata)


def _drop_failed_reads() -> None:
    """Silence the read coroutines orbax leaves behind when a read fails (and tensorstore's
    callbacks into orbax's closed event loop): Python would print a traceback for each when
    it collects them (now or at exit), around the one line that reports the failure. Other
    unraisable errors still reach the previous hook."""
    previous = sys.unraisablehook
    if getattr(previous, "drops_failed_reads", False):
        return

    def hook(unraisable) -> None:
        read = getattr(unraisable.object, "__qualname__", "") == _ORBAX_READ
        # tensorstore finishes the other reads after orbax's event loop has closed
        closed = (unraisable.exc_type is RuntimeError
                  and str(unraisable.exc_value) == "Event loop is closed")
        if not (read or closed):
            previous(unraisable)

    hook.drops_failed_reads = True
    sys.unraisablehook = hook
    gc.collect()


_ORBAX_READ = "_read_array_index_and_device_put"


def remove_resume_states(run_dir: str | Path) -> int:
    """Delete the resumable loop states (every ``last`` checkpoint) under a finished run's
    ``checkpoints/`` folder, keeping its metrics logs; returns the bytes freed. A finished
    run needs them no more: its result, model or learned explainer are saved apart."""
    freed = 0
    _all_processes_reach(f"smat finished {run_dir}")  # none still reads them
    if is_primary():
        for last in sorted(Path(run_dir, "checkpoints").rglob("last")):
            if last.is_dir():
                freed += sum(f.stat().st_size for f in last.rglob("*") if f.is_file())
                shutil.rmtree(last)
    _all_processes_reach(f"smat removed {run_dir}")
    return freed
