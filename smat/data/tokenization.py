"""Tokenize texts (or text pairs) to fixed-length numpy arrays with a transformers tokenizer.

Every sequence is padded to exactly `max_len` and longer ones are truncated; truncation is
never silent: one summary `TruncationWarning` per call gives the count and the longest length
seen, and `tokenize_with_stats` also returns them as a `TokenizeStats` record.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from jaxtyping import Bool, Int, Shaped

from smat.data.dataset import TextDataset

UNLABELLED = -1  # label id used by `tokenize_texts` for texts without labels


class Encoded(NamedTuple):
    """A tokenized data set: numpy arrays of N sequences padded to length T = max_len.

    Attributes:
      input_ids: (N, T) int32 token ids.
      attention_mask: (N, T) int32, 1 for real tokens, 0 for padding.
      token_type_ids: (N, T) int32 segment ids (0 first text, 1 second text of a pair; all 0
        for tokenizers without segments, e.g. RoBERTa).
      special_tokens_mask: (N, T) bool, True for [CLS] / [SEP] / padding.
      labels: (N,) int32 class ids (classification, -1 = unlabelled) or float32 targets.
    """

    input_ids: Int[np.ndarray, "n seq"]
    attention_mask: Int[np.ndarray, "n seq"]
    token_type_ids: Int[np.ndarray, "n seq"]
    special_tokens_mask: Bool[np.ndarray, "n seq"]
    labels: Shaped[np.ndarray, " n"]


class TokenizeStats(NamedTuple):
    """What tokenization did to a batch of texts.

    Attributes:
      num_examples: N, the number of sequences.
      num_truncated: how many were longer than max_len (special tokens included) and cut.
      max_length_seen: the longest untruncated length, in tokens, special tokens included.
      max_len: the fixed length every sequence was padded / truncated to.
    """

    num_examples: int
    num_truncated: int
    max_length_seen: int
    max_len: int


class TruncationWarning(UserWarning):
    """Issued once per tokenization call when some texts were longer than max_len."""


def check_tokenizer_inputs(texts: Sequence[str], text_pairs: Sequence[str] | None,
                           tokenizer: Any, max_len: int) -> None:
    """Validate the arguments shared by every tokenizing function.

    Raises:
      TypeError: `texts` / `text_pairs` are not sequences of str, or `max_len` is not an int.
      ValueError: `max_len` < 2 or above the tokenizer's `model_max_length`, empty `texts`,
        or `text_pairs` of a different length.
    """
    if isinstance(texts, str) or (text_pairs is not None and isinstance(text_pairs, str)):
        raise TypeError("texts and text_pairs must be sequences of strings, not a single string")
    if not isinstance(max_len, int) or isinstance(max_len, bool):
        raise TypeError(f"max_len must be an int, got {max_len!r}")
    if max_len < 2:
        raise ValueError(f"max_len must be >= 2 to fit the special tokens, got {max_len}")
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and limit < 1_000_000 and max_len > limit:
        raise ValueError(f"max_len={max_len} exceeds the tokenizer's model_max_length={limit} "
                         "(the model has no position embeddings beyond it)")
    if len(texts) == 0:
        raise ValueError("no texts to tokenize (empty data set)")
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise ValueError(f"text_pairs has {len(text_pairs)} entries but texts has {len(texts)}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be a str, got {type(t).__name__}: {t!r}")
    for i, t in enumerate(text_pairs or ()):
        if not isinstance(t, str):
            raise TypeError(f"text_pairs[{i}] must be a str, got {type(t).__name__}: {t!r}")


def call_tokenizer(texts: Sequence[str], tokenizer: Any, *, max_len: int,
                   text_pairs: Sequence[str] | None = None, offsets: bool = False) -> Any:
    """Run `tokenizer` exactly as `tokenize` does (pad + truncate to max_len), as numpy.

    Shared by `tokenize_with_stats` and `smat.data.rationales` so that word / token alignment
    always refers to the same token positions as the encoded model inputs.

    Args:
      texts: N first-segment texts.
      tokenizer: a transformers tokenizer (fast, if `offsets`).
      max_len: the fixed sequence length T.
      text_pairs: N second-segment texts, or None.
      offsets: also return the (N, T, 2) character offsets of each token.

    Returns:
      The tokenizer's `BatchEncoding` with numpy arrays of shape (N, T).
    """
    return tokenizer(list(texts), None if text_pairs is None else list(text_pairs),
                     padding="max_length", truncation=True, max_length=max_len,
                     return_tensors="np", return_special_tokens_mask=True,
                     return_token_type_ids=True, return_offsets_mapping=offsets)


def _untruncated_lengths(texts: Sequence[str], text_pairs: Sequence[str] | None,
                         tokenizer: Any) -> np.ndarray:
    enc = tokenizer(list(texts), None if text_pairs is None else list(text_pairs),
                    padding=False, truncation=False, verbose=False)
    return np.asarray([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


def _encode(texts: Sequence[str], text_pairs: Sequence[str] | None, labels: np.ndarray,
            tokenizer: Any, max_len: int) -> tuple[Encoded, TokenizeStats]:
    check_tokenizer_inputs(texts, text_pairs, tokenizer, max_len)
    lengths = _untruncated_lengths(texts, text_pairs, tokenizer)
    stats = TokenizeStats(num_examples=len(texts), num_truncated=int((lengths > max_len).sum()),
                          max_length_seen=int(lengths.max()), max_len=max_len)
    if stats.num_truncated:
        warnings.warn(f"{stats.num_truncated} of {stats.num_examples} texts are longer than "
                      f"max_len={max_len} tokens (longest: {stats.max_length_seen}) and were "
                      "truncated", TruncationWarning, stacklevel=3)
    enc = call_tokenizer(texts, tokenizer, max_len=max_len, text_pairs=text_pairs)
    attention_mask = enc["attention_mask"].astype(np.int32)
    encoded = Encoded(
        input_ids=enc["input_ids"].astype(np.int32),
        attention_mask=attention_mask,
        token_type_ids=enc["token_type_ids"].astype(np.int32),
        special_tokens_mask=enc["special_tokens_mask"].astype(bool) | (attention_mask == 0),
        labels=labels,
    )
    return encoded, stats


def tokenize_with_stats(data: TextDataset, tokenizer: Any, *,
                        max_len: int) -> tuple[Encoded, TokenizeStats]:
    """Tokenize a `TextDataset` to fixed length and report truncation.

    Each text (or text pair) becomes `[CLS] text [SEP] (pair [SEP])` padded with the pad token
    to exactly `max_len` tokens; longer inputs are truncated (pairs: longest first) and counted.

    Args:
      data: the texts, optional text pairs and labels.
      tokenizer: a transformers tokenizer, e.g. `AutoTokenizer.from_pretrained(folder)`.
      max_len: the fixed sequence length T (special tokens included).

    Returns:
      (encoded, stats): `Encoded` arrays of shape (N, T) with `data.labels`, and the
      `TokenizeStats` of this call.

    Warns:
      TruncationWarning: once, when any input was longer than max_len (count + longest).

    Raises:
      ValueError: max_len < 2 or beyond the tokenizer's model_max_length, or empty data.
    """
    return _encode(data.texts, data.text_pairs, data.labels, tokenizer, max_len)


def tokenize(data: TextDataset, tokenizer: Any, *, max_len: int) -> Encoded:
    """Tokenize a `TextDataset` to fixed length (see `tokenize_with_stats`).

    Args:
      data: the texts, optional text pairs and labels.
      tokenizer: a transformers tokenizer.
      max_len: the fixed sequence length T.

    Returns:
      `Encoded` numpy arrays of shape (N, T) and labels (N,).

    Warns:
      TruncationWarning: once, when any input was longer than max_len.

    Raises:
      ValueError: max_len < 2 or beyond the tokenizer's model_max_length, or empty data.
    """
    return _encode(data.texts, data.text_pairs, data.labels, tokenizer, max_len)[0]


def tokenize_texts(texts: Sequence[str], tokenizer: Any, *, max_len: int,
                   text_pairs: Sequence[str] | None = None) -> Encoded:
    """Tokenize unlabelled texts (e.g. for prediction); labels are all -1 (int32).

    Args:
      texts: N texts.
      tokenizer: a transformers tokenizer.
      max_len: the fixed sequence length T.
      text_pairs: N second-segment texts, or None.

    Returns:
      `Encoded` numpy arrays of shape (N, T); labels (N,) int32 filled with -1.

    Warns:
      TruncationWarning: once, when any input was longer than max_len.

    Raises:
      TypeError / ValueError: see `check_tokenizer_inputs`.
    """
    labels = np.full(len(texts), UNLABELLED, dtype=np.int32)
    return _encode(texts, text_pairs, labels, tokenizer, max_len)[0]


def shuffled_tokens(data: Encoded, rows: Sequence[int], *, seed: int = 0) -> Encoded:
    """`data` with each row's real tokens in a random order, fixed per data-set row: the
    special tokens and padding stay where they are, and tokens move only within their
    segment (so a text pair stays a pair).

    Args:
      data: tokenized rows.
      rows: each row's index in its data set (its order depends on it, not on the batch).
      seed: the shuffle's seed.
    """
    ids = np.array(data.input_ids, copy=True)
    movable = ~np.asarray(data.special_tokens_mask, bool) & (np.asarray(data.attention_mask) != 0)
    types = np.asarray(data.token_type_ids)
    for i, row in enumerate(rows):
        rng = np.random.default_rng([seed, int(row)])
        for segment in np.unique(types[i][movable[i]]):
            where = np.flatnonzero(movable[i] & (types[i] == segment))
            ids[i, where] = ids[i, rng.permutation(where)]
    return data._replace(input_ids=ids)
