"""Does a model variant raise agreement between saliency methods? Jukić et al. (2022), Tables
2 and 4: base, conicity- and tying-regularized models (several seeds each) explain the same
rows; agreement is averaged over explainer pairs and compared between variants, on all rows
and per cartography group.

Per row, a variant's agreement is the mean of the per-instance correlation (Kendall tau-b,
Pearson r, ...) over every explainer pair and every seed where it is defined (>= 3 tokens,
no constant scores; :mod:`smat.evaluation.agreement`); a variant's score is the mean over
its defined rows. A variant is marked (the paper's dagger) when a one-sided Wilcoxon
signed-rank test, paired on rows, finds it above *each* other variant at p < 0.05 after
Holm-Bonferroni over all the variant-versus-variant tests of one metric and group.

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
from smat.evaluation.statistics import holm_bonferroni, wilcoxon_greater
from smat.jobs.explain import ExplainConfig, explain_data
from smat.jobs.reports import PER_INSTANCE, check_agreement_inputs, ordered_groups
from smat.store import model_store

ALPHA = 0.05


def row_agreement(models: Sequence[model_store.TrainedModel], data: Encoded,
                  explain: ExplainConfig, *, metrics: Sequence[str]
                  ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per metric, ``(values, defined)`` of shape (N,): each row's agreement averaged over
    explainer pairs and models, and whether any pair of any model defined it.

    Raises:
      ValueError: no model, fewer than two explainers, or an unknown metric.
    """
    check_agreement_inputs(models, data, explain.explainers, metrics=metrics)
    runs = [explain_data(m, data, explain) for m in models]
    result = {}
    for metric in metrics:
        total = np.zeros(len(data.labels))
        count = np.zeros(len(data.labels))
        for run in runs:
            for a, b in itertools.combinations(run.scores, 2):
                pair = PER_INSTANCE[metric](run.scores[a], run.scores[b], run.show,
                                            batch_size=128)
                valid = np.asarray(pair.valid)
                total += np.where(valid, np.asarray(pair.values, np.float64), 0.0)
                count += valid
        result[metric] = (total / np.maximum(count, 1), count > 0)
    return result


def compare_variants(rows: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Mean agreement of each variant and the one-sided tests between them, for one metric.

    Args:
      rows: variant -> ``(values, defined)`` over the same rows (from :func:`row_agreement`).

    Returns:
      ``{variant: {"mean", "num_rows", "above": [variants it beats], "marked"}}`` plus
      ``"tests"``: every ordered pair with its raw and Holm-adjusted p-value.

    Raises:
      ValueError: variants over different numbers of rows.
    """
    names = list(rows)
    sizes = {len(values) for values, _ in rows.values()}
    if len(sizes) > 1:
        raise ValueError(f"variants must be compared on the same rows; got sizes {sorted(sizes)}")
    tests = []
    for a, b in itertools.permutations(names, 2):
        both = rows[a][1] & rows[b][1]
        p = (wilcoxon_greater(rows[a][0][both], rows[b][0][both]).p_value
             if both.any() else 1.0)
        tests.append({"variant": a, "over": b, "p_value": p, "num_rows": int(both.sum())})
    if tests:
        rejected, adjusted = holm_bonferroni([t["p_value"] for t in tests], alpha=ALPHA)
        for test, p, r in zip(tests, adjusted, rejected, strict=True):
            test.update(p_holm=float(p), significant=bool(r))
    summary: dict[str, Any] = {"tests": tests}
    for name in names:
        values, defined = rows[name]
        above = [t["over"] for t in tests if t["variant"] == name and t["significant"]]
        summary[name] = {"mean": float(values[defined].mean()) if defined.any() else float("nan"),
                         "num_rows": int(defined.sum()), "above": above,
                         "marked": len(names) > 1 and len(above) == len(names) - 1}
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
    per_variant = {name: row_agreement(models, data, explain, metrics=metrics)
                   for name, models in variants.items()}
    selections = {"all": np.ones(len(data.labels), bool)}
    if groups is not None:
        groups = np.asarray(groups).astype(str)
        selections.update({label: groups == label for label in ordered_groups(groups)})
    return {"variants": list(variants), "metrics": list(metrics),
            "explainers": [str(e) for e in explain.explainers], "num_rows": int(len(data.labels)),
            "groups": {label: {metric: compare_variants(
                {name: (rows[metric][0][keep], rows[metric][1][keep])
                 for name, rows in per_variant.items()}) for metric in metrics}
                for label, keep in selections.items()}}


def _cell(summary: Mapping[str, Any], name: str) -> str:
    entry = summary[name]
    return f"{entry['mean']:.2f}{'†' if entry['marked'] else ''}"


def comparison_tables(result: Mapping[str, Any]) -> str:
    """Markdown of :func:`agreement_comparison`: the Table 2 layout (variants x metrics, all
    rows) and, when grouped, the Table 4 layout (groups x variants, each metric)."""
    variants, metrics = result["variants"], result["metrics"]
    every = result["groups"]["all"]
    lines = ["| metric | " + " | ".join(variants) + " |", "|---|" + "---|" * len(variants)]
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
