"""Tests for smat.data.corpus: the built-in offline `movie-snippets` corpus."""

import importlib
import importlib.resources
import os

import numpy as np
import pytest

from smat.data.corpus import available_corpora, load_corpus, read_corpus_file


def test_classification_by_sign_drops_zero_ratings():
    data = load_corpus("movie-snippets")
    assert len(data) == 10_568 and data.num_dropped == 37
    assert data.label_names == ("negative", "positive")
    np.testing.assert_array_equal(np.bincount(data.labels), [5_326, 5_242])
    assert data.labels.dtype == np.int32 and data.task == "classification"
    # Row 1 of the file: rating 2.26666666667, "The Rock is destined to be ..."
    assert data.texts[0].startswith("The Rock is destined to be the 21st Century's new")
    assert data.labels[0] == 1
    assert data.texts[2] == "Effective but too tepid biopic" and data.labels[2] == 0


def test_regression_keeps_every_rating():
    data = load_corpus("movie-snippets", task="regression")
    assert len(data) == 10_605 and data.num_dropped == 0 and data.label_names is None
    assert data.labels.dtype == np.float32
    np.testing.assert_allclose(data.labels[:3], [2.26666666667, 3.53333333333, -0.6], rtol=1e-6)
    assert int((data.labels == 0).sum()) == 37
    assert data.labels.min() >= -4 and data.labels.max() <= 4
    classification = load_corpus("movie-snippets")
    np.testing.assert_array_equal(classification.labels,
                                  (data.labels[data.labels != 0] > 0).astype(np.int32))


def test_texts_are_decoded_utf8_without_line_endings():
    data = load_corpus("movie-snippets", task="regression")
    assert not any("\r" in t or "\ufffd" in t for t in data.texts)
    assert any("é" in t for t in data.texts)  # accented names survive decoding


def test_files_ship_inside_the_package_with_the_license():
    root = importlib.resources.files("smat.data").joinpath("corpora")
    assert "MIT License" in root.joinpath("LICENSE.txt").read_text(encoding="utf-8")
    assert root.joinpath("PROVENANCE.md").is_file()
    package_dir = os.path.dirname(importlib.import_module("smat.data").__file__)
    assert str(root).startswith(package_dir)  # read from the package, not ../shared


def test_unknown_corpus_lists_the_available_ones():
    assert available_corpora() == ("movie-snippets",)
    with pytest.raises(ValueError, match=r"unknown built-in corpus 'imdb'.*movie-snippets"):
        load_corpus("imdb")
    with pytest.raises(ValueError, match="task must be one of"):
        load_corpus("movie-snippets", task="ranking")
    with pytest.raises(FileNotFoundError, match="missing from the smat installation"):
        read_corpus_file("absent.txt")
