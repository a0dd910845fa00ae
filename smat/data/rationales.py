"""Align word-level / character-level human annotations with sub-word tokens, both ways.

Words are the whitespace-separated words of a text (`text.split()`, the unit ERASER and
MLQE-PE annotate). A fast tokenizer's character offsets map every sub-word token to the word
it starts in, giving `word_ids` (N, T) with -1 for special tokens, padding and tokens of the
other segment of a pair. From there:

- spans -> tokens: a word mask (or word spans, or character spans) becomes a (N, T) token mask;
- tokens -> words: token scores become word scores by summing the sub-word scores of each
  word (`word_scores`, a jit-friendly segment sum).

Words cut off by truncation to max_len have no tokens: their token mask is empty and their
word score is 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from smat.data.tokenization import call_tokenizer, check_tokenizer_inputs

_WORD = re.compile(r"\S+")
Span = tuple[int, int]


def word_char_spans(text: str) -> Int[np.ndarray, "words 2"]:
    """Character (start, end) of each whitespace-separated word of `text` (end exclusive).

    Returns:
      (W, 2) int64, W = len(text.split()).
    """
    spans = [m.span() for m in _WORD.finditer(text)]
    return np.asarray(spans, dtype=np.int64).reshape(len(spans), 2)


def _require_fast(tokenizer: Any) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(f"rationale alignment needs a fast tokenizer (character offsets); got "
                        f"{type(tokenizer).__name__}. Load it with AutoTokenizer.from_pretrained"
                        "(..., use_fast=True)")


def _check_segment(segment: int, text_pairs: Sequence[str] | None) -> None:
    if segment not in (0, 1):
        raise ValueError(f"segment must be 0 (texts) or 1 (text_pairs), got {segment!r}")
    if segment == 1 and text_pairs is None:
        raise ValueError("segment=1 needs text_pairs")


def _token_alignment(texts: Sequence[str], tokenizer: Any, *, max_len: int,
                     text_pairs: Sequence[str] | None, segment: int) -> tuple[Any, list[str]]:
    _require_fast(tokenizer)
    check_tokenizer_inputs(texts, text_pairs, tokenizer, max_len)
    _check_segment(segment, text_pairs)
    enc = call_tokenizer(texts, tokenizer, max_len=max_len, text_pairs=text_pairs, offsets=True)
    annotated = list(texts if segment == 0 else text_pairs)
    return enc, annotated


def token_word_ids(
    texts: Sequence[str], tokenizer: Any, *, max_len: int,
    text_pairs: Sequence[str] | None = None, segment: int = 0,
) -> Int[np.ndarray, "n seq"]:
    """Index of the whitespace word each token belongs to, for `tokenize`'s token positions.

    A token belongs to the word its first character falls in. Tokenization is identical to
    `smat.data.tokenize` with the same max_len (same padding / truncation).

    Args:
      texts: N first-segment texts.
      tokenizer: a fast transformers tokenizer.
      max_len: T, as used for the model inputs.
      text_pairs: N second-segment texts, or None.
      segment: 0 to index the words of `texts`, 1 for the words of `text_pairs`.

    Returns:
      (N, T) int32 word indices into `text.split()` of the chosen segment; -1 for special
      tokens, padding, and tokens of the other segment.

    Raises:
      TypeError: a slow tokenizer (no offsets).
      ValueError: bad segment / max_len / lengths.
    """
    enc, annotated = _token_alignment(texts, tokenizer, max_len=max_len, text_pairs=text_pairs,
                                      segment=segment)
    offsets = enc["offset_mapping"]  # (N, T, 2)
    special = enc["special_tokens_mask"].astype(bool) | (enc["attention_mask"] == 0)
    out = np.full(special.shape, -1, dtype=np.int32)
    for n, text in enumerate(annotated):
        seq_ids = np.asarray([-1 if s is None else s for s in enc.sequence_ids(n)])
        in_segment = (seq_ids == segment) & ~special[n]
        spans = word_char_spans(text)
        starts = offsets[n, :, 0]
        if len(spans) == 0:
            continue
        word = np.searchsorted(spans[:, 0], starts, side="right") - 1  # last word start <= s
        inside = starts < spans[np.clip(word, 0, None), 1]
        out[n] = np.where(in_segment & (word >= 0) & inside, word, -1)
    return out


def spans_to_word_mask(spans: Sequence[Span], *, num_words: int) -> Bool[np.ndarray, " words"]:
    """A (num_words,) bool mask that is True on the words covered by `spans`.

    Args:
      spans: word spans (start, end), end exclusive (the ERASER convention).
      num_words: W, the number of words of the text.

    Returns:
      (W,) bool.

    Raises:
      ValueError: a span outside [0, W] or with start > end.
    """
    mask = np.zeros(num_words, dtype=bool)
    for start, end in spans:
        if not 0 <= start <= end <= num_words:
            raise ValueError(f"word span ({start}, {end}) is outside [0, {num_words}] or "
                             "reversed")
        mask[start:end] = True
    return mask


def pad_word_masks(masks: Sequence[np.ndarray], *,
                   num_words: int | None = None) -> Bool[np.ndarray, "n words"]:
    """Stack per-example word masks of different lengths into (N, W), padded with False.

    Args:
      masks: N bool arrays of shape (W_n,).
      num_words: W; default max W_n. Longer masks are an error (no silent cut).

    Returns:
      (N, W) bool.

    Raises:
      ValueError: a mask longer than num_words.
    """
    width = max((m.shape[0] for m in masks), default=0) if num_words is None else num_words
    out = np.zeros((len(masks), width), dtype=bool)
    for n, m in enumerate(masks):
        if m.shape[0] > width:
            raise ValueError(f"word mask {n} has {m.shape[0]} words > num_words={width}")
        out[n, :m.shape[0]] = m
    return out


def word_mask_to_token_mask(
    word_mask: Bool[np.ndarray, "n words"], word_ids: Int[np.ndarray, "n seq"],
) -> Bool[np.ndarray, "n seq"]:
    """Token mask: a token is marked when the word it belongs to is marked.

    Args:
      word_mask: (N, W) bool word annotations (see `pad_word_masks`).
      word_ids: (N, T) int word index per token, -1 for tokens outside any word.

    Returns:
      (N, T) bool; False wherever word_ids == -1.

    Raises:
      ValueError: mismatched N, or a word id >= W.
    """
    word_mask = np.asarray(word_mask, dtype=bool)
    word_ids = np.asarray(word_ids)
    if word_mask.ndim != 2 or word_ids.ndim != 2 or word_mask.shape[0] != word_ids.shape[0]:
        raise ValueError(f"expected word_mask (N, W) and word_ids (N, T), got {word_mask.shape} "
                         f"and {word_ids.shape}")
    if word_ids.size and word_ids.max() >= word_mask.shape[1]:
        raise ValueError(f"word_ids reach {word_ids.max()} but word_mask has only "
                         f"{word_mask.shape[1]} words")
    gathered = np.take_along_axis(word_mask, np.clip(word_ids, 0, None), axis=1)
    return gathered & (word_ids >= 0)


def char_spans_to_token_mask(
    texts: Sequence[str], char_spans: Sequence[Sequence[Span]], tokenizer: Any, *, max_len: int,
    text_pairs: Sequence[str] | None = None, segment: int = 0,
) -> Bool[np.ndarray, "n seq"]:
    """Token mask from character spans: a token is marked when its characters overlap a span.

    Args:
      texts: N first-segment texts.
      char_spans: per example, character spans (start, end), end exclusive, into the chosen
        segment's text.
      tokenizer: a fast transformers tokenizer.
      max_len: T, as used for the model inputs.
      text_pairs: N second-segment texts, or None.
      segment: 0 if the spans index `texts`, 1 if they index `text_pairs`.

    Returns:
      (N, T) bool; special tokens, padding and the other segment are never marked.

    Raises:
      ValueError: len(char_spans) != N, or a span outside its text.
    """
    enc, annotated = _token_alignment(texts, tokenizer, max_len=max_len, text_pairs=text_pairs,
                                      segment=segment)
    if len(char_spans) != len(annotated):
        raise ValueError(f"char_spans has {len(char_spans)} entries but there are "
                         f"{len(annotated)} texts")
    offsets = enc["offset_mapping"]
    special = enc["special_tokens_mask"].astype(bool) | (enc["attention_mask"] == 0)
    out = np.zeros(special.shape, dtype=bool)
    for n, (text, spans) in enumerate(zip(annotated, char_spans, strict=True)):
        seq_ids = np.asarray([-1 if s is None else s for s in enc.sequence_ids(n)])
        in_segment = (seq_ids == segment) & ~special[n]
        for start, end in spans:
            if not 0 <= start <= end <= len(text):
                raise ValueError(f"character span ({start}, {end}) of example {n} is outside "
                                 f"[0, {len(text)}] or reversed")
            overlap = (offsets[n, :, 0] < end) & (offsets[n, :, 1] > start)
            out[n] |= overlap & in_segment
    return out


def word_scores(
    token_scores: Float[Array, "batch seq"], word_ids: Int[Array, "batch seq"], *,
    num_words: int,
) -> Float[Array, "batch words"]:
    """Word scores by summing the scores of each word's sub-word tokens (a segment sum).

    .. math:: s^{word}_{b,w} = \\sum_t s^{token}_{b,t} \\, [\\mathrm{word\\_ids}_{b,t} = w]

    Tokens with word id -1 (special, padding, other segment) are ignored. Pure and jit-able
    with `num_words` static (`jax.jit(word_scores, static_argnames="num_words")`).

    Args:
      token_scores: (B, T) float token saliency.
      word_ids: (B, T) int word index per token, -1 for no word.
      num_words: W (static); word ids >= W are ignored.

    Returns:
      (B, W) float word scores; words without tokens (e.g. truncated) score 0.

    Example:
      >>> import jax.numpy as jnp
      >>> word_scores(jnp.array([[0.0, 1.0, 2.0, 3.0]]), jnp.array([[-1, 0, 0, 1]]),
      ...             num_words=2).tolist()
      [[3.0, 3.0]]

    Raises:
      ValueError: mismatched shapes (at trace time).
    """
    token_scores = jnp.asarray(token_scores)
    word_ids = jnp.asarray(word_ids)
    if token_scores.ndim != 2 or token_scores.shape != word_ids.shape:
        raise ValueError(f"token_scores and word_ids must both be (B, T), got "
                         f"{token_scores.shape} and {word_ids.shape}")
    # Route tokens without a word to an extra dump segment W, dropped after the sum.
    segments = jnp.where((word_ids >= 0) & (word_ids < num_words), word_ids, num_words)

    def one(scores: jax.Array, ids: jax.Array) -> jax.Array:
        return jax.ops.segment_sum(scores, ids, num_segments=num_words + 1)[:num_words]

    return jax.vmap(one)(token_scores, segments)  # (B, W)
