"""The plausibility report behind ``smat plausibility``: word-level ROC-AUC, average
precision, token F1 and IOU F1 at top-k (:mod:`smat.evaluation.plausibility`) of each
explainer against human rationales such as ERASER's; and every attention head's ROC-AUC."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from smat.data import (
    Encoded,
    RationaleDataset,
    pad_word_masks,
    token_word_ids,
    tokenize,
)
from smat.evaluation.plausibility import (
    average_precision,
    iou_f1,
    roc_auc,
    token_f1,
    word_level_scores,
)
from smat.jobs.explain import ExplainConfig, explain_data
from smat.models import functional
from smat.models.inference import map_batches
from smat.store import model_store


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlausibilityConfig:
    """Settings of a plausibility report (:func:`plausibility_report`).

    Attributes:
      data_dir: an ERASER-format data set folder ({split}.jsonl and docs/).
      split: which ERASER split to score.
      max_len: token length (None: the model's).
      top_k: words selected for token / IOU F1 (None: the mean rationale length).
      explain: which explainers run and how (ExplainConfig).
    """

    data_dir: str
    split: str = dataclasses.field(default="test",
                                   metadata={"choices": ("train", "val", "test")})
    max_len: int | None = None
    top_k: int | None = None
    explain: ExplainConfig


def plausibility_report(trained: model_store.TrainedModel, rationales: RationaleDataset,
                        explain: ExplainConfig, *, max_len: int | None = None,
                        top_k: int | None = None, segment: int = 0) -> dict[str, Any]:
    """Agreement of explanations with human rationales, at the word level.

    Token scores become word scores by summing each word's sub-word scores (design §6); per
    example, ROC-AUC and average precision compare them with the rationale words (examples
    whose words are all or none rationale are skipped and counted), and token F1 / IOU F1
    (threshold 0.5) score the top-k words, k = the mean rationale length in words (ERASER's
    choice) unless given. Words cut off by `max_len` are not scored; their number is
    reported and warned about.

    Args:
      trained: a model whose tokenizer and labels fit the rationale data.
      rationales: texts with word-level rationale masks (``smat.data.load_eraser``).
      explain: the explainers (names or saved learned explainers) and how they run
        (:func:`smat.jobs.explain.explain_data`).
      max_len: token length (default: the model's); at most its position embeddings.
      top_k: words selected for the F1 metrics (default: mean rationale length).
      segment: the text segment whose words are scored: 0 the first text (its
        ``word_masks``), 1 the second of a pair (``pair_word_masks``; MLQE-PE's tags of the
        translation).

    Returns:
      ``{"explainers": {name: {"roc_auc", "average_precision", "token_f1", "iou_f1",
      "num_excluded_auc"}}, "top_k", "num_examples", "words_scored", "rationale_words_cut"}``.

    Raises:
      ValueError: the rationales do not annotate that text segment (and what
        :func:`smat.jobs.explain.explain_data` raises).
    """
    words = rationale_words(trained, rationales, max_len=max_len, segment=segment)
    explained = explain_data(trained, words.encoded, explain)
    return {**plausibility_of_scores(explained.scores, words, top_k=top_k),
            "num_examples": len(rationales), "max_len": words.max_len,
            "words_scored": int(words.present.sum()), "rationale_words": words.total,
            "rationale_words_cut": words.cut}


def plausibility_of_scores(scores: Mapping[str, np.ndarray], words: RationaleWords, *,
                           top_k: int | None = None) -> dict[str, Any]:
    """The measures of :func:`plausibility_report` for token scores computed already (rows
    of ``words.encoded``): ``{"explainers": {name: {...}}, "top_k"}``."""
    k = top_k if top_k is not None else max(1, round(float(words.gold.sum(1).mean())))
    report: dict[str, Any] = {}
    for name, values in scores.items():
        word_scores, _ = word_level_scores(values, words.word_ids, num_words=words.num_words)
        auc = roc_auc(word_scores, words.gold, words.present)
        report[name] = {
            "roc_auc": float(auc.mean()), "num_excluded_auc": int(auc.num_excluded()),
            "average_precision": float(
                average_precision(word_scores, words.gold, words.present).mean()),
            "token_f1": float(token_f1(word_scores, words.gold, words.present, k=k).macro_f1),
            "iou_f1": float(iou_f1(word_scores, words.gold, words.present, k=k).macro_f1)}
    return {"explainers": report, "top_k": k}


class RationaleWords(NamedTuple):
    """Rationale texts tokenized, with their words aligned to the tokens."""

    encoded: Encoded  # the tokenized texts
    word_ids: np.ndarray  # (N, T) word index of each token, -1 for special / padding
    num_words: int
    gold: np.ndarray  # (N, W) bool rationale words within max_len
    present: np.ndarray  # (N, W) bool word slots with a token within max_len
    total: int  # rationale words in the data
    cut: int  # rationale words past max_len
    max_len: int


def rationale_words(trained: model_store.TrainedModel, rationales: RationaleDataset, *,
                     max_len: int | None, segment: int = 0) -> RationaleWords:
    """Tokenize rationale data and align the word masks of one text segment to the tokens
    (warns about cut rationale words)."""
    masks = rationales.word_masks if segment == 0 else rationales.pair_word_masks
    if masks is None:
        raise ValueError(f"the rationale data set has no word masks on text segment "
                         f"{segment} ({'first text' if segment == 0 else 'second text'})")
    max_len = max_len or trained.info["max_len"]
    texts, pairs = rationales.data.texts, rationales.data.text_pairs
    encoded = tokenize(rationales.data, trained.tokenizer, max_len=max_len)
    word_ids = token_word_ids(texts, trained.tokenizer, max_len=max_len, text_pairs=pairs,
                              segment=segment)
    num_words = int(word_ids.max()) + 1
    total = sum(int(m.sum()) for m in masks)
    gold = pad_word_masks([m[:num_words] for m in masks], num_words=num_words)
    present = np.zeros(gold.shape, bool)
    rows, cols = np.nonzero(word_ids >= 0)
    present[rows, word_ids[rows, cols]] = True
    gold = gold & present
    cut = total - int(gold.sum())
    if cut:
        warnings.warn(f"{cut} of {total} rationale words lie beyond max_len={max_len} tokens "
                      "and are not scored; raise max_len to score them", stacklevel=3)
    return RationaleWords(encoded, word_ids, num_words, gold, present, total, cut, max_len)


def head_plausibility(trained: model_store.TrainedModel, rationales: RationaleDataset, *,
                      max_len: int | None = None, batch_size: int = 8,
                      segment: int = 0) -> dict[str, Any]:
    """Word-level ROC-AUC of every single attention head and of every layer's head mean.

    The oracles of the SMaT paper's Table 2 ("Attn. (best layer)*" and "Attn. (best
    head)*"): each head's query-pooled attention logits (Eq. 11 with a one-hot lambda), and
    each layer's mean over heads (the static last-layer explainer, at every layer), scored
    against the human rationales exactly as :func:`plausibility_report` scores an
    explainer. They use the human labels to pick the layer / head, so they are upper
    references, not explainers.

    Args:
      trained: a model whose tokenizer fits the rationale data.
      rationales: texts with word-level rationale masks (``smat.data.load_eraser``).
      max_len: token length (default: the model's).
      batch_size: rows per forward pass.
      segment: the text segment whose words are scored (as :func:`plausibility_report`).

    Returns:
      ``{"head_auc": (L, H) list, "layer_auc": (L,) list, "best_head": [l, h],
      "best_head_auc", "best_layer", "best_layer_auc", "num_examples"}``.

    Raises:
      ValueError: the rationales do not annotate that text segment.
    """
    words = rationale_words(trained, rationales, max_len=max_len, segment=segment)
    graphdef, params = functional.split(trained.model)
    encoder = trained.model.encoder.config
    num_layers, num_heads = encoder.num_layers, encoder.num_heads

    def pooled_rows(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, Any]:
        pooled = _pooled_logits(graphdef, params, batch.input_ids, batch.attention_mask,
                                batch.token_type_ids)  # (L, B, H, T)
        return {"pooled": jnp.moveaxis(pooled, 1, 0).reshape(pooled.shape[1], -1,
                                                             pooled.shape[-1])}

    pooled = map_batches(pooled_rows, words.encoded, batch_size=batch_size,
                         per_token=("pooled",))["pooled"]  # (N, L * H, T)
    pooled = pooled.reshape(len(pooled), num_layers, num_heads, -1)

    def auc_of(scores: np.ndarray) -> float:
        word_scores, _ = word_level_scores(np.where(words.encoded.attention_mask != 0,
                                                    scores, 0.0).astype(np.float32),
                                           words.word_ids, num_words=words.num_words)
        return float(roc_auc(word_scores, words.gold, words.present).mean())

    head_auc = np.array([[auc_of(pooled[:, layer, head]) for head in range(num_heads)]
                         for layer in range(num_layers)])
    layer_auc = np.array([auc_of(pooled[:, layer].mean(1)) for layer in range(num_layers)])
    best_head = np.unravel_index(int(np.argmax(head_auc)), head_auc.shape)
    return {"head_auc": head_auc.tolist(), "layer_auc": layer_auc.tolist(),
            "best_head": [int(i) for i in best_head], "best_head_auc": float(head_auc.max()),
            "best_layer": int(np.argmax(layer_auc)), "best_layer_auc": float(layer_auc.max()),
            "num_examples": len(rationales)}


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _pooled_logits(graphdef, params, input_ids, attention_mask, token_type_ids) -> jax.Array:
    out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, attention="pooled")
    return out.encoder.pooled_attention_logits


def plausibility_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`plausibility_report`."""
    lines = ["| explainer | ROC-AUC | AP | token F1 | IOU F1 |", "|---|---|---|---|---|"]
    for name, r in report["explainers"].items():
        lines.append(f"| {name} | {r['roc_auc']:.3f} | {r['average_precision']:.3f} | "
                     f"{r['token_f1']:.3f} | {r['iou_f1']:.3f} |")
    return "\n".join(lines)
