"""Select rows of, and iterate in batches over, NamedTuples of equally long numpy arrays.

The batch order of an epoch is a pure function of (seed, epoch): an interrupted run that
resumes at epoch e (and, optionally, batch b via `start_batch`) sees exactly the batches it
would have seen without the interruption. Works for `Encoded` and for any NamedTuple whose
fields share their leading dimension (e.g. inputs with teacher predictions attached).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeVar

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


def epoch_order(num_examples: int, *, seed: int, epoch: int,
                shuffle: bool = True) -> Int[np.ndarray, " n"]:
    """The row order of one epoch: a permutation seeded by (seed, epoch) only.

    Args:
      num_examples: N.
      seed: non-negative int, the run's data seed.
      epoch: non-negative int.
      shuffle: False returns 0..N-1.

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
    rng = np.random.default_rng([int(seed), int(epoch)])
    return rng.permutation(num_examples).astype(np.int64)


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


def padded_length(attention_mask: np.ndarray, multiple: int) -> int:
    """The longest real row of `attention_mask` (N, T) rounded up to `multiple`, at most T.

    The columns beyond it are padding in every row, so cutting them changes no model output
    over real tokens; rounding keeps the number of distinct compiled shapes small.
    """
    if not isinstance(multiple, numbers.Integral) or multiple < 1:
        raise ValueError(f"multiple must be a positive int, got {multiple!r}")
    mask = np.asarray(attention_mask)
    longest = int(np.max(np.sum(mask != 0, axis=1), initial=1))
    return min(mask.shape[1], multiple * math.ceil(longest / multiple))


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
    if not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    order = np.argsort(np.sum(np.asarray(attention_mask) != 0, axis=1), kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size].astype(np.int64)
        filled = np.concatenate([rows, np.full(batch_size - len(rows), rows[0])])
        batches.append((filled, len(rows)))
    return batches
