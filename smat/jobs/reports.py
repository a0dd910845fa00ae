"""Faithfulness, agreement and plausibility of explainers on a trained model, as reports.

The jobs behind ``smat faithfulness``, ``smat agreement`` and ``smat plausibility``: explain
a data set with :func:`smat.jobs.explain.explain_data` (one jitted call per batch and explainer),
then run the batched metrics of this package and summarise them per explainer (design §6).

* faithfulness: ERASER comprehensiveness / sufficiency (:mod:`.faithfulness`), mean with a
  bootstrap 95% CI over examples;
* agreement: pairwise Pearson / Kendall tau-b / Spearman matrices (:mod:`.agreement`),
  aggregated over instances then seeds (several trained models), the mean over pairs, the
  top-k overlap, and a one-sided Wilcoxon test per pair (agreement > 0) with Holm-Bonferroni;
* plausibility: word-level ROC-AUC, average precision, token F1 and IOU F1 at top-k
  (:mod:`.plausibility`) against human rationales such as ERASER's.

Every report is a JSON-able dict; its ``*_table`` function renders it as the tables of
docs/results.md.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

from smat.data import (
    Encoded,
    RationaleDataset,
    pad_word_masks,
    take,
    token_word_ids,
    tokenize,
)
from smat.evaluation.agreement import (
    AGREEMENT_METRICS,
    agreement_matrix,
    kendall_tau_b,
    pearson_r,
    plot_agreement_matrix,
    spearman_rho,
    top_k_overlap,
)
from smat.evaluation.cartography import GROUPS as CARTOGRAPHY_GROUPS
from smat.evaluation.faithfulness import DEFAULT_BINS, batched_comprehensiveness_sufficiency
from smat.evaluation.plausibility import (
    average_precision,
    iou_f1,
    roc_auc,
    token_f1,
    word_level_scores,
)
from smat.evaluation.statistics import holm_bonferroni, mean_with_ci, wilcoxon_greater
from smat.jobs.explain import ExplainConfig, explain_data
from smat.json_files import read_json
from smat.models import functional
from smat.models.inference import map_batches
from smat.store import model_store
from smat.store.explanation_file import explainer_names, is_explanation_file
from smat.store.run_record import HELD_OUT_SPLITS, held_out_rows

__all__ = [
    "AgreementConfig",
    "FaithfulnessConfig",
    "agreement_table",
    "faithfulness_table",
    "plausibility_table",
    "PlausibilityConfig",
    "agreement_report",
    "faithfulness_of_scores",
    "faithfulness_report",
    "head_plausibility",
    "held_out_split",
    "load_groups",
    "sample_per_group",
    "plausibility_report",
]

@dataclasses.dataclass(frozen=True, kw_only=True)
class FaithfulnessConfig:
    """Settings of a faithfulness report (:func:`faithfulness_report`).

    Attributes:
      bins: fractions of the maskable tokens removed (comprehensiveness) or kept
        (sufficiency), averaged as ERASER's AOPC.
      replacement: what removed tokens become, "mask" ([MASK]) or "pad".
      explain: which explainers run and how (ExplainConfig).
    """

    bins: tuple[float, ...] = DEFAULT_BINS
    replacement: str = dataclasses.field(default="mask",
                                         metadata={"choices": ("mask", "pad")})
    explain: ExplainConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgreementConfig:
    """Settings of an agreement report (:func:`agreement_report`).

    Attributes:
      metrics: per-instance rank correlations; the first one is tested (Wilcoxon).
      top_k: tokens compared by the top-k overlap.
      groups: a per-instance grouping (a teacher run folder with cartography.json, or a
        JSON file with "split" and "group"): agreement is also reported per group, on the
        rows of the grouping's split.
      per_group: with groups, at most this many rows of each group (seeded sample).
      explain: which explainers run and how (ExplainConfig).
    """

    metrics: tuple[str, ...] = dataclasses.field(
        default=tuple(AGREEMENT_METRICS), metadata={"choices": tuple(AGREEMENT_METRICS)})
    top_k: int = 5
    groups: str | None = None
    per_group: int | None = None
    explain: ExplainConfig

    def __post_init__(self) -> None:
        if self.per_group is not None and self.groups is None:
            raise ValueError("AgreementConfig.per_group samples the rows of each group; it "
                             "needs groups")
        if self.groups is not None and self.explain.num_examples is not None:
            raise ValueError("with groups, choose rows per group (per_group), not "
                             f"num_examples={self.explain.num_examples}")


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


PER_INSTANCE = {"pearson": pearson_r, "kendall": kendall_tau_b, "spearman": spearman_rho}


SPLITS = HELD_OUT_SPLITS


def held_out_split(trained: model_store.TrainedModel, *,
                   num_examples: int | None = None, split: str = "test",
                   folder: str | Path | None = None) -> Encoded:
    """The model's held-out test split (the SMaT protocol's student test part), or the rows
    it trained on (``split="teacher_train"``, where cartography groups live).

    The data settings saved with a ``smat train-teacher`` model say where its examples came
    from; the split is rebuilt from them, so the teacher never trained on the test rows.

    Args:
      trained: a model saved by ``smat train-teacher`` (``smat.store.model_store.load``).
      num_examples: keep the first N rows (default: all).
      split: "test" or "teacher_train".
      folder: the model's folder, where the rows are cached after the first call
        (:func:`smat.store.run_record.held_out_rows`).

    Raises:
      ValueError: the model has no saved data settings, num_examples < 1, or an unknown
        split.
    """
    if num_examples is not None and num_examples < 1:
        raise ValueError(f"num_examples must be >= 1, got {num_examples}")
    rows = held_out_rows(trained, split=split, folder=folder)
    if num_examples is not None and num_examples < len(rows.labels):
        rows = take(rows, np.arange(num_examples))
    return rows


def load_groups(path: str | Path) -> tuple[str, np.ndarray]:
    """``(split, labels)`` of a per-instance grouping: a JSON object with ``"group"`` (one
    label per row of the split) and ``"split"`` ("test" or "teacher_train"), such as the
    ``cartography.json`` of a teacher trained with ``--training-dynamics``; a run folder
    stands for its ``cartography.json``.

    Raises:
      FileNotFoundError: no such file (or the folder has no cartography.json).
      ValueError: the file lacks "group" or names an unknown split.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "cartography.json"
    if not path.is_file():
        raise FileNotFoundError(f"no grouping file at {path}; train the teacher with "
                                "--training-dynamics, or write a JSON with 'split' and 'group'")
    payload = read_json(path)
    if "group" not in payload:
        raise ValueError(f"{path} has no 'group' list (one label per row)")
    split = payload.get("split", "test")
    if split not in SPLITS:
        raise ValueError(f"{path} names split {split!r}; choose from {SPLITS}")
    return split, np.asarray(payload["group"]).astype(str)


def sample_per_group(groups: Sequence[str] | np.ndarray, per_group: int | None, *,
                     seed: int = 0) -> np.ndarray:
    """Sorted row indices: every row, or at most `per_group` rows of each group drawn
    without replacement (seeded), the paper's "representative samples" of each group.

    Raises:
      ValueError: per_group < 1.
    """
    groups = np.asarray(groups).astype(str)
    if per_group is None:
        return np.arange(len(groups))
    if per_group < 1:
        raise ValueError(f"per_group must be >= 1, got {per_group}")
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(groups == label))[:per_group]
              for label in ordered_groups(groups)]
    return np.sort(np.concatenate(chosen)) if chosen else np.arange(0)


def _predict_proba(graphdef) -> Callable[..., jax.Array]:
    def predict(params, input_ids, attention_mask, token_type_ids):
        logits = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids, attention="none").logits
        # a bfloat16 model's logits: probabilities (and their AOPC differences) in float32
        return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)

    return predict


def faithfulness_report(trained: model_store.TrainedModel, data: Encoded,
                        explain: ExplainConfig, *, bins: Sequence[float] = DEFAULT_BINS,
                        replacement: str = "mask") -> dict[str, Any]:
    """Comprehensiveness and sufficiency of each explainer of the model's predictions.

    .. math::
        \\mathrm{comp} = \\frac{1}{|K|} \\sum_{q \\in K} p(y|x) - p(y|x \\setminus r_q),
        \\qquad
        \\mathrm{suff} = \\frac{1}{|K|} \\sum_{q \\in K} p(y|x) - p(y|r_q)

    with y the predicted class and r_q the top q of the maskable tokens (DeYoung et al.,
    2020); removed tokens become [MASK] (or PAD) inside one jitted computation per batch.

    Args:
      trained: a classification model.
      data: tokenized examples.
      explain: the explainers (registry names or saved learned explainers) and how they run
        (:func:`smat.jobs.explain.explain_data`); the masked passes use its batch_size and
        length_multiple too.
      bins: fractions of tokens in (0, 1].
      replacement: "mask" ([MASK] id) or "pad" (PAD id).

    Returns:
      ``{"explainers": {name: {"comprehensiveness": {mean, low, high}, "sufficiency": ...,
      "num_valid", "num_excluded"}}, "bins", "replacement", "num_examples"}``; higher
      comprehensiveness and lower sufficiency are more faithful.

    Raises:
      ValueError: a regression model, an unknown replacement, or a tokenizer without it
        (and what :func:`smat.jobs.explain.explain_data` raises).
    """
    _replacement_id(trained, replacement)  # checked before any explainer runs
    explained = explain_data(trained, data, explain)
    return faithfulness_of_scores(trained, data, explained.scores, bins=bins,
                                  replacement=replacement, batch_size=explain.batch_size,
                                  length_multiple=explain.length_multiple)


def _replacement_id(trained: model_store.TrainedModel, replacement: str) -> int:
    if trained.info["task"] != "classification":
        raise ValueError("comprehensiveness / sufficiency track a class probability; the model "
                         f"is a {trained.info['task']!r} model")
    token = {"mask": trained.tokenizer.mask_token_id, "pad": trained.tokenizer.pad_token_id}
    if replacement not in token:
        raise ValueError(f"replacement must be 'mask' or 'pad', got {replacement!r}")
    if token[replacement] is None:
        raise ValueError(f"the tokenizer has no {replacement} token; use the other replacement")
    return token[replacement]


def faithfulness_of_scores(trained: model_store.TrainedModel, data: Encoded,
                           scores: Mapping[str, np.ndarray], *,
                           bins: Sequence[float] = DEFAULT_BINS, replacement: str = "mask",
                           batch_size: int = 16, length_multiple: int = 16) -> dict[str, Any]:
    """:func:`faithfulness_report` of explanations already computed (name -> (N, T) scores
    of the rows of `data`), e.g. ones also scored against a ground truth or combined into
    ensembles, so no explainer runs twice.

    Raises:
      ValueError: as :func:`faithfulness_report`.
    """
    replacement_id = _replacement_id(trained, replacement)
    graphdef, params = functional.split(trained.model)
    predict = Partial(_predict_proba(graphdef), params)  # one trace for every batch
    report: dict[str, Any] = {}
    for name, values in scores.items():
        result = batched_comprehensiveness_sufficiency(
            predict, data.input_ids, values, attention_mask=data.attention_mask,
            special_tokens_mask=data.special_tokens_mask, token_type_ids=data.token_type_ids,
            replacement_id=replacement_id, bins=tuple(bins), batch_size=batch_size,
            length_multiple=length_multiple)
        valid = result.valid
        comp, suff = result.comprehensiveness[valid], result.sufficiency[valid]
        report[name] = {"comprehensiveness": mean_with_ci(comp),
                        "sufficiency": mean_with_ci(suff),
                        "num_valid": int(valid.sum()), "num_excluded": int((~valid).sum())}
    return {"explainers": report, "bins": list(bins), "replacement": replacement,
            "num_examples": int(len(data.labels))}


def agreement_report(models: Sequence[model_store.TrainedModel], data: Encoded,
                     explain: ExplainConfig, *,
                     metrics: Sequence[str] = tuple(AGREEMENT_METRICS), top_k: int = 5,
                     plot_dir: str | None = None,
                     groups: Sequence[str] | np.ndarray | None = None) -> dict[str, Any]:
    """Pairwise agreement of explainers, aggregated over instances, then over models (seeds).

    Each model explains the same tokenized `data`; per instance the correlation runs over
    the real, non-special tokens, and instances with < 3 tokens or constant scores are
    excluded and counted (Jukić et al., 2022). For each pair, a one-sided Wilcoxon
    signed-rank test asks whether the per-instance agreement (first metric) is above 0,
    pooled over models, with Holm-Bonferroni over the pairs.

    Args:
      models: one or more trained models sharing a tokenizer (e.g. seeds of one teacher).
      data: tokenized examples.
      explain: two or more explainers (names or saved learned explainers) and how they run
        (:func:`smat.jobs.explain.explain_data`).
      metrics: keys of :data:`AGREEMENT_METRICS`.
      top_k: tokens compared by the top-k overlap rate.
      plot_dir: if given, write ``agreement_{metric}.png`` heatmaps there.
      groups: one label per row of `data` (e.g. the cartography groups of
        :func:`smat.store.run_record.write_cartography`): the whole report is repeated for the
        rows of each group under ``"groups"`` (Jukić et al. Table 4).

    Returns:
      ``{"metrics": {metric: {"names", "matrix", "mean_over_pairs", "num_excluded"}},
      "top_k_overlap": {"a|b": mean}, "tests": [...], "num_examples", "num_models"}``, and
      with `groups` also ``"groups": {label: {the same keys}}``.

    Raises:
      ValueError: no model, fewer than two explainers, an unknown metric, or a `groups`
        whose length is not the number of rows (and what
        :func:`smat.jobs.explain.explain_data` raises).
    """
    check_agreement_inputs(models, data, explain.explainers, metrics=metrics, groups=groups)
    runs = [explain_data(m, data, explain) for m in models]
    stacked = {n: np.stack([r.scores[n] for r in runs]) for n in runs[0].scores}  # (S, B, T)
    mask = runs[0].show
    report = _agreement_summary(stacked, mask, metrics=metrics, top_k=top_k,
                                plot_dir=plot_dir)
    if groups is not None:
        groups = np.asarray(groups).astype(str)
        report["groups"] = {
            label: _agreement_summary({n: s[:, groups == label] for n, s in stacked.items()},
                                      mask[groups == label], metrics=metrics, top_k=top_k)
            for label in ordered_groups(groups)}
    return report


def check_agreement_inputs(models: Sequence[Any], data: Encoded, explainers: Sequence[str], *,
                           metrics: Sequence[str],
                           groups: Sequence[str] | np.ndarray | None = None) -> None:
    """The checks every agreement job makes before explaining anything.

    Raises:
      ValueError: no model, fewer than two explainers, an unknown metric, `groups` whose
        length is not the number of rows of `data`, or a file of explanations computed
        elsewhere beside several models (a file explains one model).
    """
    if not models:
        raise ValueError("agreement needs at least one trained model")
    files = [str(e) for e in explainers if is_explanation_file(e)]
    if files and len(models) > 1:
        raise ValueError(f"{files} explain one model, not each of {len(models)}: give one "
                         "model with explanation files")
    if len(explainer_names(explainers)) < 2:
        raise ValueError(f"agreement compares explainers; name two or more, got {explainers}")
    unknown = [m for m in metrics if m not in AGREEMENT_METRICS]
    if unknown:
        raise ValueError(f"unknown agreement metrics {unknown}; choose from "
                         f"{sorted(AGREEMENT_METRICS)}")
    if groups is not None and len(groups) != len(data.labels):
        raise ValueError(f"groups has {len(groups)} labels for {len(data.labels)} rows; give "
                         "one label per row")


def ordered_groups(groups: Sequence[str] | np.ndarray) -> list[str]:
    """The distinct labels of `groups`: the cartography groups in their order, then the
    others sorted."""
    present = set(np.asarray(groups).astype(str).tolist())
    return [g for g in CARTOGRAPHY_GROUPS if g in present] + sorted(
        present - set(CARTOGRAPHY_GROUPS))


def _agreement_summary(stacked: dict[str, np.ndarray], mask: np.ndarray, *,
                       metrics: Sequence[str], top_k: int,
                       plot_dir: str | None = None) -> dict[str, Any]:
    """:func:`agreement_report`'s numbers for scores (S, B, T) per explainer and mask (B, T)."""
    names = list(stacked)
    num_models, num_rows = stacked[names[0]].shape[:2]
    report: dict[str, Any] = {"metrics": {}, "num_examples": int(num_rows),
                              "num_models": int(num_models)}
    for metric in metrics:
        matrix = agreement_matrix(stacked, mask, metric=metric)
        rows, cols = np.triu_indices(len(names), k=1)
        report["metrics"][metric] = {
            "names": names, "matrix": np.round(matrix.values, 4).tolist(),
            "mean_over_pairs": matrix.mean_over_pairs(),
            "num_excluded": {f"{names[i]}|{names[j]}": int(matrix.num_excluded[i, j])
                             for i, j in zip(rows, cols, strict=True)}}
        if plot_dir is not None:
            plot_agreement_matrix(matrix, path=f"{plot_dir}/agreement_{metric}.png",
                                  title=f"{metric} agreement ({num_models} model(s))")
    flat_mask = np.broadcast_to(mask, stacked[names[0]].shape).reshape(-1, mask.shape[1])

    def flat(name: str) -> np.ndarray:
        return stacked[name].reshape(-1, mask.shape[1])

    overlap, tests = {}, []
    for a, b in itertools.combinations(names, 2):
        rate = top_k_overlap(flat(a), flat(b), flat_mask, k=top_k)
        overlap[f"{a}|{b}"] = float(rate.mean())
        per_instance = PER_INSTANCE[metrics[0]](flat(a), flat(b), flat_mask, batch_size=128)
        values = np.asarray(per_instance.values)[np.asarray(per_instance.valid)]
        # no valid instance (a small group): no evidence, p = 1
        p_value = wilcoxon_greater(values).p_value if values.size else 1.0
        tests.append({"pair": f"{a}|{b}", "metric": metrics[0], "median": float(
            np.median(values)) if values.size else float("nan"), "p_value": p_value,
            "num_instances": int(values.size)})
    if tests:
        rejected, adjusted = holm_bonferroni([t["p_value"] for t in tests])
        for test, p, r in zip(tests, adjusted, rejected, strict=True):
            test.update(p_holm=float(p), significant=bool(r))
    report.update(top_k=top_k, top_k_overlap=overlap, tests=tests)
    return report


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
    words = _rationale_words(trained, rationales, max_len=max_len, segment=segment)
    explained = explain_data(trained, words.encoded, explain)
    k = top_k if top_k is not None else max(1, round(float(words.gold.sum(1).mean())))
    report: dict[str, Any] = {}
    for name, scores in explained.scores.items():
        word_scores, _ = word_level_scores(scores, words.word_ids, num_words=words.num_words)
        auc = roc_auc(word_scores, words.gold, words.present)
        report[name] = {
            "roc_auc": float(auc.mean()), "num_excluded_auc": int(auc.num_excluded()),
            "average_precision": float(
                average_precision(word_scores, words.gold, words.present).mean()),
            "token_f1": float(token_f1(word_scores, words.gold, words.present, k=k).macro_f1),
            "iou_f1": float(iou_f1(word_scores, words.gold, words.present, k=k).macro_f1)}
    return {"explainers": report, "top_k": k, "num_examples": len(rationales),
            "max_len": words.max_len, "words_scored": int(words.present.sum()),
            "rationale_words": words.total, "rationale_words_cut": words.cut}


class _RationaleWords(NamedTuple):
    encoded: Encoded  # the tokenized texts
    word_ids: np.ndarray  # (N, T) word index of each token, -1 for special / padding
    num_words: int
    gold: np.ndarray  # (N, W) bool rationale words within max_len
    present: np.ndarray  # (N, W) bool word slots with a token within max_len
    total: int  # rationale words in the data
    cut: int  # rationale words past max_len
    max_len: int


def _rationale_words(trained: model_store.TrainedModel, rationales: RationaleDataset, *,
                     max_len: int | None, segment: int = 0) -> _RationaleWords:
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
    return _RationaleWords(encoded, word_ids, num_words, gold, present, total, cut, max_len)


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
    words = _rationale_words(trained, rationales, max_len=max_len, segment=segment)
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


def _format_p(p: float) -> str:
    return "< 1e-4" if p < 1e-4 else f"{p:.2g}"


def faithfulness_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`faithfulness_report`."""
    lines = ["| explainer | comprehensiveness ↑ [95% CI] | sufficiency ↓ [95% CI] |",
             "|---|---|---|"]
    for name, r in report["explainers"].items():
        c, s = r["comprehensiveness"], r["sufficiency"]
        lines.append(f"| {name} | {c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}] | "
                     f"{s['mean']:.3f} [{s['low']:.3f}, {s['high']:.3f}] |")
    return "\n".join(lines)


def agreement_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`agreement_report` (by group too, if it has groups)."""
    metrics = list(report["metrics"])
    lines = ["| pair | " + " | ".join(metrics) + f" | top-{report['top_k']} overlap | "
             "p (Holm) |", "|---|" + "---|" * (len(metrics) + 2)]
    first = report["metrics"][metrics[0]]
    names = first["names"]
    tests = {t["pair"]: t for t in report["tests"]}
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        pair = f"{a}|{b}"
        cells = [f"{report['metrics'][m]['matrix'][i][j]:.3f}" for m in metrics]
        lines.append(f"| {a} / {b} | " + " | ".join(cells)
                     + f" | {report['top_k_overlap'][pair]:.3f} | "
                     f"{_format_p(tests[pair]['p_holm'])} |")
    lines.append("| **mean over pairs** | " + " | ".join(
        f"**{report['metrics'][m]['mean_over_pairs']:.3f}**" for m in metrics)
        + " | | |")
    if "groups" in report:
        lines += ["", "Mean over pairs by group:", "",
                  "| group | instances | " + " | ".join(metrics) + " |",
                  "|---|---|" + "---|" * len(metrics)]
        lines += [f"| {label} | {group['num_examples']} | " + " | ".join(
            f"{group['metrics'][m]['mean_over_pairs']:.3f}" for m in metrics) + " |"
            for label, group in report["groups"].items()]
    return "\n".join(lines)


def plausibility_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`plausibility_report`."""
    lines = ["| explainer | ROC-AUC | AP | token F1 | IOU F1 |", "|---|---|---|---|---|"]
    for name, r in report["explainers"].items():
        lines.append(f"| {name} | {r['roc_auc']:.3f} | {r['average_precision']:.3f} | "
                     f"{r['token_f1']:.3f} | {r['iou_f1']:.3f} |")
    return "\n".join(lines)
