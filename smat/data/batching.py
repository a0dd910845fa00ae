"""Select rows of, and iterate in batches over, NamedTuples of equally long numpy arrays.

The batch order of an epoch is a pure function of (seed, epoch): an interrupted run that
resumes at epoch e (and, optionally, batch b via `start_batch`) sees exactly the batches it
would have seen without the interruption. Works for `Encoded` and for any NamedTuple whose
fields share their leading dimension (e.g. inputs with teacher predictions attached).

A split can also be dealt out into data shards (:class:`DataShards`: row i of the split
to shard i mod S), of which each process of a multi-process run holds and tokenizes only
its own block (:func:`owned_shards`). Every global batch then takes B / S rows of each
shard, in the shard's own order of (seed, epoch, shard): the batches depend on S, not on
how many processes hold the shards, so one process holding all S shards sees the global
batches of S processes.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np
from jaxtyping import Int

Rows = TypeVar("Rows", bound=NamedTuple)


def num_rows(data: NamedTuple) -> int:
    """The common leading dimension N of every field of `data`.

    Raises:
      TypeError: `data` is not a NamedTuple of arrays.
      ValueError: fields disagree on N, or a field is a scalar.
    """
    if not isinstance(data, tuple) or not hasattr(type(data), "_fields"):
        raise TypeError(f"expected a NamedTuple of arrays (e.g. Encoded), got {type(data)}")
    sizes = {}
    for name, value in zip(type(data)._fields, data, strict=True):
        shape = np.shape(value)
        if not shape:
            raise ValueError(f"field {name!r} is a scalar; every field needs a leading row axis")
        sizes[name] = shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"fields disagree on the number of rows: {sizes}")
    return next(iter(sizes.values()))


def take(data: Rows, indices: Sequence[int] | np.ndarray) -> Rows:
    """Rows `indices` of every field of `data`, as the same NamedTuple type.

    Args:
      data: a NamedTuple of arrays with N rows (e.g. `Encoded`).
      indices: (K,) integer row indices in [0, N).

    Returns:
      The same NamedTuple type with K rows per field.

    Raises:
      IndexError: an index outside [0, N).
    """
    n = num_rows(data)
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"row indices must lie in [0, {n}); got min {idx.min()}, max {idx.max()}")
    return type(data)(*(np.asarray(field)[idx] for field in data))


def num_batches(num_examples: int, *, batch_size: int, drop_last: bool = False) -> int:
    """Number of batches `iterate_batches` yields per epoch for `num_examples` rows."""
    return num_examples // batch_size if drop_last else math.ceil(num_examples / batch_size)


def epoch_order(num_examples: int, *, seed: int, epoch: int, shuffle: bool = True,
                shard: int | None = None) -> Int[np.ndarray, " n"]:
    """The row order of one epoch: a permutation seeded by (seed, epoch) only.

    Args:
      num_examples: N.
      seed: non-negative int, the run's data seed.
      epoch: non-negative int.
      shuffle: False returns 0..N-1.
      shard: a data shard's number, seeding its own order (None: a whole split).

    Returns:
      (N,) int64 row indices.

    Raises:
      TypeError / ValueError: seed or epoch not a non-negative int.
    """
    for name, value in (("seed", seed), ("epoch", epoch)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not shuffle:
        return np.arange(num_examples, dtype=np.int64)
    entropy = [int(seed), int(epoch)] + ([] if shard is None else [int(shard)])
    return np.random.default_rng(entropy).permutation(num_examples).astype(np.int64)


def iterate_batches(
    data: Rows,
    *,
    batch_size: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    drop_last: bool = False,
    start_batch: int = 0,
) -> Iterator[Rows]:
    """Yield the batches of one epoch, shuffled by (seed, epoch).

    Args:
      data: a NamedTuple of arrays with N rows (e.g. `Encoded`).
      batch_size: rows per batch (the last batch may be smaller unless drop_last).
      seed: non-negative int; with `epoch`, the only source of the batch order.
      epoch: non-negative int.
      shuffle: False keeps the row order.
      drop_last: drop the final incomplete batch (keeps every batch shape equal, so a jitted
        step compiles once).
      start_batch: skip the first `start_batch` batches of the epoch (resume mid-epoch).

    Returns:
      An iterator over batches of the same NamedTuple type, batch_size rows per field (fewer
      in the last batch unless drop_last).

    Example:
      >>> import numpy as np
      >>> from typing import NamedTuple
      >>> class Rows(NamedTuple):
      ...     x: np.ndarray
      >>> [b.x.tolist() for b in iterate_batches(Rows(np.arange(5)), batch_size=2, seed=0,
      ...                                        epoch=0, shuffle=False)]
      [[0, 1], [2, 3], [4]]

    Raises:
      ValueError: batch_size < 1, start_batch < 0, negative seed / epoch, empty data, or
        fields with different numbers of rows.
    """
    n = num_rows(data)
    if not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if not isinstance(start_batch, numbers.Integral) or start_batch < 0:
        raise ValueError(f"start_batch must be a non-negative int, got {start_batch!r}")
    if n == 0:
        raise ValueError("cannot iterate over an empty data set (0 rows)")
    order = epoch_order(n, seed=seed, epoch=epoch, shuffle=shuffle)
    count = num_batches(n, batch_size=batch_size, drop_last=drop_last)
    # A generator expression, so the argument checks above run eagerly at call time.
    return (take(data, order[b * batch_size:(b + 1) * batch_size])
            for b in range(start_batch, count))


def rounded_length(longest: int, multiple: int, width: int) -> int:
    """`longest` real tokens rounded up to `multiple`, at most `width` (the padded width).

    The columns beyond it are padding in every row, so cutting them changes no model output
    over real tokens; rounding keeps the number of distinct compiled shapes small.
    """
    if not isinstance(multiple, numbers.Integral) or multiple < 1:
        raise ValueError(f"multiple must be a positive int, got {multiple!r}")
    return min(width, multiple * math.ceil(longest / multiple))


def padded_length(attention_mask: np.ndarray, multiple: int) -> int:
    """The longest real row of `attention_mask` (N, T) rounded up to `multiple`, at most T
    (:func:`rounded_length`)."""
    mask = np.asarray(attention_mask)
    longest = int(np.max(np.sum(mask != 0, axis=1), initial=1))
    return rounded_length(longest, multiple, mask.shape[1])


def length_sorted_batches(attention_mask: np.ndarray, *,
                          batch_size: int) -> list[tuple[np.ndarray, int]]:
    """Batches of rows of similar real length, for evaluation over padded data.

    Rows are sorted by real length (stable), so each batch can be cut to its own longest
    row (:func:`padded_length`) instead of the data set's. Every batch has `batch_size`
    rows (one compiled shape per length): the last one repeats its first row.

    Args:
      attention_mask: (N, T), nonzero on real tokens.
      batch_size: rows per batch.

    Returns:
      ``(rows, count)`` per batch: (batch_size,) int64 row indices, of which the first
      `count` are distinct rows of the data (together, every row exactly once).

    Example:
      >>> mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
      >>> [(rows.tolist(), count) for rows, count in length_sorted_batches(mask, batch_size=2)]
      [([1, 2], 2), ([0, 0], 1)]
    """
    return batches_by_length(np.sum(np.asarray(attention_mask) != 0, axis=1),
                             batch_size=batch_size)


def batches_by_length(lengths: np.ndarray, *, batch_size: int) -> list[tuple[np.ndarray, int]]:
    """:func:`length_sorted_batches` of rows whose real lengths are `lengths` (N,)."""
    if not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    order = np.argsort(np.asarray(lengths), kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size].astype(np.int64)
        filled = np.concatenate([rows, np.full(batch_size - len(rows), rows[0])])
        batches.append((filled, len(rows)))
    return batches


def owned_shards(num_shards: int, process: int, num_processes: int) -> tuple[int, ...]:
    """The data shards that process `process` of `num_processes` holds: the process's
    contiguous block of ``num_shards / num_processes``, so that the processes' rows of a
    global batch come in the order of the mesh's devices (process 0's first).

    Raises:
      ValueError: `num_shards` is not a positive multiple of `num_processes`.
    """
    if num_shards < 1 or num_shards % num_processes:
        raise ValueError(f"--data-shards {num_shards} must be a positive multiple of the "
                         f"number of processes, {num_processes}")
    per = num_shards // num_processes
    return tuple(range(process * per, (process + 1) * per))


def shard_positions(num_examples: int, shard: int, num_shards: int) -> np.ndarray:
    """The positions in a split of N rows that data shard `shard` of `num_shards` holds:
    every `num_shards`-th row from row `shard`."""
    return np.arange(shard, num_examples, num_shards, dtype=np.int64)


@dataclasses.dataclass(frozen=True)
class DataShards:
    """This process's data shards of a split of `num_examples` rows dealt out over
    `num_shards` shards (:func:`shard_positions`).

    Attributes:
      shards: the rows of each held shard (NamedTuples of arrays, e.g. ``Encoded``).
      shard_ids: their shard numbers, ascending.
      num_shards: S, the shards of the whole split.
      num_examples: the rows of the whole split.

    Raises:
      ValueError: a held shard whose row count is not its share of the split.
    """

    shards: tuple[Any, ...]
    shard_ids: tuple[int, ...]
    num_shards: int
    num_examples: int

    def __post_init__(self) -> None:
        if len(self.shards) != len(self.shard_ids) or not self.shards:
            raise ValueError("DataShards needs one or more shards, one number per shard")
        for rows, shard in zip(self.shards, self.shard_ids, strict=True):
            wanted = len(shard_positions(self.num_examples, shard, self.num_shards))
            if num_rows(rows) != wanted:
                raise ValueError(f"data shard {shard} of {self.num_shards} holds "
                                 f"{num_rows(rows)} rows; a split of {self.num_examples} "
                                 f"gives it {wanted}")


def split_size(data: NamedTuple | DataShards) -> int:
    """The rows of the whole split (of every process, for data shards)."""
    return data.num_examples if isinstance(data, DataShards) else num_rows(data)


def batches_per_epoch(data: NamedTuple | DataShards, *, batch_size: int) -> int:
    """The full batches of one epoch (:func:`epoch_batches`); of data shards, as many as
    the smallest shard fills with its ``batch_size / num_shards`` rows each.

    Raises:
      ValueError: a batch size that is not a multiple of the number of data shards.
    """
    if not isinstance(data, DataShards):
        return num_batches(num_rows(data), batch_size=batch_size, drop_last=True)
    if batch_size % data.num_shards:
        raise ValueError(f"the batch size {batch_size} must be a multiple of --data-shards "
                         f"{data.num_shards}: every shard gives each batch the same rows")
    smallest = len(shard_positions(data.num_examples, data.num_shards - 1, data.num_shards))
    return smallest // (batch_size // data.num_shards)


def epoch_batches(data: Rows | DataShards, *, batch_size: int, seed: int, epoch: int,
                  start_batch: int = 0) -> Iterator[Rows]:
    """The full batches of one epoch from `start_batch` on: of a split,
    :func:`iterate_batches` (``drop_last``); of data shards, this process's rows of every
    global batch: each held shard's next ``batch_size / num_shards`` rows in its order of
    (seed, epoch, shard), the held shards' rows one after the other.

    Raises:
      ValueError: as :func:`iterate_batches` and :func:`batches_per_epoch`.
    """
    if not isinstance(data, DataShards):
        return iterate_batches(data, batch_size=batch_size, seed=seed, epoch=epoch,
                               drop_last=True, start_batch=start_batch)
    count = batches_per_epoch(data, batch_size=batch_size)
    per = batch_size // data.num_shards
    orders = [epoch_order(num_rows(rows), seed=seed, epoch=epoch, shard=shard)
              for rows, shard in zip(data.shards, data.shard_ids, strict=True)]

    def batch(b: int) -> Rows:
        parts = [take(rows, order[b * per:(b + 1) * per])
                 for rows, order in zip(data.shards, orders, strict=True)]
        return type(parts[0])(*(np.concatenate(fields) for fields in zip(*parts, strict=True)))

    return (batch(b) for b in range(start_batch, count))
