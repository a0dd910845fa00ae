"""The public data sets the paper experiments read, from the Hugging Face Hub into the
folder layout ``--data-dir`` takes, once.

Each named set (:data:`HUB_SETS`) is loaded with `datasets` from its Hub ids, converted to
the files the experiments read (the layout ``docs/datasets.md`` gives for a hand-made
``--data-dir``) and written under a cache folder (``$SMAT_DATA_CACHE``, default
``~/.cache/smat/data``); a folder whose conversion finished (a ``.complete`` marker, written
last) is reused without touching the network. A machine without the Hub reads a *mirror*:
a folder holding each Hub id saved with ``DatasetDict.save_to_disk`` under its id with
``/`` as ``__`` (``stanfordnlp__sst2``), made on a machine that has the Hub; the conversion
is the same.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CACHE_ENV = "SMAT_DATA_CACHE"
MIRROR_ENV = "SMAT_HUB_MIRROR"


def cache_root() -> Path:
    """Where converted data sets are kept: ``$SMAT_DATA_CACHE`` or ``~/.cache/smat/data``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "smat" / "data")


def load_hub(hub_id: str, *, mirror: str | Path | None = None) -> Any:
    """The `datasets.DatasetDict` of `hub_id`: from `mirror` (its ``save_to_disk`` copy)
    when given, else from the Hub.

    Raises:
      FileNotFoundError: the mirror lacks the id's folder.
    """
    import datasets

    if mirror is None:
        return datasets.load_dataset(hub_id)
    folder = Path(mirror) / hub_id.replace("/", "__")
    if not folder.is_dir():
        raise FileNotFoundError(f"Hub mirror {mirror} has no {folder.name}/ (save "
                                f"datasets.load_dataset({hub_id!r}) there with save_to_disk)")
    return datasets.load_from_disk(str(folder))


def _write_tsv(path: Path, rows: Sequence[tuple[str, int]]) -> None:
    """GLUE's tsv as GLUE writes it: a header, then each sentence and its label, unquoted
    (smat reads tsv with no quoting); a tab or line break inside a sentence becomes a space."""
    with path.open("w", encoding="utf-8") as stream:
        stream.write("sentence\tlabel\n")
        for sentence, label in rows:
            flat = sentence.replace("\t", " ").replace("\r", " ").replace("\n", " ")
            stream.write(f"{flat}\t{int(label)}\n")


def write_sst2(folder: Path, load: Callable[[str], Any]) -> None:
    """GLUE SST-2 (``stanfordnlp/sst2``: train, validation) and its test sentences with the
    SST labels (``SetFit/sst2``'s test split; GLUE's own test labels are hidden, -1) as
    ``train.tsv``, ``dev.tsv`` and ``test-labeled.tsv``."""
    glue, labelled = load("stanfordnlp/sst2"), load("SetFit/sst2")
    _write_tsv(folder / "train.tsv", list(zip(glue["train"]["sentence"],
                                              glue["train"]["label"], strict=True)))
    _write_tsv(folder / "dev.tsv", list(zip(glue["validation"]["sentence"],
                                            glue["validation"]["label"], strict=True)))
    _write_tsv(folder / "test-labeled.tsv", list(zip(labelled["test"]["text"],
                                                     labelled["test"]["label"], strict=True)))


def write_imdb(folder: Path, load: Callable[[str], Any]) -> None:
    """IMDB's test split (``stanfordnlp/imdb``) as ``test.jsonl.gz``: text, label (0
    negative, 1 positive)."""
    test = load("stanfordnlp/imdb")["test"]
    with gzip.open(folder / "test.jsonl.gz", "wt", encoding="utf-8") as stream:
        for text, label in zip(test["text"], test["label"], strict=True):
            stream.write(json.dumps({"text": text, "label": int(label)}) + "\n")


def _span(words: list[str], evidence: str, *, start: int = 0) -> tuple[int, int] | None:
    """The first [start, end) of `evidence`'s words in `words` at or after `start`."""
    target = evidence.split()
    for begin in range(start, len(words) - len(target) + 1):
        if words[begin:begin + len(target)] == target:
            return begin, begin + len(target)
    return None


def write_eraser_movies(folder: Path, load: Callable[[str], Any]) -> None:
    """ERASER's movie reviews with their rationales (``eraser-benchmark/movie_rationales``:
    review, label NEG / POS, evidences as strings) in ERASER's own layout: ``docs/<id>`` and
    ``{train,val,test}.jsonl`` whose evidence spans are the evidence strings located in the
    review's words.

    Raises:
      ValueError: an evidence string that is not in its review (naming both).
    """
    data = load("eraser-benchmark/movie_rationales")
    (folder / "docs").mkdir(exist_ok=True)
    for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
        names = data[split].features["label"].names
        with (folder / f"{name}.jsonl").open("w", encoding="utf-8") as stream:
            for index, row in enumerate(data[split]):
                docid = f"{name}_{index:04d}"
                words = row["review"].split()
                evidences = []
                for evidence in row["evidences"]:
                    found = _span(words, evidence)
                    if found is None:
                        raise ValueError(f"movie_rationales {split} row {index}: evidence "
                                         f"{evidence[:60]!r} is not in its review")
                    evidences.append([{"docid": docid, "start_token": found[0],
                                       "end_token": found[1], "text": " ".join(
                                           words[found[0]:found[1]])}])
                (folder / "docs" / docid).write_text(" ".join(words) + "\n", encoding="utf-8")
                stream.write(json.dumps({"annotation_id": docid, "docids": [docid],
                                         "classification": names[row["label"]],
                                         "evidences": evidences, "query": ""}) + "\n")


# name -> (what it writes, the Hub ids it reads)
HUB_SETS: dict[str, tuple[Callable[[Path, Callable[[str], Any]], None], tuple[str, ...]]] = {
    "sst2_glue": (write_sst2, ("stanfordnlp/sst2", "SetFit/sst2")),
    "imdb_maas": (write_imdb, ("stanfordnlp/imdb",)),
    "eraser_movies": (write_eraser_movies, ("eraser-benchmark/movie_rationales",)),
}


def hub_data_dir(name: str, *, cache: str | Path | None = None,
                 mirror: str | Path | None = None) -> Path:
    """The folder of data set `name` (one of :data:`HUB_SETS`), converted from the Hub on
    the first call and reused after.

    Args:
      cache: the cache root (default :func:`cache_root`).
      mirror: a folder of ``save_to_disk`` copies to read instead of the Hub (default
        ``$SMAT_HUB_MIRROR``, else the Hub).

    Raises:
      ValueError: an unknown name.
    """
    if name not in HUB_SETS:
        raise ValueError(f"no Hub data set {name!r}; choose from {sorted(HUB_SETS)}")
    folder = Path(cache or cache_root()) / name
    if (folder / ".complete").is_file():
        return folder
    write, _ = HUB_SETS[name]
    mirror = mirror or os.environ.get(MIRROR_ENV) or None
    folder.mkdir(parents=True, exist_ok=True)
    write(folder, lambda hub_id: load_hub(hub_id, mirror=mirror))
    (folder / ".complete").write_text("")
    return folder
