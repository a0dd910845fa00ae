"""The leakage report: for each explainer, how well a probe that sees only an explanation's
positions and mass (no text) reads the model's predicted class
(:mod:`smat.evaluation.leakage`), beside the same probe on the length alone.

A learned explainer whose probe accuracy is far above the static explainers' and the
length's may be teaching students the label through where it puts its mass rather than by
explaining; the student control for that is ``StudentTrainConfig.explanation_source``
("shuffled_text").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from smat.data import Encoded
from smat.evaluation.leakage import explanation_features, length_features, probe_accuracy
from smat.jobs.explain import ExplainConfig, explain_data, require_classification
from smat.store import model_store

__all__ = ["LeakageConfig", "leakage_report", "leakage_table"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeakageConfig:
    """Settings of a leakage report (:func:`leakage_report`).

    Attributes:
      bins: equal relative-position bins of the probe's mass features.
      edge_tokens: also show the probe the mass on each of the first and last this many
        words (0: the relative bins alone; a label written into which of the first words
        holds the mass needs it).
      folds: cross-validation folds of the probe.
      explain: which explainers run and how (ExplainConfig); learned explainers are given
        as their folders.
    """

    bins: int = 8
    edge_tokens: int = 0
    folds: int = 5
    explain: ExplainConfig

    def __post_init__(self) -> None:
        if self.edge_tokens < 0:
            raise ValueError(f"LeakageConfig.edge_tokens must be >= 0, got {self.edge_tokens}")
        for name in ("bins", "folds"):
            if getattr(self, name) < (2 if name == "folds" else 1):
                raise ValueError(f"LeakageConfig.{name} must be >= "
                                 f"{2 if name == 'folds' else 1}, got {getattr(self, name)}")


def leakage_report(trained: model_store.TrainedModel, data: Encoded,
                   config: LeakageConfig) -> dict[str, Any]:
    """Probe accuracy of the predicted class from each explainer's positions and mass, and
    from the length alone, on `data` (classification models only).

    Raises:
      ValueError: a regression model (there is no class to read), or as
        :func:`smat.jobs.explain.explain_data`.
    """
    require_classification(trained, "the leakage probe's features")
    explained = explain_data(trained, data, config.explain)
    predictions = np.asarray(explained.predictions)
    mask = np.asarray(data.attention_mask) != 0

    def probe(features: np.ndarray) -> dict[str, Any]:
        return probe_accuracy(features, predictions, folds=config.folds)

    return {"num_examples": int(len(predictions)), "bins": config.bins, "folds": config.folds,
            **({"edge_tokens": config.edge_tokens} if config.edge_tokens else {}),
            **({"model_params": trained.info["params_fingerprint"]}
               if "params_fingerprint" in trained.info else {}),
            "predicted_class_counts": np.bincount(predictions.astype(int)).tolist(),
            "length_only": probe(length_features(mask)),
            "explainers": {name: probe(explanation_features(
                scores, mask[:, :scores.shape[1]], bins=config.bins,
                edge_tokens=config.edge_tokens))
                for name, scores in explained.scores.items()}}


def leakage_table(report: dict[str, Any]) -> str:
    """The markdown table of :func:`leakage_report`."""
    lines = ["| probe input | accuracy of the predicted class | folds (min-max) | p vs majority |",
             "|---|---|---|---|"]
    rows = {**report["explainers"], "*length only*": report["length_only"]}
    for name, r in rows.items():
        folds = r["fold_accuracies"]
        lines.append(f"| {name} | {r['accuracy']:.3f} | {min(folds):.3f}-{max(folds):.3f} | "
                     f"{r['p_value']:.2g} |")
    counts = report["predicted_class_counts"]
    return "\n".join([*lines, "", f"Majority class: {max(counts) / sum(counts):.3f} of "
                      f"{report['num_examples']} rows (answering each fold's training "
                      f"majority, the rate the p-values test against: "
                      f"{report['length_only']['majority']:.3f}); the probe sees each "
                      f"explanation's mass by position ({report['bins']} bins, first / last "
                      "token, peak, entropy, length"
                      + (f", each of the {report['edge_tokens']} words after the first and "
                         "before the last token" if report.get("edge_tokens") else "")
                      + "), never its tokens."])
