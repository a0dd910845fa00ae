"""The in-memory data set records every smat.data loader returns, and label encoding.

`TextDataset` holds raw texts (optionally text pairs) with integer class ids or float
regression targets plus the label vocabulary; `RationaleDataset` adds word-level human
annotations (ERASER rationales, MLQE-PE OK/BAD tags). `encode_labels` turns a column of raw
labels (strings, ints, floats) into those targets, with errors that name the offending row.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

TASKS = ("classification", "regression")
# A class this small in a column whose largest class has at least RARE_LABEL_CONTEXT rows
# is more likely a typo (a class of its own) or an unused id than data: it is warned about.
RARE_LABEL_ROWS = 5
RARE_LABEL_CONTEXT = 100


class RareLabelWarning(UserWarning):
    """An inferred label vocabulary holds a class with almost no rows (see
    :func:`encode_labels`)."""


def check_task(task: str) -> None:
    """Raise unless `task` is one of `TASKS`.

    Raises:
      ValueError: `task` is not "classification" or "regression".
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TextDataset:
    """Texts (optionally text pairs) with their targets, as loaded from a source.

    Attributes:
      texts: the N first-segment texts.
      labels: (N,) int32 class ids in [0, num_labels) for classification, or (N,) float32
        targets for regression.
      task: "classification" or "regression".
      text_pairs: the N second-segment texts (src/mt, premise/hypothesis), or None.
      label_names: the label vocabulary (class id i is `label_names[i]`) for classification;
        None for regression.
      num_dropped: rows of the source left out by the loader's documented protocol (e.g.
        rating == 0 in `movie-snippets` classification); 0 when nothing was dropped.
      source: a human-readable description of where the rows came from.
      student_rows: the last this many rows come from a second, student source (the SMaT
        protocol's two-split layout: the teacher learns from one split, the students' parts
        are carved from another); 0 when every row comes from one source.

    Raises:
      ValueError / TypeError: inconsistent lengths, dtypes or label ranges.
    """

    texts: tuple[str, ...]
    labels: np.ndarray
    task: str
    text_pairs: tuple[str, ...] | None = None
    label_names: tuple[str, ...] | None = None
    num_dropped: int = 0
    source: str = ""
    student_rows: int = 0

    def __post_init__(self) -> None:
        check_task(self.task)
        n = len(self.texts)
        if not 0 <= self.student_rows <= n:
            raise ValueError(f"student_rows must be in [0, {n}], got {self.student_rows}")
        labels = np.asarray(self.labels)
        if labels.shape != (n,):
            raise ValueError(f"labels must have shape ({n},) to match the {n} texts, "
                             f"got {labels.shape}")
        if self.text_pairs is not None and len(self.text_pairs) != n:
            raise ValueError(f"text_pairs has {len(self.text_pairs)} entries but texts has {n}")
        if self.task == "classification":
            if labels.dtype != np.int32:
                raise TypeError(f"classification labels must be int32, got {labels.dtype}")
            if self.label_names is None:
                raise ValueError("classification data needs label_names (the label vocabulary)")
            bad = (labels < 0) | (labels >= len(self.label_names))
            if bad.any():
                raise ValueError(f"label ids {sorted(set(labels[bad].tolist()))[:5]} are outside "
                                 f"[0, {len(self.label_names)}) for label_names {self.label_names}")
        else:
            if labels.dtype != np.float32:
                raise TypeError(f"regression labels must be float32, got {labels.dtype}")
            if self.label_names is not None:
                raise ValueError("regression data has no label_names; got "
                                 f"{self.label_names}")

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def num_labels(self) -> int:
        """Number of classes (classification) or 1 (regression): the model's output width."""
        return 1 if self.label_names is None else len(self.label_names)

    def select(self, indices: Sequence[int] | np.ndarray) -> TextDataset:
        """Return the rows at `indices` (in that order) as a new `TextDataset`.

        Args:
          indices: (K,) integer row indices into this data set.

        Returns:
          A `TextDataset` with K rows and the same task, label vocabulary and source.

        Raises:
          IndexError: an index is outside [0, N).
        """
        idx = _check_indices(indices, len(self))
        pairs = None if self.text_pairs is None else tuple(self.text_pairs[i] for i in idx)
        return dataclasses.replace(self, texts=tuple(self.texts[i] for i in idx),
                                   labels=self.labels[idx], text_pairs=pairs, student_rows=0)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class RationaleDataset:
    """A `TextDataset` with word-level human annotations on its whitespace-separated words.

    Words are `text.split()` of the annotated segment (the loaders build texts by joining
    pre-tokenized words with single spaces), so word i of example n is annotated by
    `word_masks[n][i]`.

    Attributes:
      data: the texts and targets.
      word_masks: per example, a (W_n,) bool mask over the words of `data.texts[n]` (True =
        human rationale / BAD word), or None when the first segment is not annotated.
      pair_word_masks: the same over the words of `data.text_pairs[n]`, or None.
      ids: an identifier per example (ERASER annotation id, MLQE "<pair>/<split>/<line>").

    Raises:
      ValueError: a mask count or length does not match the texts.
    """

    data: TextDataset
    word_masks: tuple[np.ndarray, ...] | None
    pair_word_masks: tuple[np.ndarray, ...] | None = None
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.data)
        if self.ids and len(self.ids) != n:
            raise ValueError(f"ids has {len(self.ids)} entries but the data has {n} rows")
        for name, masks, texts in (("word_masks", self.word_masks, self.data.texts),
                                   ("pair_word_masks", self.pair_word_masks,
                                    self.data.text_pairs)):
            if masks is None:
                continue
            if texts is None:
                raise ValueError(f"{name} given but the data has no text_pairs")
            if len(masks) != n:
                raise ValueError(f"{name} has {len(masks)} entries but the data has {n} rows")
            for i, (mask, text) in enumerate(zip(masks, texts, strict=True)):
                if mask.dtype != np.bool_ or mask.shape != (len(text.split()),):
                    raise ValueError(f"{name}[{i}] must be a bool mask of shape "
                                     f"({len(text.split())},) (one per word), got "
                                     f"{mask.dtype} {mask.shape}")

    def __len__(self) -> int:
        return len(self.data)

    def select(self, indices: Sequence[int] | np.ndarray) -> RationaleDataset:
        """Return the rows at `indices` (in that order), masks and ids included.

        Raises:
          IndexError: an index is outside [0, N).
        """
        idx = _check_indices(indices, len(self))

        def pick(masks: tuple[np.ndarray, ...] | None) -> tuple[np.ndarray, ...] | None:
            return None if masks is None else tuple(masks[i] for i in idx)

        return RationaleDataset(data=self.data.select(idx), word_masks=pick(self.word_masks),
                                pair_word_masks=pick(self.pair_word_masks),
                                ids=tuple(self.ids[i] for i in idx) if self.ids else ())


def _check_indices(indices: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"row indices must lie in [0, {n}); got min {idx.min()}, "
                         f"max {idx.max()}")
    return idx


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _as_class_id(value: Any) -> int | None:
    """The integer a numeric label stands for, or None when it is not integral."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    return None


def encode_labels(
    values: Sequence[Any],
    *,
    task: str,
    num_labels: int | None = None,
    label_names: Sequence[str] | None = None,
    column: str = "label",
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Turn a column of raw labels into training targets and a label vocabulary.

    Classification: string labels map to their position in `label_names` (default: the sorted
    distinct strings); integer labels (or integral floats / bools) are used as ids directly and
    must lie in [0, num_labels) (default num_labels: max + 1). Regression: every value must be
    a finite number.

    Args:
      values: the N raw labels.
      task: "classification" or "regression".
      num_labels: expected number of classes (classification only).
      label_names: the label vocabulary, fixing the id of each string label.
      column: the column name, quoted in error messages.

    Returns:
      (labels, label_names): (N,) int32 ids and the vocabulary (classification), or (N,)
      float32 targets and None (regression).

    Raises:
      ValueError: a missing value, a label outside num_labels or the vocabulary, or a
        vocabulary whose size disagrees with num_labels.
      TypeError: a label type that fits neither task.

    Warns:
      RareLabelWarning: a vocabulary inferred from the data (neither `num_labels` nor
        `label_names` given) has a class with fewer than 5 rows while its largest has at
        least 100 (a typo, or ids a stray large id implies).
    """
    check_task(task)
    inferred = num_labels is None and label_names is None  # the vocabulary comes from the data
    values = list(values)
    for i, v in enumerate(values):
        if _is_missing(v):
            raise ValueError(f"column {column!r} has a missing label at row {i}")
    if task == "regression":
        if num_labels not in (None, 1) or label_names is not None:
            raise ValueError("regression takes no label_names and num_labels must be None or 1, "
                             f"got num_labels={num_labels}, label_names={label_names}")
        out = np.empty(len(values), dtype=np.float32)
        for i, v in enumerate(values):
            if isinstance(v, str) or not isinstance(v, numbers.Real):
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise TypeError(f"regression needs numeric labels; column {column!r} row {i} "
                                    f"is {v!r}") from None
            if not math.isfinite(v):
                raise ValueError(f"column {column!r} row {i} has a non-finite target {v!r}")
            out[i] = v
        return out, None

    if num_labels is not None and (not isinstance(num_labels, int) or num_labels < 1):
        raise ValueError(f"num_labels must be a positive int, got {num_labels!r}")
    if label_names is not None:
        names = tuple(str(n) for n in label_names)
        if len(set(names)) != len(names):
            raise ValueError(f"label_names has duplicates: {names}")
        if num_labels is not None and num_labels != len(names):
            raise ValueError(f"num_labels={num_labels} but label_names has {len(names)} "
                             f"entries: {names}")
        num_labels = len(names)

    is_str = [isinstance(v, str) for v in values]
    if any(is_str) and not all(is_str):
        first = is_str.index(False) if is_str[0] else is_str.index(True)
        raise TypeError(f"column {column!r} mixes string and non-string labels "
                        f"(row 0: {values[0]!r}, row {first}: {values[first]!r})")
    if values and all(is_str):
        if label_names is None:
            names = tuple(sorted(set(values)))
            if num_labels is not None and len(names) != num_labels:
                raise ValueError(f"column {column!r} has {len(names)} distinct labels {names} "
                                 f"but num_labels={num_labels}; pass label_names to fix the "
                                 "label vocabulary")
        index = {n: i for i, n in enumerate(names)}
        unknown = sorted({v for v in values if v not in index})
        if unknown:
            raise ValueError(f"column {column!r} has labels {unknown[:5]} outside the label "
                             f"vocabulary {names}")
        labels = np.asarray([index[v] for v in values], dtype=np.int32)
        if inferred:
            _warn_rare_labels(labels, names, column=column)
        return labels, names

    ids = []
    for i, v in enumerate(values):
        c = _as_class_id(v)
        if c is None:
            raise TypeError(f"classification needs string or integer labels; column {column!r} "
                            f"row {i} is {v!r}")
        ids.append(c)
    labels = np.asarray(ids, dtype=np.int64)
    if num_labels is None:
        num_labels = int(labels.max()) + 1 if labels.size else 1
    bad = np.flatnonzero((labels < 0) | (labels >= num_labels))
    if bad.size:
        raise ValueError(f"column {column!r} has labels {sorted(set(labels[bad].tolist()))[:5]} "
                         f"(rows {bad[:5].tolist()}) outside [0, num_labels={num_labels})")
    if label_names is None:
        names = tuple(str(i) for i in range(num_labels))
        if inferred:
            _warn_rare_labels(labels, names, column=column)
    return labels.astype(np.int32), names


def _warn_rare_labels(labels: np.ndarray, names: Sequence[str], *, column: str) -> None:
    """Warn about classes of an inferred vocabulary with fewer than RARE_LABEL_ROWS rows
    when the largest has at least RARE_LABEL_CONTEXT: "positve" among 3,000 "positive" /
    "negative" rows, or the ids 2-10 a single "11" implies, would each train as a class."""
    counts = np.bincount(labels, minlength=len(names))
    if counts.max() < RARE_LABEL_CONTEXT:
        return
    rare = [i for i in range(len(names)) if counts[i] < RARE_LABEL_ROWS]
    if not rare:
        return
    described = ", ".join(
        f"{names[i]!r} ({counts[i]} row{'' if counts[i] == 1 else 's'}"
        + (f", e.g. row {int(np.argmax(labels == i))})" if counts[i] else ")")
        for i in rare[:5])
    warnings.warn(RareLabelWarning(
        f"column {column!r}: {len(rare)} of its {len(names)} classes have fewer than "
        f"{RARE_LABEL_ROWS} of {labels.size} rows: {described}"
        f"{' ...' if len(rare) > 5 else ''}; each trains as a class of its own. A typo in a "
        "label? Fix those rows"), stacklevel=3)
