"""Load a text data set from any Hugging Face `datasets` source into a `TextDataset`.

A source is either local files (csv / tsv / json / jsonl / parquet, optionally .gz) or a Hub
id such as "imdb" or "glue" (with `name="sst2"`). `datasets` is imported lazily, so importing
smat.data stays cheap and nothing touches the network until a Hub id is loaded.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.data.dataset import TextDataset, check_task, encode_labels

# File suffix -> `datasets` packaged builder.
LOCAL_FORMATS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json",
                 ".parquet": "parquet"}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")

Source = str | os.PathLike | Sequence[str | os.PathLike]


def _local_format(path: Path) -> str | None:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes and suffixes[-1] in LOCAL_FORMATS else None


def _local_files(source: Source) -> list[Path] | None:
    """The local files `source` names, or None when it is a Hub id."""
    if isinstance(source, str | os.PathLike):
        items = [source]
    else:
        items = list(source)
        if not items:
            raise ValueError("source is an empty list of files")
    paths = [Path(p) for p in items]
    looks_local = [isinstance(s, os.PathLike) or p.exists() or _local_format(p) is not None
                   for s, p in zip(items, paths, strict=True)]
    if not any(looks_local):
        if len(items) == 1:
            return None
        raise ValueError(f"a list source must name local files, got {items}")
    first_lines: dict[Path, str | None] = {}
    for p in paths:
        if p.is_dir():
            raise ValueError(f"data source {str(p)!r} is a folder; pass its data files "
                             f"(e.g. {str(p / 'train.csv')!r})")
        if not p.is_file():
            raise FileNotFoundError(f"data file {str(p)!r} does not exist")
        if _local_format(p) is None:
            raise ValueError(f"data file {str(p)!r} has an unsupported extension; expected one "
                             f"of {sorted(LOCAL_FORMATS)} (optionally + {_COMPRESSIONS})")
        if LOCAL_FORMATS[_local_format(p)] != "parquet":
            first_lines[p] = _check_text_file(p)
    formats = {LOCAL_FORMATS[_local_format(p)] for p in paths}
    suffixes = {_local_format(p) for p in paths}
    if len(formats) > 1 or (".tsv" in suffixes and len(suffixes) > 1):
        raise ValueError(f"all data files must share one format, got {sorted(suffixes)}")
    _check_same_columns(paths, first_lines)
    return paths


_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _check_text_file(path: Path) -> str | None:
    """Refuse an empty or non-UTF-8 text data file, naming it and the first bad line
    (`datasets` would fail deep inside its builder with a long traceback). Returns the
    file's first line (None for .zst, which the standard library cannot open)."""
    suffix = path.suffix.lower()
    if suffix == ".zst":  # no decompressor in the standard library: left to `datasets`
        return None
    first = None
    with _OPENERS.get(suffix, open)(path, "rb") as stream:
        empty = True
        for number, line in enumerate(stream, start=1):
            empty = empty and not line.strip()
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"data file {str(path)!r} is not UTF-8 text: line {number}, "
                                 f"byte {error.start + 1} ({line[error.start:error.start + 1]!r}"
                                 "); re-save it as UTF-8") from None
            first = text if first is None else first
    if empty:
        raise ValueError(f"data file {str(path)!r} is empty: it needs a header row and at "
                         "least one example")
    return first


def _header(path: Path, first_line: str | None) -> list[str] | None:
    """The column names in `first_line` of a csv / tsv data file (None for other formats
    and for an unread first line)."""
    suffix = _local_format(path)
    if LOCAL_FORMATS[suffix] != "csv" or first_line is None:
        return None
    first_line = first_line.rstrip("\r\n")
    return next(csv.reader([first_line], delimiter="\t" if suffix == ".tsv" else ","), [])


def _check_same_columns(paths: list[Path], first_lines: dict[Path, str | None]) -> None:
    """Refuse csv / tsv files loaded together whose headers differ, naming both (`datasets`
    fails on them with "An error occurred while generating the dataset")."""
    headers = [(path, _header(path, first_lines.get(path))) for path in paths]
    first_path, first = headers[0]
    for path, header in headers[1:]:
        if header is not None and first is not None and header != first:
            raise ValueError(f"data files {str(first_path)!r} and {str(path)!r} have different "
                             f"columns ({first} and {header}); files loaded together must "
                             "share one header")


def _load_local(paths: list[Path], *, split: str, text_columns: list[str],
                cache_dir: str | None) -> Any:
    import datasets
    from datasets.exceptions import DatasetGenerationError

    suffix = _local_format(paths[0])
    builder = LOCAL_FORMATS[suffix]
    kwargs: dict[str, Any] = {}
    if builder == "csv":
        # Keep texts such as "NA" or "null" as strings, and read text columns as str.
        kwargs = dict(keep_default_na=False, na_filter=False,
                      converters={c: str for c in text_columns})
        if suffix == ".tsv":
            kwargs.update(sep="\t", quoting=csv.QUOTE_NONE)
    try:
        return datasets.load_dataset(builder, data_files={split: [str(p) for p in paths]},
                                     split=split, cache_dir=cache_dir, **kwargs)
    except DatasetGenerationError as error:  # its own message names neither file nor cause
        cause = error.__cause__ or error.__context__ or error
        raise ValueError(f"could not read the data file(s) {[str(p) for p in paths]}: "
                         f"{type(cause).__name__}: {' '.join(str(cause).split())}") from error


def load_hub(source: str, *, name: str | None, split: str, cache_dir: str | None) -> Any:
    """One split of a Hugging Face Hub data set, with the errors of an unknown id or no
    network said plainly."""
    import datasets
    from datasets.exceptions import DatasetNotFoundError

    try:
        return datasets.load_dataset(source, name, split=split, cache_dir=cache_dir)
    except DatasetNotFoundError as exc:
        raise ValueError(f"{source!r} is neither a local file nor a data set on the Hugging Face "
                         f"Hub ({exc}); local sources need one of the extensions "
                         f"{sorted(LOCAL_FORMATS)}") from exc
    except (ConnectionError, OSError) as exc:
        raise ConnectionError(
            f"could not load {source!r} (config {name!r}, split {split!r}) from the Hugging Face "
            f"Hub: {exc}. Without network access, pass local csv / tsv / json / jsonl / parquet "
            "files instead, or use the built-in corpus (smat.data.load_corpus)") from exc


def load_dataset(
    source: Source,
    *,
    split: str = "train",
    text_column: str = "text",
    text_pair_column: str | None = None,
    label_column: str = "label",
    task: str = "classification",
    num_labels: int | None = None,
    label_names: Sequence[str] | None = None,
    name: str | None = None,
    cache_dir: str | None = None,
) -> TextDataset:
    """Load one split of a Hugging Face `datasets` source as a `TextDataset`.

    Args:
      source: local file path(s) (.csv, .tsv, .json, .jsonl, .parquet, optionally compressed)
        or a Hub id (loaded lazily; needs network access or a warm HF cache).
      split: the split to load from a Hub data set; for local files, the name given to them.
      text_column: column holding the (first) text.
      text_pair_column: column holding the second text of a pair (e.g. "mt", "hypothesis"),
        or None for single texts.
      label_column: column holding the label / target.
      task: "classification" (string or integer labels -> int ids with a recorded vocabulary)
        or "regression" (float targets).
      num_labels: expected number of classes; integer labels outside [0, num_labels) raise.
      label_names: fixed label vocabulary for string labels (id i = label_names[i]); a Hub
        `ClassLabel` column provides it automatically.
      name: the Hub configuration name (e.g. "sst2" for "glue").
      cache_dir: the `datasets` cache folder (default: the HF cache).

    Returns:
      A `TextDataset` with N >= 1 rows.

    Raises:
      FileNotFoundError: a local file does not exist.
      ValueError: a missing column (the message lists the available ones), an empty split,
        labels outside num_labels or the vocabulary, a missing label, or an unknown Hub id.
      TypeError: a non-string text or a label of the wrong type.
      ConnectionError: a Hub id could not be reached (e.g. offline).
    """
    check_task(task)
    paths = _local_files(source)
    text_columns = [text_column] + ([text_pair_column] if text_pair_column else [])
    if paths is None:
        described = f"Hub data set {source!r}" + (f" ({name})" if name else "")
    else:
        described = ", ".join(str(p) for p in paths)
    empty = ValueError(f"split {split!r} of {described} is empty (0 rows)")
    try:
        if paths is None:
            ds = load_hub(str(source), name=name, split=split, cache_dir=cache_dir)
        else:
            ds = _load_local(paths, split=split, text_columns=text_columns, cache_dir=cache_dir)
    except ValueError as exc:
        # `datasets` refuses to build a split without rows: "Instruction ... corresponds to
        # no data!"; report it as the empty split it is.
        if "corresponds to no data" in str(exc):
            raise empty from exc
        raise

    roles = {text_column: "text_column", label_column: "label_column"}
    if text_pair_column is not None:
        roles[text_pair_column] = "text_pair_column"
    for column, role in roles.items():
        if column not in ds.column_names:
            raise ValueError(f"{role}={column!r} is not a column of {described}; available "
                             f"columns: {ds.column_names}")
    if len(ds) == 0:
        raise empty

    texts = _text_column(ds, text_column, described)
    pairs = _text_column(ds, text_pair_column, described) if text_pair_column else None
    import datasets

    feature = ds.features[label_column]
    if task == "classification" and label_names is None and isinstance(feature,
                                                                       datasets.ClassLabel):
        label_names = feature.names
    labels, names = encode_labels(list(ds[label_column]), task=task, num_labels=num_labels,
                                  label_names=label_names, column=label_column)
    return TextDataset(texts=texts, labels=labels, task=task, text_pairs=pairs,
                       label_names=names, source=described)


def _text_column(ds: Any, column: str, described: str) -> tuple[str, ...]:
    values = tuple(ds[column])
    for i, v in enumerate(values):
        if not isinstance(v, str):
            kind = ValueError if v is None else TypeError
            raise kind(f"column {column!r} of {described} must hold strings; row {i} is {v!r}")
    return values
