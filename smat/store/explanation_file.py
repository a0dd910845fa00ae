"""Explanations computed outside smat (Captum, inseq, a method of your own), read so that
smat's evaluations score them beside its own explainers.

A file is what ``smat explain`` writes (``explanations.json``, a JSON array) or JSON lines,
one record per text::

    {"text": "a gripping film", "tokens": ["a", "gripping", "film"],
     "scores": {"captum_lime": [0.1, 0.7, 0.2], "my_method": [0.0, 0.9, 0.1]}}

Each explainer's scores are aligned to the model's own tokens of the text with the
special tokens ([CLS], [SEP]) and padding left out: exactly the tokens ``smat explain``
lists. "tokens" is optional; when given it must equal those tokens, which checks that the
scores came from the same tokenizer. Every record names the same explainers. Texts longer
than the model's max_len are truncated, and their scores must stop where the tokens do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from smat.data import Encoded

SUFFIXES = (".json", ".jsonl")


class FileExplanations(NamedTuple):
    """The explanations of one file, aligned to the model's tokens of its texts."""

    texts: list[str]
    scores: dict[str, np.ndarray]  # explainer name -> (N, T), 0 off the shown tokens


def is_explanation_file(name: str | Path) -> bool:
    """Whether an explainer name is a file of explanations computed elsewhere."""
    path = Path(name)
    return path.suffix in SUFFIXES and path.is_file()


def read_records(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """The records of an explanation file, each with where it is ("record 3" of a JSON
    array, "line 3" of JSON lines), checked for a text and a scores object naming the
    first record's explainers.

    Raises:
      ValueError: unreadable JSON, no records, a record without "text" or "scores", or
        one naming other explainers, naming the file and the record.
    """
    path = Path(path)
    content = path.read_text(encoding="utf-8")
    try:
        if content.lstrip().startswith("["):
            records = [(f"record {i + 1}", r) for i, r in enumerate(json.loads(content))]
        else:
            records = [(f"line {i + 1}", json.loads(line))
                       for i, line in enumerate(content.splitlines()) if line.strip()]
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a JSON array or JSON lines: {error}") from None
    if not records:
        raise ValueError(f"{path} holds no explanations")
    for where, record in records:
        if (not isinstance(record, dict) or not isinstance(record.get("text"), str)
                or not isinstance(record.get("scores"), dict) or not record["scores"]):
            raise ValueError(f"{path}, {where}: a record needs \"text\" (a string) and "
                             "\"scores\" (an object of explainer name -> one score per token)")
        if sorted(record["scores"]) != sorted(records[0][1]["scores"]):
            raise ValueError(f"{path}, {where}: explainers {sorted(record['scores'])} differ "
                             f"from the first record's {sorted(records[0][1]['scores'])}")
    return records


def explainer_names(names: Sequence[str | Path]) -> list[str]:
    """The explainers behind `names`: a file's stand for the explainers its first record
    names, any other name for itself."""
    return [name for entry in names for name in (
        read_records(entry)[0][1]["scores"] if is_explanation_file(entry) else [str(entry)])]


def file_texts(path: str | Path) -> list[str]:
    """The texts of an explanation file, in order (the rows its explanations are of)."""
    return [record["text"] for _, record in read_records(path)]


def read_explanations(path: str | Path, data: Encoded, tokens: Sequence[Sequence[str]], *,
                      shown: np.ndarray) -> FileExplanations:
    """The scores of an explanation file for the rows of `data`, which must be its first
    texts as the model tokenizes them.

    Args:
      path: the file.
      data: tokenized rows (N, T), from the file's first N texts.
      tokens: the model's token strings of each row (N lists of T).
      shown: (N, T) the real, non-special tokens the scores are aligned to.

    Raises:
      ValueError: as :func:`read_records`, fewer records than rows, a score list whose
        length is not the number of shown tokens, tokens that differ from the model's, or a
        score that is not a finite number, naming file, record and explainer.
    """
    path = Path(path)
    records = read_records(path)
    if len(records) < len(data.input_ids):
        raise ValueError(f"{path} explains {len(records)} texts but {len(data.input_ids)} "
                         "rows are evaluated")
    names = list(records[0][1]["scores"])
    scores = {name: np.zeros(data.input_ids.shape, np.float32) for name in names}
    texts = []
    for row, (where, record) in enumerate(records[:len(data.input_ids)]):
        texts.append(record["text"])
        expected = [t for t, s in zip(tokens[row], shown[row], strict=True) if s]
        if "tokens" in record and list(record["tokens"]) != expected:
            raise ValueError(f"{path}, {where}: its tokens {record['tokens']} are not the "
                             f"model's {expected}: the scores come from another tokenizer")
        for name in names:
            values = record["scores"][name]
            if not isinstance(values, list) or len(values) != len(expected):
                count = len(values) if isinstance(values, list) else "no list of"
                raise ValueError(f"{path}, {where}: {name!r} has {count} scores for the "
                                 f"{len(expected)} tokens the model reads ({expected})")
            if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
                raise ValueError(f"{path}, {where}: {name!r} holds a score that is not a "
                                 "finite number")
            scores[name][row, shown[row]] = values
    return FileExplanations(texts, scores)
