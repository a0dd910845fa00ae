"""Tests for smat.evaluation.synthetic (the Oxford thesis's label-word task)."""

import numpy as np
import pytest

from smat.evaluation import synthetic as S

TEXTS = ["the film was good", "a dull, lifeless mess.", "  spaced   out  ", "", "wow"]
LABELS = [1, 0, 1, 0, 1]


def test_thesis_example_shape():
    task = S.add_label_words(["the film was good"], [1], seed=0)
    word = ("negative", "positive")[int(task.labels[0])]
    assert task.texts[0] == f"the film was good {word}"
    assert task.word_masks[0].tolist() == [False, False, False, False, True]
    assert task.word_index.tolist() == [4]
    start, end = task.char_spans[0]
    assert task.texts[0][start:end] == word


@pytest.mark.parametrize("position", ["end", "random"])
def test_ground_truth_mask_points_at_the_label_word(position):
    task = S.add_label_words(TEXTS, LABELS, seed=3, position=position)
    assert len(task.texts) == len(TEXTS) and task.labels.dtype == np.int32
    for text, y, mask, at, (start, end), original in zip(
            task.texts, task.labels, task.word_masks, task.word_index, task.char_spans, TEXTS,
            strict=True):
        words = text.split()
        word = ("negative", "positive")[y]
        assert mask.dtype == np.bool_ and mask.shape == (len(words),) and mask.sum() == 1
        assert words[int(np.flatnonzero(mask)[0])] == word and mask[at]
        assert text[start:end] == word
        # The original words are all still there, in order.
        assert words[:at] + words[at + 1:] == original.split()
        if position == "end":
            assert at == len(words) - 1
            assert text.startswith(original.rstrip())


def test_seeded_and_randomized():
    texts = [f"review number {i}" for i in range(400)]
    labels = np.ones(400, int)
    a = S.add_label_words(texts, labels, seed=7)
    b = S.add_label_words(texts, labels, seed=7)
    c = S.add_label_words(texts, labels, seed=8)
    assert a.texts == b.texts and np.array_equal(a.labels, b.labels)
    assert not np.array_equal(a.labels, c.labels)
    # Uniform labels: both classes appear, decorrelated from the constant original label.
    assert 150 < int(a.labels.sum()) < 250
    assert np.array_equal(a.original_labels, labels)


def test_random_positions_vary():
    texts = ["one two three four five six"] * 50
    task = S.add_label_words(texts, [0] * 50, seed=1, position="random")
    assert len(set(task.word_index.tolist())) > 3
    assert set(task.word_index.tolist()) <= set(range(7))


def test_permute_keeps_label_distribution():
    labels = np.array([0] * 30 + [1] * 10 + [2] * 5)
    task = S.add_label_words(["x"] * 45, labels, seed=2, mode="permute",
                             label_words=("neg", "pos", "neutral"))
    assert np.bincount(task.labels).tolist() == [30, 10, 5]
    assert not np.array_equal(task.labels, labels)
    assert all(t == "x " + ("neg", "pos", "neutral")[y]
               for t, y in zip(task.texts, task.labels, strict=True))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"texts": [], "labels": []}, ValueError, "at least one text"),
    ({"labels": [1, 0]}, ValueError, r"labels must have shape \(5,\)"),
    ({"texts": ["a", 3, "b", "c", "d"]}, TypeError, "entry 1 is int"),
    ({"label_words": ("good",)}, ValueError, "label_words"),
    ({"label_words": ("good", "good")}, ValueError, "label_words"),
    ({"label_words": ("very good", "bad")}, ValueError, "label_words"),
    ({"mode": "shuffle"}, ValueError, "Unknown mode 'shuffle'"),
    ({"position": "start"}, ValueError, "Unknown position 'start'"),
    ({"labels": [0, 1, 2, 0, 1], "mode": "permute"}, ValueError, r"ints in \[0, 2\)"),
])
def test_errors(kwargs, error, match):
    args = {"texts": TEXTS, "labels": LABELS, **kwargs}
    texts, labels = args.pop("texts"), args.pop("labels")
    with pytest.raises(error, match=match):
        S.add_label_words(texts, labels, seed=0, **args)


def test_docstring_examples():
    import doctest

    import jax
    import jax.numpy as jnp

    result = doctest.testmod(S, extraglobs={"jax": jax, "jnp": jnp})
    assert result.attempted > 0 and result.failed == 0
