"""Does a model variant raise agreement between saliency methods? Jukić et al. (2022), Tables
2 and 4: base, conicity- and tying-regularized models (several seeds each) explain the same
rows; agreement is averaged over explainer pairs and compared between variants, on all rows
and per cartography group.

Per row, a variant's agreement is the mean of the per-instance correlation (Kendall tau-b,
Pearson r, ...) over every explainer pair and every seed where it is defined (>= 3 tokens,
no constant scores; :mod:`smat.evaluation.agreement`); a variant's score is the mean over
its defined rows. The claim is about a training setting (the regularizer), so the unit of
evidence is the trained model: each model's agreement is its mean over the rows, and a
variant is marked (the paper's dagger) when one-sided tests over models find it above *each*
other variant at p < 0.05 after Holm-Bonferroni over all the variant-versus-variant tests of
one metric and group: a t-test on the per-model means, paired by seed when both variants
have the same number of models (Welch's otherwise), because a rank test over 5 models
cannot go below p = 1/32 before the correction. A variant needs at least 2 models to be
tested. The paper's Wilcoxon tests paired on rows (rows of one model are not independent
evidence about a setting, so they overstate significance) are kept as a labelled
secondary view.

Groups come from one reference grouping applied to every model (e.g. the base model's
cartography), so that rows stay paired between variants; the paper does not say whether
its groups were per model.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from smat.data import Encoded
from smat.evaluation.statistics import holm_bonferroni, t_test_greater, wilcoxon_greater
from smat.jobs.agreement import PER_INSTANCE, check_agreement_inputs
from smat.jobs.explain import ExplainConfig, explain_data
from smat.jobs.inputs import ordered_groups
from smat.store import model_store

ALPHA = 0.05


def model_row_agreement(models: Sequence[model_store.TrainedModel], data: Encoded,
                        explain: ExplainConfig, *, metrics: Sequence[str]
                        ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, ``(values, defined)`` of shape (M, N): each model's agreement on each row,
    averaged over explainer pairs, and whether any pair defined it.

    Raises:
      ValueError: no model, fewer than two explainers, or an unknown metric.
    """
    check_agreement_inputs(models, data, explain.explainers, metrics=metrics)
    runs = [explain_data(m, data, explain) for m in models]
    result = {}
    for metric in metrics:
        total = np.zeros((len(models), len(data.labels)))
        count = np.zeros((len(models), len(data.labels)))
        for m, run in enumerate(runs):
            for a, b in itertools.combinations(run.scores, 2):
                pair = PER_INSTANCE[metric](run.scores[a], run.scores[b], run.show,
                                            batch_size=128)
                valid = np.asarray(pair.valid)
                total[m] += np.where(valid, np.asarray(pair.values, np.float64), 0.0)
                count[m] += valid
        result[metric] = (total / np.maximum(count, 1), count > 0)
    return result


def row_agreement(models: Sequence[model_store.TrainedModel], data: Encoded,
                  explain: ExplainConfig, *, metrics: Sequence[str]
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, ``(values, defined)`` of shape (N,): each row's agreement averaged over
    explainer pairs and models (:func:`model_row_agreement` pooled), and whether any pair
    of any model defined it.

    Raises:
      ValueError: no model, fewer than two explainers, or an unknown metric.
    """
    return {metric: _pooled(values, defined) for metric, (values, defined)
            in model_row_agreement(models, data, explain, metrics=metrics).items()}


def _pooled(values: np.ndarray, defined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, N) per-model rows -> (N,) rows averaged over the models that define them."""
    count = defined.sum(axis=0)
    return (np.where(defined, values, 0.0).sum(axis=0) / np.maximum(count, 1), count > 0)


def _model_means(values: np.ndarray, defined: np.ndarray) -> np.ndarray:
    """(M, N) per-model rows -> (M,) each model's mean over the rows it defines."""
    count = defined.sum(axis=1)
    return np.where(count > 0, np.where(defined, values, 0.0).sum(axis=1)
                    / np.maximum(count, 1), np.nan)


def _holm(tests: list[dict[str, Any]]) -> None:
    if tests:
        rejected, adjusted = holm_bonferroni([t["p_value"] for t in tests], alpha=ALPHA)
        for test, p, r in zip(tests, adjusted, rejected, strict=True):
            test.update(p_holm=float(p), significant=bool(r))


def _over_models(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """One-sided p-value that models of `a` agree more than models of `b`, and the test."""
    if len(a) == len(b) and not (np.isnan(a) | np.isnan(b)).any() and len(a) >= 2:
        return t_test_greater(a, b, paired=True), "t-test paired by seed"
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) < 2 or len(b) < 2:
        return 1.0, "fewer than 2 models: no test"
    return t_test_greater(a, b, paired=False), "Welch t-test"


def compare_variants(rows: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Mean agreement of each variant and the one-sided tests between them, for one metric.

    Args:
      rows: variant -> ``(values, defined)``, each (M, N) per model and row (from
        :func:`model_row_agreement`; M may differ between variants, N may not) or (N,) rows
        of one pooled model.

    Returns:
      ``{variant: {"mean", "num_rows", "num_models", "model_means", "above": [variants it
      beats over models], "marked", "above_by_rows"}}`` plus ``"tests"`` (over models, the
      primary view) and ``"row_tests"`` (paired on pooled rows, secondary): every ordered
      pair with its raw and Holm-adjusted p-value.

    Raises:
      ValueError: variants over different numbers of rows.
    """
    rows = {name: (np.atleast_2d(values), np.atleast_2d(defined))
            for name, (values, defined) in rows.items()}
    names = list(rows)
    sizes = {values.shape[1] for values, _ in rows.values()}
    if len(sizes) > 1:
        raise ValueError(f"variants must be compared on the same rows; got sizes {sorted(sizes)}")
    pooled = {name: _pooled(*rows[name]) for name in names}
    means = {name: _model_means(*rows[name]) for name in names}
    tests, row_tests = [], []
    for a, b in itertools.permutations(names, 2):
        p, test = _over_models(means[a], means[b])
        tests.append({"variant": a, "over": b, "p_value": p, "test": test,
                      "num_models": [int(np.isfinite(means[a]).sum()),
                                     int(np.isfinite(means[b]).sum())]})
        both = pooled[a][1] & pooled[b][1]
        p = (wilcoxon_greater(pooled[a][0][both], pooled[b][0][both]).p_value
             if both.any() else 1.0)
        row_tests.append({"variant": a, "over": b, "p_value": p, "num_rows": int(both.sum())})
    _holm(tests)
    _holm(row_tests)
    summary: dict[str, Any] = {"tests": tests, "row_tests": row_tests}
    for name in names:
        values, defined = pooled[name]
        above = [t["over"] for t in tests if t["variant"] == name and t["significant"]]
        summary[name] = {"mean": float(values[defined].mean()) if defined.any() else float("nan"),
                         "num_rows": int(defined.sum()), "num_models": len(means[name]),
                         "model_means": [round(float(v), 6) for v in means[name]],
                         "above": above,
                         "marked": len(names) > 1 and len(above) == len(names) - 1,
                         "above_by_rows": [t["over"] for t in row_tests
                                           if t["variant"] == name and t["significant"]]}
    return summary


def agreement_comparison(variants: Mapping[str, Sequence[model_store.TrainedModel]],
                         data: Encoded, explain: ExplainConfig, *,
                         metrics: Sequence[str] = ("kendall", "pearson"),
                         groups: Sequence[str] | np.ndarray | None = None) -> dict[str, Any]:
    """Compare model variants (each one or more seeds) on the same rows: Jukić et al.'s
    Table 2 (``"all"``) and, with `groups`, Table 4 (one entry per group).

    Returns:
      ``{"variants", "metrics", "explainers", "num_rows", "groups": {"all" | label:
      {metric: compare_variants(...)}}}``.

    Raises:
      ValueError: fewer than two variants, a variant without models, or `groups` of the
        wrong length (and what :func:`row_agreement` raises).
    """
    if len(variants) < 2:
        raise ValueError(f"compare two or more model variants, got {list(variants)}")
    empty = [name for name, models in variants.items() if not models]
    if empty:
        raise ValueError(f"variants without models: {empty}")
    for models in variants.values():
        check_agreement_inputs(models, data, explain.explainers, metrics=metrics,
                               groups=groups)
    per_variant = {name: model_row_agreement(models, data, explain, metrics=metrics)
                   for name, models in variants.items()}
    selections = {"all": np.ones(len(data.labels), bool)}
    if groups is not None:
        groups = np.asarray(groups).astype(str)
        selections.update({label: groups == label for label in ordered_groups(groups)})
    return {"variants": list(variants), "metrics": list(metrics),
            "explainers": [str(e) for e in explain.explainers], "num_rows": int(len(data.labels)),
            "groups": {label: {metric: compare_variants(
                {name: (rows[metric][0][:, keep], rows[metric][1][:, keep])
                 for name, rows in per_variant.items()}) for metric in metrics}
                for label, keep in selections.items()}}


def _cell(summary: Mapping[str, Any], name: str) -> str:
    entry = summary[name]
    others = [key for key in summary if key not in ("tests", "row_tests", name)]
    by_rows = bool(others) and len(entry["above_by_rows"]) == len(others)
    return f"{entry['mean']:.2f}{'†' if entry['marked'] else ''}{' ‡' if by_rows else ''}"


MARKS = ("† above every other variant over trained models (one-sided t-test on the models' "
         "mean agreement, paired by seed, Holm, p < .05); ‡ the same by the paper's Wilcoxon "
         "test paired on rows (secondary: rows of one model are not independent evidence "
         "about a training setting)")


def comparison_tables(result: Mapping[str, Any]) -> str:
    """Markdown of :func:`agreement_comparison`: the Table 2 layout (variants x metrics, all
    rows) and, when grouped, the Table 4 layout (groups x variants, each metric), with the
    number of models per variant and the meaning of the marks (:data:`MARKS`)."""
    variants, metrics = result["variants"], result["metrics"]
    every = result["groups"]["all"]
    models = ", ".join(f"{v} {every[metrics[0]][v]['num_models']}" for v in variants)
    lines = [f"Models per variant: {models}. {MARKS}.", "",
             "| metric | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
    lines += [f"| {metric} | " + " | ".join(_cell(every[metric], v) for v in variants) + " |"
              for metric in metrics]
    grouped = [label for label in result["groups"] if label != "all"]
    for metric in metrics if grouped else ():
        lines += ["", f"{metric} by group:", "",
                  "| group | rows | " + " | ".join(variants) + " |",
                  "|---|---|" + "---|" * len(variants)]
        for label in grouped:
            summary = result["groups"][label][metric]
            rows = max(summary[v]["num_rows"] for v in variants)
            lines.append(f"| {label} | {rows} | " + " | ".join(_cell(summary, v)
                                                            for v in variants) + " |")
    return "\n".join(lines)
