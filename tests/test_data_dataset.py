"""Tests for smat.data.dataset: TextDataset / RationaleDataset records and label encoding."""

import numpy as np
import pytest

from smat.data.dataset import RareLabelWarning, RationaleDataset, TextDataset, encode_labels


def test_string_labels_get_a_sorted_vocabulary():
    labels, names = encode_labels(["pos", "neg", "pos"], task="classification")
    assert names == ("neg", "pos")
    np.testing.assert_array_equal(labels, [1, 0, 1])
    assert labels.dtype == np.int32


def test_label_names_fix_the_ids():
    labels, names = encode_labels(["pos", "neg"], task="classification",
                                  label_names=["pos", "neg"])
    assert names == ("pos", "neg")
    np.testing.assert_array_equal(labels, [0, 1])


def test_unknown_string_label_names_value_and_vocabulary():
    with pytest.raises(ValueError, match=r"\['meh'\].*\('neg', 'pos'\)"):
        encode_labels(["pos", "meh"], task="classification", label_names=["neg", "pos"])


def test_integer_labels_outside_num_labels_raise():
    with pytest.raises(ValueError, match=r"labels \[2, 5\].*rows \[1, 3\].*num_labels=2"):
        encode_labels([0, 2, 1, 5], task="classification", num_labels=2)


def test_integer_labels_default_num_labels_and_integral_floats():
    labels, names = encode_labels([0, 2.0, 1], task="classification")
    np.testing.assert_array_equal(labels, [0, 2, 1])
    assert names == ("0", "1", "2")


def test_negative_label_raises():
    with pytest.raises(ValueError, match="outside"):
        encode_labels([0, -1], task="classification")


def test_string_vocabulary_size_must_match_num_labels():
    with pytest.raises(ValueError, match="2 distinct labels.*num_labels=3.*label_names"):
        encode_labels(["a", "b"], task="classification", num_labels=3)


def test_mixed_and_non_integral_labels_raise_type_error():
    with pytest.raises(TypeError, match="mixes string"):
        encode_labels(["a", 1], task="classification")
    with pytest.raises(TypeError, match="row 1 is 0.5"):
        encode_labels([1, 0.5], task="classification")


def test_missing_label_names_row():
    with pytest.raises(ValueError, match="missing label at row 1"):
        encode_labels([1.0, float("nan")], task="regression")
    with pytest.raises(ValueError, match="missing label at row 0"):
        encode_labels([None, "a"], task="classification")


def test_regression_targets_are_float32_and_checked():
    labels, names = encode_labels([1, "2.5", -0.25], task="regression")
    assert names is None and labels.dtype == np.float32
    np.testing.assert_allclose(labels, [1.0, 2.5, -0.25])
    with pytest.raises(TypeError, match="row 1 is 'bad'"):
        encode_labels([1.0, "bad"], task="regression")
    with pytest.raises(ValueError, match="non-finite"):
        encode_labels([float("inf")], task="regression")


def test_unknown_task():
    with pytest.raises(ValueError, match="task must be one of"):
        encode_labels([1], task="ranking")


def test_text_dataset_validates_and_selects():
    data = TextDataset(texts=("a", "b", "c"), labels=np.array([0, 1, 0], np.int32),
                       task="classification", text_pairs=("x", "y", "z"),
                       label_names=("n", "p"))
    sub = data.select([2, 0])
    assert sub.texts == ("c", "a") and sub.text_pairs == ("z", "x")
    np.testing.assert_array_equal(sub.labels, [0, 0])
    assert sub.num_labels == 2 and len(sub) == 2
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        data.select([3])
    with pytest.raises(ValueError, match="outside"):
        TextDataset(texts=("a",), labels=np.array([2], np.int32), task="classification",
                    label_names=("n", "p"))
    with pytest.raises(ValueError, match="shape"):
        TextDataset(texts=("a", "b"), labels=np.zeros(3, np.float32), task="regression")
    with pytest.raises(TypeError, match="float32"):
        TextDataset(texts=("a",), labels=np.zeros(1, np.int32), task="regression")


def test_rationale_dataset_checks_mask_lengths_and_selects():
    data = TextDataset(texts=("a b", "c"), labels=np.zeros(2, np.float32), task="regression")
    masks = (np.array([True, False]), np.array([True]))
    rd = RationaleDataset(data=data, word_masks=masks, ids=("0", "1"))
    sub = rd.select([1])
    assert sub.ids == ("1",) and sub.word_masks[0].tolist() == [True]
    with pytest.raises(ValueError, match=r"word_masks\[1\].*\(1,\)"):
        RationaleDataset(data=data, word_masks=(masks[0], np.array([True, True])))
    with pytest.raises(ValueError, match="no text_pairs"):
        RationaleDataset(data=data, word_masks=None, pair_word_masks=masks)


def test_a_rare_class_in_an_inferred_vocabulary_is_warned_about():
    # "positve" among 400 rows trains as a third class; a stray 11 implies ten classes
    with pytest.warns(RareLabelWarning, match=r"1 of its 3 classes have fewer than 5 of 401 "
                                              r"rows: 'positve' \(1 row, e\.g\. row 400\)"):
        labels, names = encode_labels(["positive"] * 200 + ["negative"] * 200 + ["positve"],
                                      task="classification")
    assert names == ("negative", "positive", "positve") and labels[-1] == 2
    with pytest.warns(RareLabelWarning, match=r"10 of its 12 classes .* '2' \(0 rows\)"):
        encode_labels([0] * 200 + [1] * 200 + [11], task="classification")


def test_no_rare_label_warning_for_a_given_vocabulary_or_small_data(recwarn):
    rows = ["positive"] * 200 + ["negative"] * 200 + ["neutral"]
    encode_labels(rows, task="classification", num_labels=3)  # the user said 3 classes
    encode_labels(rows, task="classification", label_names=["negative", "neutral", "positive"])
    encode_labels([0] * 99 + [1] * 99 + [2], task="classification")  # too little to judge
    encode_labels(["a"] * 100 + ["b"] * 5, task="classification")  # 5 rows is a class
    assert not [w for w in recwarn if issubclass(w.category, RareLabelWarning)]
