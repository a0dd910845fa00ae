"""The faithfulness report behind ``smat faithfulness``: ERASER comprehensiveness and
sufficiency (AOPC, :mod:`smat.evaluation.faithfulness`) of each explainer on a trained
model's rows, the mean with a bootstrap 95% CI over examples."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

from smat.data import (
    Encoded,
)
from smat.evaluation.faithfulness import DEFAULT_BINS, batched_comprehensiveness_sufficiency
from smat.evaluation.statistics import mean_with_ci
from smat.jobs.explain import ExplainConfig, explain_data
from smat.models import functional
from smat.store import model_store


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


def faithfulness_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`faithfulness_report`."""
    lines = ["| explainer | comprehensiveness ↑ [95% CI] | sufficiency ↓ [95% CI] |",
             "|---|---|---|"]
    for name, r in report["explainers"].items():
        c, s = r["comprehensiveness"], r["sufficiency"]
        lines.append(f"| {name} | {c['mean']:.3f} [{c['low']:.3f}, {c['high']:.3f}] | "
                     f"{s['mean']:.3f} [{s['low']:.3f}, {s['high']:.3f}] |")
    return "\n".join(lines)
