"""The synthetic ground-truth task of the Oxford thesis (§3.1): a label word decides the label.

Starting from any text classification data set, the labels are randomized (so
the original text no longer predicts them) and a word naming the new label
("positive" / "negative" by default) is appended to each text. The label word
is then the only predictive feature, so a faithful explanation of a model
trained on the result should rank it first; its position is returned as a
ground-truth mask for :func:`~smat.evaluation.ground_truth_overlap` and
:func:`~smat.evaluation.mean_rank`.

Example from the thesis: ``("the film was good", 1)`` -> label randomized to 0 ->
``("the film was good negative", 0)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from jaxtyping import Bool, Int

__all__ = [
    "SyntheticTask",
    "add_label_words",
]

_MODES = ("uniform", "permute")
_POSITIONS = ("end", "random")


class SyntheticTask(NamedTuple):
    """A data set with a known predictive word per example.

    Attributes:
        texts: the new texts, label word included.
        labels: ``(N,)`` int32 randomized labels; ``label_words[labels[n]]`` is
            the word added to ``texts[n]``.
        word_masks: per example a ``(W_n,)`` bool mask over ``texts[n].split()``
            with exactly one True, at the label word (the convention of
            ``smat.data.RationaleDataset.word_masks``).
        word_index: ``(N,)`` int, index of the label word in ``texts[n].split()``.
        char_spans: ``(N, 2)`` int, ``[start, end)`` character offsets of the
            label word in ``texts[n]`` (for offset-mapping token alignment).
        original_labels: ``(N,)`` the labels that were passed in.
    """

    texts: tuple[str, ...]
    labels: Int[np.ndarray, " n"]
    word_masks: tuple[Bool[np.ndarray, " words"], ...]
    word_index: Int[np.ndarray, " n"]
    char_spans: Int[np.ndarray, "n 2"]
    original_labels: np.ndarray


def add_label_words(
    texts: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    *,
    seed: int,
    label_words: Sequence[str] = ("negative", "positive"),
    mode: str = "uniform",
    position: str = "end",
) -> SyntheticTask:
    """Randomize the labels and add a word naming the new label to each text.

    Follows the Oxford thesis, §3.1 (after the framework of its reference
    [68]): (1) *label modification* — new labels are drawn independently of
    the text; (2) *feature modification* — the word ``label_words[y]`` is added
    to the text of each example with new label ``y``. The ground-truth
    attribution is a binary mask with a single 1 at that word.

    Args:
        texts: N input texts.
        labels: N original labels (kept as ``original_labels``; with
            ``mode="permute"`` they are the labels that get shuffled and must
            lie in ``[0, len(label_words))``).
        seed: seed of the ``numpy.random.default_rng`` drawing labels and positions.
        label_words: word for each class (one whitespace-free word each,
            distinct); its length is the number of classes.
        mode: ``"uniform"`` draws each new label uniformly from the classes
            (default; balanced classes); ``"permute"`` shuffles the original
            labels (keeps the label distribution exactly).
        position: ``"end"`` appends the word after the text (the thesis);
            ``"random"`` inserts it at a uniformly random word boundary. Both
            join words with single spaces only where a word is added: ``"end"``
            keeps the original text verbatim, ``"random"`` rebuilds the text
            as ``" ".join(words)``, normalising its whitespace.

    Returns:
        :class:`SyntheticTask`.

    Raises:
        ValueError: mismatched lengths, an empty data set, fewer than two or
            duplicate / non-single-word ``label_words``, unknown ``mode`` /
            ``position``, or (``"permute"``) labels outside the classes.
        TypeError: if a text is not a ``str``.

    Example:
        >>> task = add_label_words(["the film was good"], [1], seed=0)
        >>> task.texts[0].rsplit(" ", 1)[1] == ("negative", "positive")[task.labels[0]]
        True
        >>> task.word_masks[0].tolist()
        [False, False, False, False, True]
    """
    texts = list(texts)
    original = np.asarray(labels)
    n = len(texts)
    if n == 0:
        raise ValueError("add_label_words needs at least one text; got an empty data set.")
    if original.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match the {n} texts; got "
                         f"{original.shape}.")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"texts must be str; entry {bad[0]} is {type(texts[bad[0]]).__name__}.")
    words = tuple(label_words)
    if len(words) < 2 or len(set(words)) != len(words) or any(
            not isinstance(w, str) or len(w.split()) != 1 or w != w.strip() for w in words):
        raise ValueError(f"label_words must be >= 2 distinct single words without whitespace; "
                         f"got {words}.")
    if mode not in _MODES:
        raise ValueError(f"Unknown mode {mode!r}; choose one of {_MODES}.")
    if position not in _POSITIONS:
        raise ValueError(f"Unknown position {position!r}; choose one of {_POSITIONS}.")

    rng = np.random.default_rng(seed)
    if mode == "uniform":
        new_labels = rng.integers(0, len(words), size=n)
    else:
        if not np.issubdtype(original.dtype, np.integer) or original.min() < 0 or (
                original.max() >= len(words)):
            raise ValueError(f"mode='permute' shuffles the original labels, which must be ints "
                             f"in [0, {len(words)}) for label_words {words}; got values "
                             f"{np.unique(original).tolist()}.")
        new_labels = rng.permutation(original)
    new_labels = new_labels.astype(np.int32)

    out_texts, masks, index, spans = [], [], np.zeros(n, np.int64), np.zeros((n, 2), np.int64)
    for i, (text, y) in enumerate(zip(texts, new_labels, strict=True)):
        word = words[y]
        split = text.split()
        if position == "end":
            at = len(split)
            head = text.rstrip()
            new_text = f"{head} {word}" if head else word
            start = len(new_text) - len(word)
        else:
            at = int(rng.integers(0, len(split) + 1))
            head = " ".join(split[:at])
            new_text = " ".join([*split[:at], word, *split[at:]])
            start = len(head) + 1 if head else 0
        mask = np.zeros(len(split) + 1, bool)
        mask[at] = True
        out_texts.append(new_text)
        masks.append(mask)
        index[i] = at
        spans[i] = (start, start + len(word))
    return SyntheticTask(texts=tuple(out_texts), labels=new_labels, word_masks=tuple(masks),
                         word_index=index, char_spans=spans, original_labels=original)
