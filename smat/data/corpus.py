"""Built-in offline corpora shipped inside the package (`smat/data/corpora/`).

`movie-snippets`: the 10,605 Rotten Tomatoes review sentences of Hutto & Gilbert (ICWSM 2014,
VADER; MIT license, see `corpora/LICENSE.txt` and `corpora/PROVENANCE.md`), each with the mean
of about 20 human sentiment ratings on a -4..+4 scale.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable

import numpy as np

from smat.data.dataset import TextDataset, check_task

MOVIE_SNIPPETS_FILE = "movieReviewSnippets_GroundTruth.txt"
MOVIE_SNIPPETS_LABELS = ("negative", "positive")


def read_corpus_file(filename: str) -> str:
    """The text of a file in the package's `corpora/` folder (UTF-8, strict).

    Raises:
      FileNotFoundError: the file is not installed with the package.
    """
    resource = importlib.resources.files("smat.data").joinpath("corpora", filename)
    if not resource.is_file():
        raise FileNotFoundError(f"built-in corpus file {filename!r} is missing from the smat "
                                "installation (package data smat/data/corpora/)")
    # The file is clean UTF-8 (checked in corpora/PROVENANCE.md); decode strictly so that a
    # corrupted copy fails loudly instead of silently altering texts.
    return resource.read_bytes().decode("utf-8")


def _load_movie_snippets(task: str) -> TextDataset:
    texts: list[str] = []
    ratings: list[float] = []
    for line_no, line in enumerate(read_corpus_file(MOVIE_SNIPPETS_FILE).splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t", 2)
        if len(fields) != 3:
            raise ValueError(f"{MOVIE_SNIPPETS_FILE} line {line_no}: expected 3 tab-separated "
                             f"fields (id, rating, text), got {len(fields)}")
        texts.append(fields[2].strip())
        ratings.append(float(fields[1]))
    rating = np.asarray(ratings, dtype=np.float32)
    source = f"built-in corpus movie-snippets ({MOVIE_SNIPPETS_FILE})"
    if task == "regression":
        return TextDataset(texts=tuple(texts), labels=rating, task=task, source=source)
    keep = np.flatnonzero(rating != 0)
    return TextDataset(texts=tuple(texts[i] for i in keep),
                       labels=(rating[keep] > 0).astype(np.int32), task=task,
                       label_names=MOVIE_SNIPPETS_LABELS, num_dropped=len(texts) - keep.size,
                       source=source + ", rating == 0 dropped")


CORPORA: dict[str, Callable[[str], TextDataset]] = {
    "movie-snippets": _load_movie_snippets,
}


def available_corpora() -> tuple[str, ...]:
    """Names accepted by `load_corpus`."""
    return tuple(sorted(CORPORA))


def load_corpus(name: str, *, task: str = "classification") -> TextDataset:
    """Load a built-in offline corpus (no network, no files outside the package).

    `movie-snippets` (Hutto & Gilbert, 2014): classification labels each sentence by the sign
    of its mean human rating (0 = "negative" for rating < 0, 1 = "positive" for rating > 0);
    the 37 sentences rated exactly 0 are dropped and counted in `TextDataset.num_dropped`
    (10,568 rows remain). Regression keeps all 10,605 rows with the rating (-4..+4) as the
    float32 target.

    Args:
      name: a corpus name, one of `available_corpora()`.
      task: "classification" or "regression".

    Returns:
      A `TextDataset` in file order (shuffle with `smat.data.splits`).

    Example:
      >>> data = load_corpus("movie-snippets")
      >>> len(data), data.num_dropped, data.label_names
      (10568, 37, ('negative', 'positive'))

    Raises:
      ValueError: unknown corpus name (valid names listed) or task.
    """
    check_task(task)
    if name not in CORPORA:
        raise ValueError(f"unknown built-in corpus {name!r}; available: {available_corpora()}")
    return CORPORA[name](task)
