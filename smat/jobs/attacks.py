"""Adversarial attacks on a trained model's explanations over a data set (the Oxford thesis
§3.5), behind ``smat attack``: :func:`smat.evaluation.attacks.attack_model` on every batch
of the held-out rows, per explainer; RankChange, TopkSumChange and ProbChange averaged over
rows with bootstrap 95% CIs. The top-k is taken over real, non-special tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from smat.data import Encoded
from smat.evaluation.attacks import ATTACKABLE, OBJECTIVES, attack_model
from smat.evaluation.statistics import mean_with_ci
from smat.jobs.explain import ExplainConfig, check_model_and_rows
from smat.models import functional
from smat.models.inference import map_batches
from smat.store import model_store

MEASURES = ("rank_change", "topk_sum_change", "prob_change")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttackConfig:
    """Settings of an explanation attack (:func:`attack_report`; thesis defaults).

    Attributes:
      objective: "unconstrained" (keep the predicted class) or "constrained" (alpha * D -
        beta * squared change of the predicted class's probability).
      epsilon: L-infinity radius of the perturbation of the word embeddings.
      k: tokens attacked per row (None: k_fraction of the row's tokens, at least 1).
      k_fraction: share of a row's tokens attacked when k is None.
      alpha: weight of the top-k objective (constrained).
      beta: weight of the probability penalty (constrained).
      steps: at most this many gradient steps.
      learning_rate: the step size, halved every 200 steps.
      explain: which explainers are attacked (gradient, input_x_gradient,
        integrated_gradients) and how (ExplainConfig).
    """

    objective: str = dataclasses.field(default="unconstrained",
                                       metadata={"choices": OBJECTIVES})
    epsilon: float = 2.0
    k: int | None = None
    k_fraction: float = 0.15
    alpha: float = 1.0
    beta: float = 1.0
    steps: int = 500
    learning_rate: float = 0.1
    explain: ExplainConfig

    def __post_init__(self) -> None:
        bad = [str(e) for e in self.explain.explainers if str(e) not in ATTACKABLE]
        if bad:
            raise ValueError(f"attacks need differentiable explainers; {bad} are not among "
                             f"{sorted(ATTACKABLE)}")
        if not self.epsilon > 0:
            raise ValueError(f"AttackConfig.epsilon must be > 0, got {self.epsilon}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"AttackConfig.objective must be one of {OBJECTIVES}, got "
                             f"{self.objective!r}")


def attack_report(trained: model_store.TrainedModel, data: Encoded,
                  config: AttackConfig) -> dict[str, Any]:
    """Attack every explainer's explanations of `data`; per-row measures and their means.

    Returns:
      ``{"objective", "epsilon", "num_examples", "explainers": {name: {measure: {"mean",
      "low", "high"}, "steps": mean steps, "per_row": {measure: [...]}}}}``.

    Raises:
      ValueError: as :func:`smat.jobs.explain.explain_data`.
    """
    graphdef, params = functional.split(trained.model)
    check_model_and_rows(params, len(data.labels), config.explain)
    report: dict[str, Any] = {"objective": config.objective, "epsilon": config.epsilon,
                              "num_examples": int(len(data.labels)), "explainers": {}}
    for name in (str(e) for e in config.explain.explainers):

        def attacked(batch: Encoded, rows: np.ndarray, full: Encoded, name=name):
            show = (np.asarray(batch.attention_mask) != 0) & ~np.asarray(
                batch.special_tokens_mask)
            result = attack_model(
                graphdef, params, batch.input_ids, batch.attention_mask,
                batch.token_type_ids, explainer=name, show=show, objective=config.objective,
                epsilon=config.epsilon, k=config.k, k_fraction=config.k_fraction,
                alpha=config.alpha, beta=config.beta, steps=config.steps,
                learning_rate=config.learning_rate, ig_steps=config.explain.ig_steps)
            steps = np.full(len(rows), result.steps)
            return {**{m: getattr(result, m) for m in MEASURES}, "steps": steps}

        values = map_batches(attacked, data, batch_size=config.explain.batch_size,
                             length_multiple=config.explain.length_multiple)
        summary: dict[str, Any] = {"steps": float(values["steps"].mean()), "per_row": {}}
        for measure in MEASURES:
            column = values[measure].astype(np.float64)
            summary[measure] = mean_with_ci(column)
            summary["per_row"][measure] = np.round(column, 6).tolist()
        report["explainers"][name] = summary
    return report


def attack_table(report: dict[str, Any]) -> str:
    """Markdown: one row per explainer, each measure's mean [95% CI]."""
    lines = ["| explainer | RankChange | TopkSumChange | ProbChange | steps |",
             "|---|---|---|---|---|"]
    for name, r in report["explainers"].items():
        cells = [f"{r[m]['mean']:.3f} [{r[m]['low']:.3f}, {r[m]['high']:.3f}]"
                 for m in MEASURES]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['steps']:.0f} |")
    return "\n".join(lines)
