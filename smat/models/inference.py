"""The one batched inference loop over tokenized data, and predictions.

Every model call over a data set goes through :func:`map_batches`: rows in length-sorted
batches of a fixed size (the last one padded with copies of its first row, so one compiled
shape serves each length), each batch cut to its longest row rounded up to a multiple (only
padding columns go, so outputs over real tokens are unchanged), and sharded over the device
mesh when there is one (:mod:`smat.parallel`); outputs come back in row order. Inside
``with progress_bars():`` (the command line enters it unless ``--no-progress``) each pass
shows a tqdm bar over its rows, with an ETA.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Collection, Iterator
from typing import Any

import jax
import numpy as np
from flax import nnx
from tqdm.auto import tqdm

from smat.data import Encoded, length_sorted_batches, padded_length, take
from smat.models import functional
from smat.parallel import resolve_mesh, shard_batch, to_host

_SHOW_PROGRESS = contextvars.ContextVar("smat_show_progress", default=False)


@contextlib.contextmanager
def progress_bars(enabled: bool = True) -> Iterator[None]:
    """Show (or not) a progress bar over the rows of every :func:`map_batches` pass inside
    the block; outside any such block no bar is shown (library calls stay quiet)."""
    token = _SHOW_PROGRESS.set(enabled)
    try:
        yield
    finally:
        _SHOW_PROGRESS.reset(token)


def trim_to_length(batch: Encoded, multiple: int) -> Encoded:
    """Cut every (N, T) field to the batch's longest sequence, rounded up to `multiple`.

    Only padding columns are removed, so any model output over real tokens is unchanged.
    """
    length = padded_length(batch.attention_mask, multiple)
    return batch._replace(
        input_ids=batch.input_ids[:, :length],
        attention_mask=batch.attention_mask[:, :length],
        token_type_ids=batch.token_type_ids[:, :length],
        special_tokens_mask=batch.special_tokens_mask[:, :length],
    )


@functools.partial(jax.jit, static_argnames=("graphdef",))
def batch_logits(graphdef, params, input_ids, attention_mask, token_type_ids) -> jax.Array:
    """The model's outputs (B, C) on one batch, in eval mode (one jitted call)."""
    return functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids, attention="none").logits


def map_batches(
    fn: Callable[[Encoded, np.ndarray, Encoded], dict[str, Any]],
    data: Encoded,
    *,
    batch_size: int,
    length_multiple: int | None = 16,
    per_token: Collection[str] = (),
    mesh: jax.sharding.Mesh | None = None,
    desc: str = "rows",
) -> dict[str, np.ndarray]:
    """Run `fn` over every row of `data` in batches; its outputs come back in row order.

    Rows go in batches of similar length (:func:`smat.data.length_sorted_batches`: every
    batch has `batch_size` rows, the last one repeats its first row, so one compiled shape
    serves each length), each cut to its longest row rounded up to `length_multiple`
    (None: never cut). With a `mesh` (or an ambient one, see
    :func:`smat.parallel.resolve_mesh`) the model inputs of every batch are sharded over
    its devices, so `batch_size` must be a multiple of their number.

    Args:
      fn: ``(batch, rows, full) -> {name: (batch_size, ...) array}``: `batch` is the cut
        batch, `full` the same rows uncut (input ids, attention mask and token type ids
        sharded in both), `rows` their (batch_size,) indices into `data`.
      data: tokenized rows.
      batch_size: rows per call.
      length_multiple: batches are cut to a multiple of this many columns.
      per_token: the outputs whose last axis is the (cut) sequence; they come back padded
        with zeros to the full length of `data`.
      mesh: data parallelism over devices.
      desc: the progress bar's label (inside :func:`progress_bars`).

    Returns:
      Every output of `fn` for all N rows, ``(N, ...)`` numpy arrays in `data`'s order.
    """
    mesh = resolve_mesh(mesh)
    length = data.input_ids.shape[1]
    outputs: dict[str, np.ndarray] = {}
    bar = tqdm(total=len(data.labels), desc=desc, unit="row", leave=False,
               disable=not _SHOW_PROGRESS.get())
    for rows, count in length_sorted_batches(data.attention_mask, batch_size=batch_size):
        full = take(data, rows)
        cut = full if length_multiple is None else trim_to_length(full, length_multiple)
        values = to_host(fn(_placed(cut, mesh), rows, _placed(full, mesh)))
        for name, value in values.items():
            value = np.asarray(value)[:count]
            if name not in outputs:
                shape = (*value.shape[1:-1], length) if name in per_token else value.shape[1:]
                outputs[name] = np.zeros((len(data.labels), *shape), value.dtype)
            if name in per_token:
                outputs[name][rows[:count], ..., :value.shape[-1]] = value
            else:
                outputs[name][rows[:count]] = value
        bar.update(count)
    bar.close()
    return outputs


def _placed(batch: Encoded, mesh: jax.sharding.Mesh | None) -> Encoded:
    """The batch with its model inputs sharded over the mesh (unchanged without one)."""
    if mesh is None:
        return batch
    ids, mask, types = shard_batch((batch.input_ids, batch.attention_mask,
                                    batch.token_type_ids), mesh)
    return batch._replace(input_ids=ids, attention_mask=mask, token_type_ids=types)


def predict_logits(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *,
                   batch_size: int = 64, length_multiple: int = 16,
                   mesh: jax.sharding.Mesh | None = None) -> np.ndarray:
    """Model outputs (N, C) for every row of `data`, in order, in eval mode (no dropout),
    through :func:`map_batches`."""

    def logits(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, jax.Array]:
        return {"logits": batch_logits(graphdef, params, batch.input_ids,
                                       batch.attention_mask, batch.token_type_ids)}

    return map_batches(logits, data, batch_size=batch_size, length_multiple=length_multiple,
                       mesh=mesh)["logits"]


def predictions_from_logits(logits: np.ndarray, task: str) -> np.ndarray:
    """Class ids (argmax) for classification, the single output for regression."""
    return np.argmax(logits, axis=-1) if task == "classification" else logits[:, 0]
