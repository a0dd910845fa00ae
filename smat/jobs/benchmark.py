"""One report of every chosen explainer on every measure that applies (``smat benchmark``).

Each explainer explains the rows once, timed (its compiling, from JAX's own compile events,
apart from its running); every measure then reads those scores, so no explainer runs once
per measure. The measures are those of the single evaluation commands, computed by the
same functions on the same rows (a benchmark column equals the command's number):

* comprehensiveness (higher is better) and sufficiency (lower is better): ERASER AOPC,
  as ``smat faithfulness`` (:func:`smat.jobs.faithfulness.faithfulness_of_scores`);
* randomization similarity (lower is better): how much of an explanation survives
  re-initialising every encoder block, Spearman of absolute scores, as the last step of
  ``smat sanity --mode cascading`` (static explainers only);
* leakage (lower is better): how well a probe reads the predicted class from an
  explanation's positions and mass alone, as ``smat leakage``;
* agreement (no better direction): mean Spearman correlation with the other explainers, as
  ``smat agreement`` (one model);
* plausibility ROC-AUC and average precision (higher is better), when the rows are the
  documents of an ERASER-format folder with human rationales: word-level agreement with
  them, as ``smat plausibility``.

:data:`MEASURES` lists them by name, with their direction.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from smat import registry
from smat.compile_time import compile_seconds
from smat.data import Encoded
from smat.evaluation.agreement import agreement_matrix
from smat.evaluation.faithfulness import DEFAULT_BINS
from smat.evaluation.leakage import explanation_features, probe_accuracy
from smat.jobs.explain import ExplainConfig, explain_data, require_classification
from smat.jobs.faithfulness import faithfulness_of_scores
from smat.jobs.inputs import evaluation_rows, model_rows, rationale_rows
from smat.jobs.plausibility import RationaleWords, plausibility_of_scores, rationale_words
from smat.jobs.sanity import SanityConfig, sanity_report
from smat.parallel import is_primary
from smat.store import model_store
from smat.store.run_log import write_json_atomic

__all__ = ["EVALUATORS", "MEASURES", "BenchmarkConfig", "Explained", "Measure", "benchmark",
           "benchmark_csv", "benchmark_html", "benchmark_inputs", "benchmark_png",
           "benchmark_report", "benchmark_table", "best_per_measure", "write_benchmark"]

Scores = Mapping[str, np.ndarray]
Cell = dict[str, float] | None  # {"mean", and where the measure has one "low", "high"}


class Explained(NamedTuple):
    """What every measure reads: the model, its rows, each explainer's scores of them and
    the model's predicted classes."""

    trained: model_store.TrainedModel
    data: Encoded
    scores: Scores
    predictions: np.ndarray
    words: RationaleWords | None = None  # the rows' words and human rationales, if any


class Measure(NamedTuple):
    """A column of the benchmark: its direction ("higher", "lower", "zero": closer to 0,
    or "neither" is better), what it says, and the evaluator (:data:`EVALUATORS`) that
    computes it."""

    direction: str
    description: str
    evaluator: str


Evaluator = Callable[[Explained, "BenchmarkConfig"], dict[str, dict[str, Cell]]]
"""explainer -> measure -> cell (None where the measure does not apply)."""


def _faithfulness(inputs: Explained, config: BenchmarkConfig) -> dict[str, dict[str, Cell]]:
    report = faithfulness_of_scores(inputs.trained, inputs.data, inputs.scores,
                                    bins=config.bins, batch_size=config.explain.batch_size,
                                    length_multiple=config.explain.length_multiple)
    return {name: {measure: r[measure] for measure in ("comprehensiveness", "sufficiency")}
            for name, r in report["explainers"].items()}


def _randomization(inputs: Explained, config: BenchmarkConfig) -> dict[str, dict[str, Cell]]:
    result: dict[str, dict[str, Cell]] = {}
    for name in inputs.scores:
        if not registry.is_static(name):
            result[name] = {"randomization_similarity": None}
            continue
        # the trained model's explanations are the benchmark's own: only the model with
        # every block re-initialised is explained again
        explain = dataclasses.replace(config.explain, explainers=(name,))
        report = sanity_report(inputs.trained, inputs.data,
                               SanityConfig(mode="full", explain=explain),
                               trained_scores={name: inputs.scores[name]})
        result[name] = {"randomization_similarity":
                        report["explainers"][name]["spearman_abs"][-1]}
    return result


def _leakage(inputs: Explained, config: BenchmarkConfig) -> dict[str, dict[str, Cell]]:
    mask = np.asarray(inputs.data.attention_mask) != 0
    return {name: {"leakage": {"mean": probe_accuracy(explanation_features(
        values, mask[:, :values.shape[1]], bins=config.leakage_bins), inputs.predictions,
        folds=config.leakage_folds)["accuracy"]}} for name, values in inputs.scores.items()}


def _agreement(inputs: Explained, config: BenchmarkConfig) -> dict[str, dict[str, Cell]]:
    if len(inputs.scores) < 2:
        return {name: {"agreement": None} for name in inputs.scores}
    data = inputs.data
    mask = np.asarray(data.attention_mask) * ~np.asarray(data.special_tokens_mask)
    matrix = agreement_matrix(dict(inputs.scores), mask, metric="spearman").values
    others = ~np.eye(len(inputs.scores), dtype=bool)
    return {name: {"agreement": {"mean": float(np.nanmean(matrix[i][others[i]]))}}
            for i, name in enumerate(inputs.scores)}


PLAUSIBILITY = {"plausibility_auc": "roc_auc", "plausibility_ap": "average_precision"}


def _plausibility(inputs: Explained, config: BenchmarkConfig) -> dict[str, dict[str, Cell]]:
    # run only on rows with human rationales (BenchmarkConfig.applicable)
    report = plausibility_of_scores(inputs.scores, inputs.words)["explainers"]
    return {name: {measure: {"mean": report[name][key]} for measure, key in PLAUSIBILITY.items()}
            for name in inputs.scores}


EVALUATORS: dict[str, Evaluator] = {"faithfulness": _faithfulness,
                                    "sanity": _randomization,
                                    "leakage": _leakage,
                                    "agreement": _agreement,
                                    "plausibility": _plausibility}
"""Each evaluation the benchmark runs, once, for the measures it gives."""

MEASURES: dict[str, Measure] = {
    "comprehensiveness": Measure("higher", "ERASER AOPC: probability lost when the top "
                                 "tokens are masked", "faithfulness"),
    "sufficiency": Measure("lower", "ERASER AOPC: probability lost when only the top "
                           "tokens are kept", "faithfulness"),
    "randomization_similarity": Measure(
        "zero", "Spearman correlation of absolute scores between the trained model's "
        "explanation and that of the model with every block re-initialised (static "
        "explainers): 0 when the explanation depends on the trained weights alone; either "
        "sign means it keeps structure the weights do not give", "sanity"),
    "leakage": Measure("lower", "cross-validated accuracy of a probe reading the predicted "
                       "class from the explanation's positions and mass alone", "leakage"),
    "agreement": Measure("neither", "mean Spearman correlation with the other explainers",
                         "agreement"),
    "plausibility_auc": Measure("higher", "word-level ROC-AUC against the human rationales "
                                "(rows from --rationales)", "plausibility"),
    "plausibility_ap": Measure("higher", "word-level average precision against the human "
                               "rationales (rows from --rationales)", "plausibility"),
}
"""The benchmark's measures, in the report's column order."""


DEFAULT_EXPLAIN = ExplainConfig(
    explainers=("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
                "random"), num_examples=64, ig_steps=20)
"""The benchmark's explainers and rows when none are named: the gradient family, static
attention and the random baseline on the first 64 held-out rows (IG with 20 steps)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchmarkConfig:
    """Settings of a benchmark report (:func:`benchmark_report`).

    Attributes:
      measures: which of :data:`MEASURES` run (default: all).
      bins: comprehensiveness / sufficiency: the fractions of tokens removed or kept.
      leakage_bins: leakage: the probe's position bins.
      leakage_folds: leakage: the probe's cross-validation folds.
      rationales: an ERASER-format folder ({split}.jsonl and docs/): its documents are the
        rows, and the plausibility measures score the explanations against its human
        rationales (without it they do not apply).
      rationale_split: which split of the rationales folder.
      explain: which explainers run and how (ExplainConfig); learned explainers as their
        folders, explanations computed elsewhere as their files. Without flags: gradient,
        input_x_gradient, integrated_gradients (20 steps), attention_all and random on the
        first 64 rows (DEFAULT_EXPLAIN)
    """

    measures: tuple[str, ...] = dataclasses.field(
        default=tuple(MEASURES), metadata={"choices": tuple(MEASURES)})
    bins: tuple[float, ...] = DEFAULT_BINS
    leakage_bins: int = 8
    leakage_folds: int = 5
    rationales: str | None = dataclasses.field(default=None, metadata={"metavar": "FOLDER",
                                                                       "shown": "none"})
    rationale_split: str = dataclasses.field(default="test",
                                             metadata={"choices": ("train", "val", "test")})
    explain: ExplainConfig = dataclasses.field(
        default=DEFAULT_EXPLAIN, metadata={"base": lambda values: DEFAULT_EXPLAIN})

    def __post_init__(self) -> None:
        unknown = [m for m in self.measures if m not in MEASURES]
        if unknown or not self.measures:
            raise ValueError(f"--measures: unknown {unknown}; choose from {list(MEASURES)}")
        needs = [m for m in self.measures if MEASURES[m].evaluator == "plausibility"]
        if needs and self.rationales is None and self.measures != tuple(MEASURES):
            raise ValueError(f"--measures {' '.join(needs)} score explanations against human "
                             "rationales: give --rationales FOLDER (an ERASER-format folder)")

    def applicable(self, rationales: bool) -> tuple[str, ...]:
        """The measures that run: without rationales, all but the plausibility ones."""
        return tuple(m for m in self.measures
                     if rationales or MEASURES[m].evaluator != "plausibility")


def _timed_explanations(trained: model_store.TrainedModel, data: Encoded,
                        explain: ExplainConfig, progress: Callable[[str], None]):
    """Each explainer's scores of `data` and its seconds in one call: compiling (tracing,
    lowering and XLA compiling, :func:`smat.compile_time.compile_seconds`) and running (the
    rest of the call's wall time)."""
    scores: dict[str, np.ndarray] = {}
    seconds: dict[str, dict[str, float]] = {}
    predictions = None
    for explainer in explain.explainers:
        alone = dataclasses.replace(explain, explainers=(explainer,))
        progress(f"explaining with {explainer}")
        with compile_seconds() as compiling:
            start = time.perf_counter()
            explained = explain_data(trained, data, alone)
            wall = time.perf_counter() - start
            compiled = min(compiling(), wall)
        (name, values), = explained.scores.items()
        scores[name] = values
        seconds[name] = {"compile": round(compiled, 3), "run": round(wall - compiled, 3)}
        predictions = explained.predictions
    return scores, seconds, predictions


def benchmark_report(trained: model_store.TrainedModel, data: Encoded | RationaleWords,
                     config: BenchmarkConfig, *,
                     progress: Callable[[str], None] = lambda message: None
                     ) -> dict[str, Any]:
    """Every measure of `config` for every explainer, on the rows of `data` (tokenized rows,
    or documents with human rationales: :func:`smat.jobs.plausibility.rationale_words`).

    Returns:
      ``{"measures": {name: {"direction", "description"}}, "explainers": {name: {measure:
      {"mean", "low", "high"} or None (does not apply), "seconds": {"compile", "run"}}},
      "best": {measure: [explainers]}, "explainer_order", "num_examples", "settings",
      "wall_seconds"}``;
      the settings' "measures" and "explainer_order" keep the table's order (a JSON file
      sorts its keys).

    Raises:
      ValueError: a regression model (the measures read a predicted class), or as
        :func:`smat.jobs.explain.explain_data`.
    """
    require_classification(trained, "the benchmark's measures")
    began = time.perf_counter()
    words = data if isinstance(data, RationaleWords) else None
    data = data.encoded if words is not None else data
    scores, seconds, predictions = _timed_explanations(trained, data, config.explain, progress)
    inputs = Explained(trained, data, scores, np.asarray(predictions), words)
    explainers: dict[str, dict[str, Any]] = {name: {} for name in scores}
    measures = config.applicable(rationales=words is not None)
    evaluations = list(dict.fromkeys(MEASURES[m].evaluator for m in measures))
    for number, evaluator in enumerate(evaluations, 1):
        progress(f"evaluating {evaluator} ({number}/{len(evaluations)})")
        for name, cells in EVALUATORS[evaluator](inputs, config).items():
            chosen = {m: cell for m, cell in cells.items() if m in measures}
            explainers[name].update(chosen)
            progress(f"  {name}: " + ", ".join(
                f"{m} {'does not apply' if cell is None else format(cell['mean'], '.3f')}"
                for m, cell in chosen.items()))
    for name in explainers:
        explainers[name]["seconds"] = seconds[name]
    settings = {"measures": list(measures), "bins": list(config.bins),
                "leakage_bins": config.leakage_bins, "leakage_folds": config.leakage_folds,
                "rationales": config.rationales,
                "ig_steps": config.explain.ig_steps, "batch_size": config.explain.batch_size,
                "precision": config.explain.precision}
    report = {"measures": {m: {"direction": MEASURES[m].direction,
                               "description": MEASURES[m].description}
                           for m in measures},
              "explainers": explainers, "explainer_order": list(explainers),
              "num_examples": int(len(data.labels)),
              "settings": settings}
    report["best"] = best_per_measure(report)
    report["wall_seconds"] = round(time.perf_counter() - began, 1)
    return report


def best_per_measure(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per measure with a direction, the explainers whose mean is best (ties all)."""
    best = {}
    for measure, about in report["measures"].items():
        if about["direction"] == "neither":
            continue
        values = {name: r[measure]["mean"] for name, r in report["explainers"].items()
                  if r.get(measure) is not None and not math.isnan(r[measure]["mean"])}
        if values:
            distance = _DISTANCE[about["direction"]]
            target = min(distance(v) for v in values.values())
            best[measure] = [name for name, v in values.items() if distance(v) == target]
    return best


_ARROWS = {"higher": "↑", "lower": "↓", "zero": "→0", "neither": ""}
_DISTANCE: dict[str, Callable[[float], float]] = {
    "higher": lambda v: -v, "lower": lambda v: v, "zero": abs}
"""How far a value is from the best, by a measure's direction (smaller is better)."""


def _cell_text(cell: Cell) -> str:
    if cell is None:
        return "n/a"
    text = f"{cell['mean']:.3f}"
    if "low" in cell:
        text += f" [{cell['low']:.3f}, {cell['high']:.3f}]"
    return text


def _order(report: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The report's measures and explainers in the order they were asked for."""
    return report["settings"]["measures"], report["explainer_order"]


def _rows(report: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the table (best cells marked with *)."""
    measures, names = _order(report)
    header = (["explainer"] + [f"{m} {_ARROWS[report['measures'][m]['direction']]}".strip()
                               for m in measures] + ["compile s", "run s"])
    rows = []
    for name in names:
        r = report["explainers"][name]
        cells = [_cell_text(r[m]) + (" *" if name in report["best"].get(m, ()) else "")
                 for m in measures]
        rows.append([name, *cells, f"{r['seconds']['compile']:.2f}",
                     f"{r['seconds']['run']:.2f}"])
    return header, rows


def benchmark_table(report: Mapping[str, Any]) -> str:
    """Markdown: explainers x measures (mean [95% CI] where the measure has one), the best
    per measure starred, then each explainer's seconds."""
    header, rows = _rows(report)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines.append("")
    lines.append(f"{report['num_examples']} rows; ↑ higher is better, ↓ lower is better, "
                 "→0 closer to zero is better, "
                 "* the best of a column; n/a: the measure does not apply to the explainer. "
                 "Seconds: compiling, then running the compiled explainer over the rows.")
    if "wall_seconds" in report:
        lines.append(f"The whole report: {report['wall_seconds'] / 60:.1f} min.")
    return "\n".join(lines)


def _goodness(report: Mapping[str, Any], measure: str) -> dict[str, float]:
    """Per explainer, 0 (worst of the column) to 1 (best), by the measure's direction."""
    direction = report["measures"][measure]["direction"]
    values = {name: r[measure]["mean"] for name, r in report["explainers"].items()
              if r.get(measure) is not None and not math.isnan(r[measure]["mean"])}
    if direction == "neither" or not values:
        return {}
    distance = {name: _DISTANCE[direction](v) for name, v in values.items()}
    low, high = min(distance.values()), max(distance.values())
    span = (high - low) or 1.0
    return {name: (high - d) / span for name, d in distance.items()}


def benchmark_html(report: Mapping[str, Any]) -> str:
    """The table as a page: each measure's cells shaded from white (the column's worst) to
    green (its best) by the measure's direction; a legend says so."""
    header, rows = _rows(report)
    measures, names = _order(report)
    shades = {m: _goodness(report, m) for m in measures}
    head = "".join(f"<th title='{html.escape(report['measures'][m]['description'])}'>"
                   f"{html.escape(text)}</th>" if m else f"<th>{html.escape(text)}</th>"
                   for m, text in zip([None, *measures, None, None], header, strict=True))
    body = []
    for name, row in zip(names, rows, strict=True):
        cells = [f"<td>{html.escape(row[0])}</td>"]
        for measure, text in zip(measures, row[1:-2], strict=True):
            g = shades[measure].get(name)
            style = (f" style='background: rgba(46, 139, 87, {0.08 + 0.5 * g:.2f})'"
                     if g is not None else "")
            cells.append(f"<td{style}>{html.escape(text)}</td>")
        cells += [f"<td>{html.escape(text)}</td>" for text in row[-2:]]
        body.append("<tr>" + "".join(cells) + "</tr>")
    better = {"higher": "higher is better", "lower": "lower is better",
              "zero": "closer to zero is better", "neither": "no better direction: not shaded"}
    legend = "".join(f"<li><b>{html.escape(m)}</b> ({better[about['direction']]}): "
                     f"{html.escape(about['description'])}</li>"
                     for m, about in ((m, report["measures"][m]) for m in measures))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>smat benchmark</title>
<style>body {{ font-family: sans-serif; margin: 2em; }} table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; white-space: nowrap; }}
td:first-child, th:first-child {{ text-align: left; }} li {{ margin: 0.2em 0; }}</style>
</head><body><h1>smat benchmark</h1>
<p>{report['num_examples']} rows. Shade: from white (the column's worst) to green (its best),
by each measure's direction; * marks the best; n/a: the measure does not apply.</p>
<table><tr>{head}</tr>{''.join(body)}</table><ul>{legend}
<li><b>compile s, run s</b>: seconds to compile each explainer, then to run it over the
rows.</li></ul></body></html>
"""


def benchmark_csv(report: Mapping[str, Any]) -> str:
    """One row per explainer: each measure's mean, low and high, then the seconds."""
    out = io.StringIO()
    writer = csv.writer(out)
    measures, names = _order(report)
    writer.writerow(["explainer", *(f"{m}_{part}" for m in measures
                                    for part in ("mean", "low", "high")),
                     "compile_seconds", "run_seconds"])
    for name in names:
        r = report["explainers"][name]
        values = []
        for m in measures:
            cell = r.get(m) or {}
            values += [cell.get(part, "") for part in ("mean", "low", "high")]
        writer.writerow([name, *values, r["seconds"]["compile"], r["seconds"]["run"]])
    return out.getvalue()


def benchmark_png(report: Mapping[str, Any], path: str | Path) -> Path:
    """The table as an image, shaded as :func:`benchmark_html`."""
    from matplotlib.figure import Figure

    header, rows = _rows(report)
    measures, names = _order(report)
    colours = []
    for name in names:
        shades = [_goodness(report, m).get(name) for m in measures]
        colours.append(["white"] + [(0.18, 0.55, 0.34, 0.08 + 0.5 * g) if g is not None
                                    else "white" for g in shades] + ["white", "white"])
    figure = Figure(figsize=(1.0 + 1.6 * len(header), 0.6 + 0.35 * (len(rows) + 1)))
    axes = figure.add_subplot()
    axes.set_axis_off()
    table = axes.table(cellText=rows, colLabels=header, cellColours=colours, loc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.auto_set_column_width(list(range(len(header))))
    path = Path(path)
    figure.savefig(path, dpi=150, bbox_inches="tight")
    return path


def write_benchmark(report: Mapping[str, Any], output_dir: str | Path) -> dict[str, str]:
    """``benchmark.json``, ``.md``, ``.csv``, ``.html`` and ``.png`` in `output_dir` (by
    process 0 alone in a multi-process run); their paths, by kind."""
    output_dir = Path(output_dir)
    written = {kind: output_dir / f"benchmark.{kind}"
               for kind in ("json", "md", "csv", "html", "png")}
    if is_primary():
        output_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(written["json"], report)
        for kind, text in (("md", benchmark_table(report) + "\n"),
                           ("csv", benchmark_csv(report)), ("html", benchmark_html(report))):
            written[kind].write_text(text)
        benchmark_png(report, written["png"])
    return {kind: str(path) for kind, path in written.items()}


def benchmark_inputs(model: str | Path, texts: str | Sequence[str] | None,
                     config: BenchmarkConfig
                     ) -> tuple[model_store.TrainedModel, Encoded | RationaleWords]:
    """(the model of folder `model`, the rows its benchmark explains): the documents of
    ``config.rationales`` with their human rationales, else a texts file or list of texts
    (an explanations file among the explainers brings its own), else the model's held-out
    rows; the first ``config.explain.num_examples``.

    Raises:
      ValueError: texts together with rationales (which bring their own documents).
    """
    explain = config.explain
    if config.rationales is None:
        if texts is None or isinstance(texts, str | Path):
            return model_rows(model, texts, explain, explanation_files=True)
        trained = model_store.load(model, precision=explain.precision)
        return trained, evaluation_rows(trained, list(texts), explain.num_examples,
                                        folder=model)
    if texts is not None:
        raise ValueError("--rationales brings its own documents, the rows explained: leave "
                         "out --texts")
    rationales = rationale_rows(config.rationales, split=config.rationale_split,
                                num_examples=explain.num_examples)
    trained = model_store.load(model, precision=explain.precision)
    return trained, rationale_words(trained, rationales, max_len=None)


def benchmark(model: str | Path, *, explainers: Sequence[str] = DEFAULT_EXPLAIN.explainers,
              texts: Sequence[str] | None = None, measures: Sequence[str] = tuple(MEASURES),
              num_examples: int | None = DEFAULT_EXPLAIN.num_examples,
              rationales: str | Path | None = None, output_dir: str | Path | None = None,
              **explain_settings: Any) -> dict[str, Any]:
    """The benchmark of a saved model's explainers in one call (``smat.benchmark``).

    Args:
      model: a model folder (``smat train-teacher``'s ``model``).
      explainers: registry names, learned explainers' folders, or files of explanations.
      texts: the texts to explain (default: the model's held-out test rows).
      measures: which of :data:`MEASURES`.
      num_examples: the first N rows (None: all).
      rationales: an ERASER-format folder whose test documents are explained and whose
        human rationales the plausibility measures read (instead of `texts`).
      output_dir: if given, where :func:`write_benchmark` writes the report.
      **explain_settings: further :class:`smat.jobs.explain.ExplainConfig` fields
        (``ig_steps``, ``batch_size``, ...; default :data:`DEFAULT_EXPLAIN`'s).

    Returns:
      the report of :func:`benchmark_report`.
    """
    explain = dataclasses.replace(DEFAULT_EXPLAIN, explainers=tuple(map(str, explainers)),
                                  num_examples=num_examples, **explain_settings)
    config = BenchmarkConfig(measures=tuple(measures), explain=explain,
                             rationales=None if rationales is None else str(rationales))
    trained, data = benchmark_inputs(model, texts, config)
    report = benchmark_report(trained, data, config)
    if output_dir is not None:
        write_benchmark(report, output_dir)
    return report
