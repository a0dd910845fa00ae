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
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx
from tqdm.auto import tqdm

from smat.data import (
    Encoded,
    batches_by_length,
    length_sorted_batches,
    padded_length,
    rounded_length,
    take,
)
from smat.models import functional
from smat.parallel import gather_blocks, process_blocks, resolve_mesh, shard_batch, to_host

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
    return _cut(batch, padded_length(batch.attention_mask, multiple))


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
    num_rows: int | None = None,
) -> dict[str, np.ndarray]:
    """Run `fn` over every row of `data` in batches; its outputs come back in row order.

    Rows go in batches of similar length (:func:`smat.data.length_sorted_batches`: every
    batch has `batch_size` rows, the last one repeats its first row, so one compiled shape
    serves each length), each cut to its longest row rounded up to `length_multiple`
    (None: never cut). With a `mesh` (or an ambient one, see
    :func:`smat.parallel.resolve_mesh`) the model inputs of every batch are sharded over
    its devices, so `batch_size` must be a multiple of their number.

    With `num_rows`, `data` is only this process's block of a data set of `num_rows` rows
    (:func:`smat.parallel.process_block`): each global batch takes ``batch_size / P`` of
    every process's rows (length-sorted within its block), is cut to the longest of them,
    and is assembled from the processes' parts; every process gets the outputs of all
    `num_rows` rows.

    Args:
      fn: ``(batch, rows, full) -> {name: (batch_size, ...) array}``: `batch` is the cut
        batch, `full` the same rows uncut (input ids, attention mask and token type ids
        sharded in both), `rows` their (batch_size,) indices into `data`. With `num_rows`
        the labels are the whole batch's too, its special-tokens mask this process's rows.
      data: tokenized rows.
      batch_size: rows per call.
      length_multiple: batches are cut to a multiple of this many columns.
      per_token: the outputs whose last axis is the (cut) sequence; they come back padded
        with zeros to the full length of `data`.
      mesh: data parallelism over devices.
      desc: the progress bar's label (inside :func:`progress_bars`).
      num_rows: the rows of the whole data set when `data` is this process's block.

    Returns:
      Every output of `fn` for all N rows, ``(N, ...)`` numpy arrays in `data`'s order.

    Raises:
      ValueError: with `num_rows`, a batch that does not divide over the processes, or a
        process without rows.
    """
    mesh = resolve_mesh(mesh)
    length = data.input_ids.shape[1]
    if num_rows is None:
        batches = _batches(data, batch_size=batch_size, length_multiple=length_multiple)
    else:
        batches = _block_batches(data, num_rows, batch_size=batch_size,
                                 length_multiple=length_multiple)
    outputs: dict[str, np.ndarray] = {}
    bar = tqdm(total=num_rows or len(data.labels), desc=desc, unit="row", leave=False,
               disable=not _SHOW_PROGRESS.get())
    for batch in batches:
        placed = {name: _placed(part, mesh, process_local=num_rows is not None)
                  for name, part in (("cut", batch.cut), ("full", batch.full))}
        values = to_host(fn(placed["cut"], batch.rows, placed["full"]))
        rows = batch.rows[batch.kept]
        for name, value in values.items():
            value = np.asarray(value)[batch.kept]
            if name not in outputs:
                shape = (*value.shape[1:-1], length) if name in per_token else value.shape[1:]
                outputs[name] = np.zeros((num_rows or len(data.labels), *shape), value.dtype)
            if name in per_token:
                outputs[name][rows, ..., :value.shape[-1]] = value
            else:
                outputs[name][rows] = value
        bar.update(len(rows))
    bar.close()
    return outputs


class _Batch(NamedTuple):
    """One call of :func:`map_batches`: this process's rows of the batch, uncut and cut,
    the (global) row indices of the whole batch and which of them are kept."""

    full: Encoded
    cut: Encoded
    rows: np.ndarray  # (batch_size,) row indices into the (whole) data set
    kept: np.ndarray  # (batch_size,) bool: a distinct row whose outputs are kept


def _batches(data: Encoded, *, batch_size: int, length_multiple: int | None) -> Iterator[_Batch]:
    for rows, count in length_sorted_batches(data.attention_mask, batch_size=batch_size):
        full = take(data, rows)
        cut = full if length_multiple is None else trim_to_length(full, length_multiple)
        yield _Batch(full, cut, rows, np.arange(batch_size) < count)


def _block_batches(data: Encoded, num_rows: int, *, batch_size: int,
                   length_multiple: int | None) -> Iterator[_Batch]:
    """The batches of :func:`map_batches` over processes' blocks: the same plan on every
    process (:func:`block_plan`, from every block's lengths and labels: one all-gather),
    each process holding its own rows of each batch."""
    blocks = process_blocks(num_rows)
    mine = blocks[jax.process_index()]
    if len(data.labels) != mine.stop - mine.start:
        raise ValueError(f"this process holds {len(data.labels)} rows; its block of "
                         f"{num_rows} is rows {mine.start}..{mine.stop - 1}")
    lengths, labels = gather_blocks((np.sum(data.attention_mask != 0, axis=1),
                                     np.asarray(data.labels)), num_rows)
    for batch in block_plan(lengths, blocks, batch_size=batch_size,
                            length_multiple=length_multiple, width=data.input_ids.shape[1]):
        full = take(data, batch.parts[jax.process_index()])._replace(labels=labels[batch.rows])
        yield _Batch(full, _cut(full, batch.length), batch.rows, batch.kept)


class BlockBatch(NamedTuple):
    """One global batch over processes' blocks (:func:`block_plan`)."""

    rows: np.ndarray  # (batch_size,) row indices of the whole data set, block by block
    kept: np.ndarray  # (batch_size,) bool: a distinct row whose outputs are kept
    parts: list[np.ndarray]  # per process, its (batch_size / P,) rows, indices into its block
    length: int  # the columns the batch is cut to


def block_plan(lengths: np.ndarray, blocks: list[slice], *, batch_size: int,
               length_multiple: int | None, width: int) -> list[BlockBatch]:
    """The global batches over processes' contiguous `blocks` of rows with real `lengths`:
    batch k takes the k-th length-sorted ``batch_size / P`` rows of every block (a block
    with fewer batches repeats its first one, none of it kept) and is cut to its longest
    kept row rounded up to `length_multiple` (at most `width`; None: never cut).

    Raises:
      ValueError: a batch that does not divide over the blocks, or an empty block.
    """
    if batch_size % len(blocks):
        raise ValueError(f"batch size {batch_size} does not divide over {len(blocks)} "
                         "processes")
    empty = [q for q, block in enumerate(blocks) if block.stop == block.start]
    if empty:
        raise ValueError(f"{blocks[-1].stop} rows over {len(blocks)} processes leave process "
                         f"{empty[0]} without rows; run fewer processes")
    part = batch_size // len(blocks)
    plans = [batches_by_length(lengths[block], batch_size=part) for block in blocks]
    batches = []
    for step in range(max(len(plan) for plan in plans)):
        local = [plan[step] if step < len(plan) else (plan[0][0], 0) for plan in plans]
        rows = np.concatenate([block.start + r for block, (r, _) in zip(blocks, local,
                                                                       strict=True)])
        kept = np.concatenate([np.arange(part) < n for _, n in local])
        longest = int(lengths[rows[kept]].max())
        length = (width if length_multiple is None
                  else rounded_length(longest, length_multiple, width))
        batches.append(BlockBatch(rows, kept, [r for r, _ in local], length))
    return batches


def _cut(batch: Encoded, length: int) -> Encoded:
    return batch._replace(**{name: getattr(batch, name)[:, :length] for name in
                             ("input_ids", "attention_mask", "token_type_ids",
                              "special_tokens_mask")})


def _placed(batch: Encoded, mesh: jax.sharding.Mesh | None, *,
            process_local: bool = False) -> Encoded:
    """The batch with its model inputs sharded over the mesh (unchanged without one); with
    `process_local` they are this process's rows of the global batch."""
    if mesh is None:
        return batch
    ids, mask, types = shard_batch((batch.input_ids, batch.attention_mask,
                                    batch.token_type_ids), mesh, process_local=process_local)
    return batch._replace(input_ids=ids, attention_mask=mask, token_type_ids=types)


def predict_logits(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *,
                   batch_size: int = 64, length_multiple: int = 16,
                   mesh: jax.sharding.Mesh | None = None,
                   num_rows: int | None = None) -> np.ndarray:
    """Model outputs (N, C) for every row of `data`, in order, in eval mode (no dropout),
    through :func:`map_batches` (`data` this process's block of `num_rows` rows, if
    given)."""

    def logits(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, jax.Array]:
        return {"logits": batch_logits(graphdef, params, batch.input_ids,
                                       batch.attention_mask, batch.token_type_ids)}

    return map_batches(logits, data, batch_size=batch_size, length_multiple=length_multiple,
                       mesh=mesh, num_rows=num_rows)["logits"]


def predictions_from_logits(logits: np.ndarray, task: str) -> np.ndarray:
    """Class ids (argmax) for classification, the single output for regression."""
    return np.argmax(logits, axis=-1) if task == "classification" else logits[:, 0]
