"""The agreement report behind ``smat agreement`` (Jukić et al.): pairwise Pearson /
Kendall tau-b / Spearman matrices between explainers (:mod:`smat.evaluation.agreement`),
aggregated over instances then seeds (several trained models), the mean over pairs, the
top-k overlap, and a one-sided Wilcoxon test per pair (agreement > 0) with Holm-Bonferroni;
by group too (e.g. data-cartography regions)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from smat.data import (
    Encoded,
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
from smat.evaluation.statistics import holm_bonferroni, wilcoxon_greater
from smat.jobs.explain import ExplainConfig, explain_data
from smat.jobs.inputs import ordered_groups
from smat.store import model_store
from smat.store.explanation_file import explainer_names, is_explanation_file


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


PER_INSTANCE = {"pearson": pearson_r, "kendall": kendall_tau_b, "spearman": spearman_rho}


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


def _format_p(p: float) -> str:
    return "< 1e-4" if p < 1e-4 else f"{p:.2g}"


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
