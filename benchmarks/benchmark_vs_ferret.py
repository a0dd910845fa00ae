"""The whole explainer benchmark: ``smat benchmark`` vs ferret 0.4.2's ``Benchmark``, CPU.

Both sides explain the same sentences with the same model and the explainers they share,
then evaluate the explanations; the numbers of the measures they share are cross-checked on
the same explanation scores, and the wall time of each side's whole report is measured in
the same run.

- model: all-MiniLM-L6-v2 with smat's fixed random mean-pool head (``--smoke``: a 2-layer
  tiny random encoder), in JAX and in PyTorch with the same weights
  (``aopc_vs_ferret.classifiers``); smat reads it from a saved model folder, as ``smat
  benchmark --model`` does, ferret through ``aopc_vs_ferret.ferret_model``;
- sentences: the first ``--sentences`` (default 64, ``smat benchmark``'s rows) of the
  offline ``movie-snippets`` corpus's held-out test split (``aopc_vs_ferret.held_out_texts``),
  at most 64 tokens: the model folder records ``smat train-teacher``'s default max_len, 64,
  and smat pads every row to it (its batches are cut to their longest row; ``lime`` and
  ``kernel_shap`` draw their coalitions over each text's own tokens, as ferret does);
- explainers (:data:`SHARED`): smat ``gradient``, ``input_x_gradient``,
  ``integrated_gradients`` (50 steps, Captum's default, which ferret uses), ``lime`` and
  ``kernel_shap``; ferret ``Gradient``, ``Gradient (x Input)``, ``Integrated Gradient (x
  Input)``, ``LIME`` and ``Partition SHAP``. LIME's samples and SHAP's evaluations per text
  are set to smat's 200 coalitions (``--ferret-default-budgets``: ferret's own, min(L^2,
  5000) and 500), so both sides pay for the same number of perturbed inputs;
- ferret's report, per text: the predicted class (``Benchmark.score``, as its
  ``evaluate_samples`` does), ``Benchmark.explain`` (every explainer, L1-normalized) and
  ``Benchmark.evaluate_explanations`` with AOPC comprehensiveness and sufficiency (its
  measures that ``smat benchmark`` has), with the evaluation arguments aligned to ERASER's
  (below);
- smat's report: :func:`smat.jobs.benchmark.benchmark_report` from the texts, its every
  measure (comprehensiveness, sufficiency, randomization similarity, leakage, agreement,
  each with its 95% CI: a report ferret cannot produce), explanations included.

Definitional differences, found in ferret's source (``ferret/explainers/*.py``,
``ferret/evaluators/*.py``, ``ferret/benchmark.py``), and how the cross-checks align them:

Explanations (``explanations``, max abs difference of L1-normalized scores over every
token, [CLS] and [SEP] included; tolerance ``TOLERANCES["explanation"]``):

1. Gradient: ferret's is Captum ``Saliency`` (absolute gradient) summed over the embedding,
   the L1 norm; smat's ``gradient`` is the L2 norm (SMaT's "Gradient L2"). Aligned: smat's
   core ``baselines.saliency(reduction="l1")``.
2. Input x gradient: the same definition on both sides (summed over the embedding).
3. Integrated gradients: ferret's baseline is the word embeddings of [CLS] [PAD] ... [PAD]
   [SEP] (so [CLS] and [SEP] get 0), smat's ``integrated_gradients`` starts from zero
   embeddings; both Captum's 50-step Gauss-Legendre rule here (``smat benchmark``'s
   default is 20 steps). Aligned: ``baselines.integrated_gradients`` from
   ``baselines.token_baseline(token_id=PAD, keep=special tokens)``.
4. ``Benchmark.explain`` L1-normalizes each explanation over its tokens; smat's scores are
   raw. Every shared measure depends on the scores' order only, so this changes no
   number; smat's scores are L1-normalized before comparing them.
5. LIME: ferret runs the ``lime`` package's ``LimeTextExplainer`` over token ids (a removed
   token becomes [MASK], the text is decoded and tokenized again; exponential kernel of
   width 25 on the cosine distance; ridge regression; [CLS] and [SEP] set to 0); smat's
   ``lime`` zeroes the word embeddings of removed tokens and fits Captum's cosine kernel
   by weighted least squares. SHAP: ferret runs shap's ``Partition`` explainer (Owen
   values over a hierarchical clustering of the text, [MASK] for hidden tokens), smat's
   ``kernel_shap`` is KernelSHAP from zero embeddings. Different samplers and estimators:
   their explanations are not compared, their evaluations are (on ferret's scores).

Evaluation (``aopc``, ferret's own scores of every explainer evaluated by both sides: smat
reads them as explanations computed elsewhere, ``smat.store.explanation_file``):

6. Removal: ferret deletes tokens by default; both replace them by [MASK] here
   (``remove_tokens=False``).
7. Bins: ferret's are 10%, ..., 100% of the tokens, k = floor(q n), a bin with k = 0
   skipped; both use ERASER's 1, 5, 10, 20, 50% with k = max(1, ceil(q n)) here (ferret's
   ``based_on="k"`` with smat's k of each text).
8. Repeated bins: ferret drops a bin whose removal set equals the previous one's and
   averages the rest; ERASER (smat) averages every bin. Compared: smat's per-bin values
   averaged over each text's distinct k (``aopc_vs_ferret.distinct_bin_mean``).
9. Signs: ferret ranks only the tokens with a positive score (``only_pos=True``;
   ``only_pos=False`` raises under NumPy 2), so where fewer than k scores are positive it
   removes fewer than k tokens, and a text without a positive score gets its defaults,
   comprehensiveness 0 and sufficiency 1; smat ranks every token by its signed score.
10. Ties: ferret orders by NumPy's unstable argsort, smat breaks ties by position (shap's
    Partition explainer gives the tokens of one cluster equal scores).
    Aligned (9 and 10): ferret evaluates the same scores given as their ranks (n, ..., 1 in
    smat's order: positive and distinct), ``aligned``; its numbers on the raw scores are
    reported beside them (``native``), with the texts where signs cut a bin.
11. Re-tokenization: ferret decodes each perturbed input and tokenizes it again, smat edits
    the ids. Rows whose every perturbed input survives the round trip are compared to
    ``TOLERANCES["aopc"]``, all rows to ``TOLERANCES["aopc_all"]``.

Plausibility (``plausibility``, on the same ranks, with rationales):

12. The corpus has no human rationales: each text gets a synthetic one, a seeded span of a
    quarter of its words; only the agreement of the measures means something here.
13. Units: ferret scores sub-word tokens; ``smat plausibility`` scores words (a word's
    sub-word scores summed). Compared: smat's pure metrics on tokens.
14. Token F1: the same definition (the top k tokens, k = the mean rationale length,
    ferret's ``top_k_rationale``), per text; tolerance ``TOLERANCES["plausibility"]``.
15. Token IOU: ferret's is |top-k and rationale| / |top-k or rationale| of the tokens;
    smat's ``iou_f1`` is ERASER's span-level IOU F1. Compared: ferret's against the IOU of
    smat's ``token_f1`` counts, tp / (predicted + gold - tp).
16. AUPRC: ferret's integrates sklearn's precision-recall curve with the trapezoid rule
    (ERASER's), smat's ``average_precision`` is the step sum (sklearn's
    ``average_precision_score``): different numbers, both reported, no tolerance.

ferret's leave-one-out tau has no smat counterpart; smat's randomization similarity,
leakage and agreement have no ferret counterpart.

Timing (the same process, one side after the other): ferret after a warm-up on one text
(shap compiles its numba code on the first) and with torch's threads chosen as
``aopc_vs_ferret.fastest_torch_threads`` does, best of ``--repeats``; smat's first report
compiles every program (``ratio_including_compile``), the best of ``--repeats`` later ones
counts (``ratio`` = ferret seconds / smat seconds). Where smat's time goes:
``smat_seconds_by_phase`` (each explainer, then each evaluation, from the last report's
progress notes) and ``smat_seconds_by_explainer`` (compiling, running). smat's report does
more model work than ferret's for the same explainers: the randomization measure explains
every static explainer again on the re-initialised model (``smat_explain_run_seconds``:
the explainers' running time, compiling excluded). ``smat_shared_measures_seconds`` is
the part of the report that ferret's measures need (the explaining and faithfulness
phases); ferret's model work is ``ferret_model_calls`` and ``ferret_rows_x_columns``.

Prints a JSON summary and ``RESULT benchmark_vs_ferret <ratio>`` last; writes
benchmarks/results/benchmark_vs_ferret.json (``--smoke``: benchmark_vs_ferret_smoke.json).

Install (benchmark only): ``.venv/bin/pip install --no-deps ferret-xai==0.4.2`` and
``.venv/bin/pip install -c constraints.txt lime==0.2.0.1 shap==0.51.0`` (ferret's declared
dependencies, numpy<2 and shap<0.45 among them, conflict with smat's lock; the constraints
keep torch, numpy and the rest as locked). ``ferret/benchmark.py``
imports seaborn (table colours), OpenCV (an unused ``multiply``) and pytreebank (the SST
loader), none used here: :func:`ferret_benchmark_module` stands in for the missing ones.

Run (full: MiniLM, 64 sentences, one timed repeat of each side; 15 minutes alone on the 2
CPU cores)::

    .venv/bin/python benchmarks/benchmark_vs_ferret.py

``--smoke``: the tiny model, 8 sentences, one repeat, written to
benchmark_vs_ferret_smoke.json (3.0 to 4.6 minutes on the 2 cores while another job kept
them busy, load average 5 to 7: its timings mean nothing, its cross-checks are exact).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
from aopc_vs_ferret import (
    best_of,
    classifiers,
    distinct_bin_mean,
    fastest_torch_threads,
    ferret_evaluators,
    ferret_model,
    held_out_texts,
    machine,
    predict_proba,
    smat_aopc,
    survives_round_trip,
    torch_threads_restored,
)
from ig_vs_captum import progress
from jax.tree_util import Partial

import baselines
from smat.data import Encoded, token_word_ids
from smat.data.protocol import DataConfig
from smat.evaluation import DEFAULT_BINS, average_precision, num_tokens_per_bin, token_f1
from smat.jobs.benchmark import BenchmarkConfig, benchmark_report, benchmark_table
from smat.jobs.explain import ExplainConfig, explain_data
from smat.markdown import markdown_table
from smat.models import functional
from smat.models.inference import map_batches
from smat.store import model_store
from smat.store.run_log import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULT_PATH = ROOT / "benchmarks" / "results" / "benchmark_vs_ferret.json"
IG_STEPS = 50  # Captum's default, which ferret's IntegratedGradientExplainer uses
BUDGET = 200  # smat's lime / kernel_shap coalitions per row (registry.SURROGATE_SAMPLES)


class Shared(NamedTuple):
    """One explainer both sides have: smat's registry name and ferret's explainer NAME."""

    smat: str
    ferret: str


SHARED = (Shared("gradient", "Gradient"),
          Shared("input_x_gradient", "Gradient (x Input)"),
          Shared("integrated_gradients", "Integrated Gradient (x Input)"),
          Shared("lime", "LIME"),
          Shared("kernel_shap", "Partition SHAP"))
"""The shared explainers, in the order of every per-explainer array here."""

GRADIENTS = SHARED[:3]
"""The explainers whose scores are compared (the others sample differently)."""

TOLERANCES = {
    "explanation": 1e-4,  # L1-normalized scores, float32 on both sides
    "aopc": 1e-5,  # probabilities, rows whose perturbed inputs survive re-tokenization
    "aopc_all": 0.05,  # every row: ferret's re-tokenization may change a perturbed input
    "plausibility": 1e-6,  # token F1 and token IOU: ratios of the same counts
}
"""Largest absolute differences the cross-checks allow (the test asserts them)."""


# ------------------------------------------------------------------ ferret


def ferret_benchmark_module() -> types.ModuleType:
    """``ferret.benchmark`` (``Benchmark`` and the evaluators), imported without
    ``ferret/__init__.py`` (``aopc_vs_ferret.ferret_evaluators``).

    Its imports that this benchmark never calls (seaborn's palettes for table colours,
    OpenCV's ``multiply``, pytreebank for the SST loader) get empty stand-ins while it
    imports, where the package is missing.

    Raises:
      ModuleNotFoundError: ferret-xai, lime or shap is not installed.
    """
    ferret_evaluators()
    for needed in ("lime", "shap"):
        if importlib.util.find_spec(needed) is None:
            raise ModuleNotFoundError(f"{needed} is not installed: pip install -c constraints.txt "
                                      "lime==0.2.0.1 shap==0.51.0 (this file's docstring)")
    unused = {"cv2": {"multiply": None}, "pytreebank": {},
              "seaborn": {"diverging_palette": lambda *args, **kwargs: None,
                          "light_palette": lambda *args, **kwargs: None}}
    missing = [name for name in unused if importlib.util.find_spec(name) is None]
    for name in missing:
        sys.modules[name] = types.ModuleType(name)
        vars(sys.modules[name]).update(unused[name])
    try:
        return importlib.import_module("ferret.benchmark")
    finally:
        for name in missing:
            del sys.modules[name]


def _with_call_args(cls: type, call_args: dict) -> type:
    """ferret explainer `cls` whose every call passes ``call_args`` (``Benchmark.explain``
    passes none)."""

    class Configured(cls):
        def __call__(self, text, target=1, **explainer_args):
            return super().__call__(text, target, call_args=dict(call_args))

    Configured.__name__ = cls.__name__
    return Configured


def ferret_explainers(module, model, tokenizer, *, budget: int | None) -> list:
    """ferret's explainers of :data:`SHARED`, in its order; `budget`: LIME's samples and
    SHAP's evaluations per text (None: ferret's defaults)."""
    lime, shap = module.LIMEExplainer, module.SHAPExplainer
    if budget is not None:
        lime = _with_call_args(lime, {"num_samples": budget})
        shap = _with_call_args(shap, {"max_evals": budget})
    explainers = [module.GradientExplainer(model, tokenizer, multiply_by_inputs=False),
                  module.GradientExplainer(model, tokenizer, multiply_by_inputs=True),
                  module.IntegratedGradientExplainer(model, tokenizer, multiply_by_inputs=True),
                  lime(model, tokenizer), shap(model, tokenizer)]
    names = [e.NAME for e in explainers]
    if names != [s.ferret for s in SHARED]:
        raise RuntimeError(f"ferret's explainers are named {names}, not "
                           f"{[s.ferret for s in SHARED]}: another ferret version?")
    return explainers


def ferret_report(bench, texts, settings) -> tuple[list[int], list[list], list[list]]:
    """ferret's whole report, text by text: the predicted class, ``Benchmark.explain`` and
    ``Benchmark.evaluate_explanations`` (``settings``: each text's evaluation arguments).
    Returns the targets, explanations and evaluations (per text, per explainer)."""
    targets, explanations, evaluations = [], [], []
    for text, arguments in zip(texts, settings, strict=True):
        target = int(bench.score(text, return_dict=False).argmax(-1))
        explained = bench.explain(text, target, show_progress=False)
        evaluations.append(bench.evaluate_explanations(explained, target, show_progress=False,
                                                       **arguments))
        targets.append(target)
        explanations.append(explained)
    return targets, explanations, evaluations


def ferret_on_ranks(module, bench, explained, ranks, shown, targets, *, rationales, top_k,
                    settings) -> dict[str, np.ndarray]:
    """ferret's AOPC and plausibility measures of its own explanations (`explained`, per
    text, per explainer) given as their ranks in smat's order (`ranks`: explainer -> (N, T)
    of :func:`order_ranks`), against `rationales` (N, T) with its top-`top_k` tokens;
    (explainers, N) per evaluator's SHORT_NAME."""
    model, tokenizer = bench.model, bench.tokenizer
    evaluators = [getattr(module, name)(model, tokenizer) for name in (
        "AOPC_Comprehensiveness_Evaluation", "AOPC_Sufficiency_Evaluation",
        "Tokenf1_PlausibilityEvaluation", "TokenIOU_PlausibilityEvaluation",
        "AUPRC_PlausibilityEvaluation")]
    evaluator = module.Benchmark(model, tokenizer, explainers=bench.explainers,
                                 evaluators=evaluators)
    evaluated = []
    for i, per_explainer in enumerate(explained):
        as_ranks = [module.Explanation(e.text, e.tokens, np.r_[0.0, ranks[s.smat][i, shown[i]],
                                                                  0.0], e.explainer, e.target)
                    for s, e in zip(SHARED, per_explainer, strict=True)]
        evaluated.append(evaluator.evaluate_explanations(
            as_ranks, int(targets[i]), human_rationale=rationales[i, shown[i]].astype(int)
            .tolist(), show_progress=False, top_k_rationale=top_k, **settings[i]))
    return {e.SHORT_NAME: evaluation_scores(evaluated, e.SHORT_NAME) for e in evaluators}


def evaluation_scores(evaluations, name: str) -> np.ndarray:
    """(explainers, N) the score `name` (an evaluator's SHORT_NAME) of every explanation."""
    return np.array([[next(s.score for s in e.evaluation_scores if s.name == name)
                      for e in per_text] for per_text in evaluations], float).T


# ------------------------------------------------------------------ smat


def saved_model(model, tokenizer, folder: Path) -> model_store.TrainedModel:
    """The classifier saved as a model folder and loaded back, as ``smat benchmark
    --model`` reads it, with the max_len ``smat train-teacher`` records by default
    (``DataConfig.max_len``, 64 tokens; every row is padded to it)."""
    max_len = min(DataConfig().max_len, model.encoder.config.max_position_embeddings)
    return model_store.load(model_store.save(folder, model, tokenizer, max_len=max_len))


@functools.partial(jax.jit, static_argnames=("graphdef", "pad_id"))
def ferret_definitions(graphdef, params, input_ids, attention_mask, token_type_ids, special,
                       target, *, pad_id: int) -> dict[str, jax.Array]:
    """(B, T) scores of smat's cores under ferret's definitions of :data:`GRADIENTS`
    (module docstring, 1-3), attributing `target` (B,): the L1 norm of the gradient, input x
    gradient, and integrated gradients from [CLS] [PAD] ... [PAD] [SEP] (`special` (B, T)
    marks the tokens the baseline keeps)."""
    f, x, mask = baselines.attribution_inputs(graphdef, params, input_ids=input_ids,
                                              attention_mask=attention_mask,
                                              token_type_ids=token_type_ids)
    reference = baselines.token_baseline(graphdef, params, input_ids=input_ids,
                                         attention_mask=attention_mask, token_id=pad_id,
                                         token_type_ids=token_type_ids, keep=special)
    return {
        "gradient": baselines.saliency(f, x, mask, target=target, reduction="l1").saliency.scores,
        "input_x_gradient": baselines.input_x_gradient(f, x, mask, target=target).saliency.scores,
        "integrated_gradients": baselines.integrated_gradients(
            f, x, mask, baseline=reference, target=target, n_steps=IG_STEPS).saliency.scores}


def smat_ferret_definitions(trained, data: Encoded, targets: np.ndarray, *,
                            batch_size: int = 16) -> dict[str, np.ndarray]:
    """(N, T) :func:`ferret_definitions` of every row of `data`, in smat's batches."""
    graphdef, params = functional.split(trained.model)
    pad_id = trained.tokenizer.pad_token_id

    def batch(cut: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, jax.Array]:
        return ferret_definitions(graphdef, params, cut.input_ids, cut.attention_mask,
                                  cut.token_type_ids, cut.special_tokens_mask, targets[rows],
                                  pad_id=pad_id)

    return map_batches(batch, data, batch_size=batch_size, desc="ferret's definitions",
                       per_token=[s.smat for s in GRADIENTS])


def file_name(shared: Shared) -> str:
    """The name of ferret's scores of `shared` in the explanation file smat reads."""
    return f"ferret_{shared.smat}"


def write_explanation_file(path: Path, texts, explanations) -> Path:
    """ferret's explanations (per text, per explainer of :data:`SHARED`) as a file of
    explanations computed elsewhere (``smat.store.explanation_file``): the tokens and scores
    without [CLS] and [SEP]."""
    with path.open("w", encoding="utf-8") as out:
        for text, explained in zip(texts, explanations, strict=True):
            record = {"text": text, "tokens": explained[0].tokens[1:-1],
                      "scores": {file_name(s): [float(v) for v in e.scores[1:-1]]
                                 for s, e in zip(SHARED, explained, strict=True)}}
            out.write(json.dumps(record) + "\n")
    return path


def order_ranks(scores: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """(N, T) each shown token's place in smat's order, as a positive score: n for the
    highest of a row's n shown tokens down to 1 (ties by position, as
    ``smat.evaluation`` breaks them), 0 elsewhere."""
    ranks = np.zeros(scores.shape)
    for row, (values, keep) in enumerate(zip(scores, shown, strict=True)):
        positions = np.flatnonzero(keep)
        order = positions[np.argsort(-values[positions], kind="stable")]
        ranks[row, order] = np.arange(len(order), 0, -1)
    return ranks


def synthetic_rationales(word_ids: np.ndarray, shown: np.ndarray, *, seed: int = 0
                         ) -> np.ndarray:
    """(N, T) bool: for each row, the tokens of one seeded span of a quarter of its words (at
    least one), an ERASER-like rationale (the corpus has none)."""
    rng = np.random.default_rng(seed)
    gold = np.zeros(shown.shape, bool)
    for row, (ids, keep) in enumerate(zip(word_ids, shown, strict=True)):
        words = np.unique(ids[keep & (ids >= 0)])
        size = max(1, len(words) // 4)
        start = int(rng.integers(0, len(words) - size + 1))
        gold[row] = keep & np.isin(ids, words[start:start + size])
    return gold


def report_phases(notes: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds of each phase of a ``benchmark_report`` from its progress notes (time, note),
    the last one when it returned: each "explaining ..." and "evaluating ..." note to the
    next one or the return."""
    marks = [(t, note) for t, note in notes if note.startswith(("explaining", "evaluating"))]
    ends = [t for t, _ in marks[1:]] + [notes[-1][0]]
    return {note: round(end - t, 3) for (t, note), end in zip(marks, ends, strict=True)}


def timing_table(summary: dict) -> str:
    """Markdown: where each side's whole-report seconds go (a committed summary's timing)."""
    phases = summary["smat_seconds_by_phase (last run)"]

    def phase(prefix: str) -> float:
        return sum(t for name, t in phases.items() if name.startswith(prefix))

    shared = summary["smat_shared_measures_seconds (explaining and faithfulness phases)"]
    ferret = summary["ferret_seconds"]
    rows = [
        ("ferret: `Benchmark.explain` + `evaluate_explanations`, every text",
         f"{ferret:.0f}", "1.00"),
        ("smat: the whole `benchmark_report`", f"{summary['smat_seconds']:.0f}",
         f"{summary['ratio']:.2f}"),
        ("smat: explaining (the five explainers)", f"{phase('explaining'):.0f}", ""),
        *[(f"&nbsp;&nbsp;{name}", f"{seconds['run']:.0f}", "")
          for name, seconds in summary["smat_seconds_by_explainer"].items()],
        ("smat: comprehensiveness + sufficiency", f"{phase('evaluating faithfulness'):.0f}",
         ""),
        ("smat: the measures ferret has (explaining + faithfulness)", f"{shared:.0f}",
         f"{ferret / shared:.2f}"),
        ("smat: randomization similarity (every explainer again on the re-initialised "
         "model)", f"{phase('evaluating sanity'):.0f}", ""),
        ("smat: leakage + agreement",
         f"{phase('evaluating leakage') + phase('evaluating agreement'):.1f}", ""),
    ]
    return markdown_table(("part of the report", "seconds", "ferret / smat"), rows)


# ------------------------------------------------------------------ cross-checks


def _max(values: np.ndarray) -> float | None:
    return float(np.max(values)) if np.size(values) else None


def _l1_normalized(values: np.ndarray) -> np.ndarray:
    return values / np.abs(values).sum()


def explanation_agreement(ferret_explanations, aligned, default, attention_mask, shown
                          ) -> dict:
    """Per gradient explainer: ferret's scores against smat's under ferret's definitions
    (max abs difference, L1-normalized, every token) and against smat's own explainer of
    that name (mean Spearman over the shown tokens: the definitions' difference)."""
    from scipy.stats import spearmanr

    out = {}
    for j, shared in enumerate(GRADIENTS):
        diffs, rhos = [], []
        for i, explained in enumerate(ferret_explanations):
            real = attention_mask[i] != 0
            theirs = np.asarray(explained[j].scores, float)
            diffs.append(np.abs(_l1_normalized(aligned[shared.smat][i, real]) - theirs).max())
            keep = shown[i][real]
            rhos.append(spearmanr(theirs[keep], default[shared.smat][i, shown[i]])[0])
        out[shared.ferret] = {"max_abs_diff_l1_normalized": _max(np.array(diffs)),
                              f"mean_spearman_with_smat_{shared.smat}": float(np.mean(rhos))}
    return out


def aopc_agreement(smat_results, native, aligned, survives, capped) -> dict:
    """Per explainer: smat's AOPC of ferret's scores (over distinct bins) against ferret's,
    aligned (ranks) and native (raw scores)."""
    out = {}
    for j, shared in enumerate(SHARED):
        result = smat_results[shared.smat]
        ours = np.stack([distinct_bin_mean(result.comprehensiveness_per_bin,
                                           result.num_selected),
                         distinct_bin_mean(result.sufficiency_per_bin, result.num_selected)])
        diff = np.abs(ours - aligned[:, j])  # (2, N)
        exact = survives[j]
        out[shared.ferret] = {
            "rows_surviving_round_trip": int(exact.sum()),
            "max_abs_diff_comprehensiveness_round_trip": _max(diff[0][exact]),
            "max_abs_diff_sufficiency_round_trip": _max(diff[1][exact]),
            "max_abs_diff_all": _max(diff),
            "native_rows_where_signs_cut_a_bin": int(capped[j].sum()),
            "native_mean_abs_diff_all": float(np.abs(ours - native[:, j]).mean()),
            "native_max_abs_diff_uncut_round_trip": _max(
                np.abs(ours - native[:, j])[:, exact & ~capped[j]]),
            "smat_mean_comprehensiveness_distinct_bins": float(ours[0].mean()),
            "ferret_mean_comprehensiveness_aligned": float(aligned[0, j].mean()),
            "ferret_mean_comprehensiveness_native": float(native[0, j].mean()),
            "smat_mean_sufficiency_distinct_bins": float(ours[1].mean()),
            "ferret_mean_sufficiency_aligned": float(aligned[1, j].mean()),
            "ferret_mean_sufficiency_native": float(native[1, j].mean()),
            "smat_mean_comprehensiveness_eraser": float(result.mean_comprehensiveness),
            "smat_mean_sufficiency_eraser": float(result.mean_sufficiency)}
    return out


def plausibility_agreement(ranks, gold, shown, k: int, ferret_scores) -> dict:
    """Per explainer: smat's token F1, token IOU (from token F1's counts) and average
    precision of the ranks against ferret's token F1, token IOU and AUPRC of them."""
    out = {}
    for j, shared in enumerate(SHARED):
        scores = ranks[shared.smat]
        f1 = token_f1(scores, gold, shown, k=k)
        tp = np.asarray(f1.true_positives, float)
        iou = tp / (np.asarray(f1.num_predicted) + np.asarray(f1.num_gold) - tp)
        ap = np.asarray(average_precision(scores, gold, shown).values)
        out[shared.ferret] = {
            "max_abs_diff_token_f1": _max(np.abs(np.asarray(f1.f1) -
                                                 ferret_scores["token_f1_plau"][j])),
            "max_abs_diff_token_iou": _max(np.abs(iou - ferret_scores["token_iou_plau"][j])),
            "smat_mean_token_f1": float(np.mean(f1.f1)),
            "ferret_mean_token_f1": float(ferret_scores["token_f1_plau"][j].mean()),
            "smat_mean_average_precision_step": float(ap.mean()),
            "ferret_mean_auprc_trapezoid": float(ferret_scores["auprc_plau"][j].mean()),
            "max_abs_gap_auprc_vs_average_precision": _max(
                np.abs(ap - ferret_scores["auprc_plau"][j]))}
    return out


# ------------------------------------------------------------------ main


def run(*, smoke: bool, num_sentences: int, repeats: int, budget: int | None,
        output: Path) -> dict:
    """Time both reports and cross-check them; write and return the JSON summary (torch's
    number of threads is restored)."""
    with torch_threads_restored(), tempfile.TemporaryDirectory() as folder:
        return _run(smoke=smoke, num_sentences=num_sentences, repeats=repeats,
                    budget=budget, output=output, folder=Path(folder))


def _run(*, smoke, num_sentences, repeats, budget, output, folder) -> dict:
    load_before = os.getloadavg()
    module = ferret_benchmark_module()
    model, tokenizer, _, forward, hf = classifiers(smoke)
    trained = saved_model(model, tokenizer, folder / "model")
    texts = held_out_texts(num_sentences, tokenizer, trained.info["max_len"])
    data = model_store.encode_texts(trained, texts, job="benchmark")
    lengths = data.attention_mask.sum(1)
    shown = (data.attention_mask != 0) & ~data.special_tokens_mask
    ks = np.asarray(num_tokens_per_bin(shown.sum(1), bins=DEFAULT_BINS))  # (bins, N)

    # ferret: the shared explainers, AOPC with ERASER's k of each text and [MASK].
    torch_model = ferret_model(forward, hf)
    evaluators = [module.AOPC_Comprehensiveness_Evaluation(torch_model, tokenizer),
                  module.AOPC_Sufficiency_Evaluation(torch_model, tokenizer)]
    explainers = ferret_explainers(module, torch_model, tokenizer, budget=budget)
    bench = module.Benchmark(torch_model, tokenizer, explainers=explainers,
                             evaluators=evaluators)
    removal = [{"removal_args": {"remove_tokens": False, "based_on": "k",
                                 "thresholds": k.tolist()}} for k in ks.T]
    probe_rows = slice(0, min(4, len(texts)))
    warm_up = best_of(lambda: ferret_report(bench, texts[:1], removal[:1]), 1)[0]
    best_threads, probe = fastest_torch_threads(
        lambda: ferret_report(bench, texts[:1], removal[:1]),
        lambda: ferret_report(bench, texts[probe_rows], removal[probe_rows]))
    progress(f"ferret: warm-up {warm_up:.1f} s; first {len(texts[probe_rows])} texts by torch "
             f"threads {probe}")
    torch_model.calls.clear()
    ferret_seconds, (targets, explained, evaluated) = best_of(
        lambda: ferret_report(bench, texts, removal), repeats)
    ferret_calls = torch_model.calls[:len(torch_model.calls) // repeats]
    targets = np.asarray(targets)
    progress(f"ferret's report: {ferret_seconds:.1f} s")

    # smat: `smat benchmark`'s report of the same explainers on the same texts.
    config = BenchmarkConfig(explain=ExplainConfig(explainers=tuple(s.smat for s in SHARED),
                                                   ig_steps=IG_STEPS))

    phases: list[tuple[float, str]] = []

    def smat_report():
        phases.clear()
        out = benchmark_report(trained, model_store.encode_texts(trained, texts,
                                                                 job="benchmark"), config,
                               progress=lambda note: phases.append((time.perf_counter(), note)))
        phases.append((time.perf_counter(), "returned"))
        return out

    smat_first, report = best_of(smat_report, 1)
    progress(f"smat's report, first (compiling): {smat_first:.1f} s")
    smat_seconds, report = best_of(smat_report, repeats)
    phase_seconds = report_phases(phases)
    progress(f"smat's report: {smat_seconds:.1f} s")

    # Cross-checks, outside the timed regions. The gradient family's explanations: ferret's
    # against smat's cores under ferret's definitions, and against smat's own explainers.
    tokens_match = all(e[0].tokens == tokenizer.convert_ids_to_tokens(ids[:length].tolist())
                       for e, ids, length in zip(explained, data.input_ids, lengths,
                                                 strict=True))
    aligned_scores = smat_ferret_definitions(trained, data, targets)
    own = explain_data(trained, data, dataclasses.replace(
        config.explain, explainers=tuple(s.smat for s in GRADIENTS)))
    explanations = explanation_agreement(explained, aligned_scores, own.scores,
                                         data.attention_mask, shown)

    # The evaluation of ferret's own scores: smat reads them as explanations computed
    # elsewhere; ferret evaluates them again as ranks in smat's order (and rationales).
    path = write_explanation_file(folder / "ferret_explanations.jsonl", texts, explained)
    read = explain_data(trained, data, dataclasses.replace(config.explain,
                                                           explainers=(str(path),)))
    graphdef, params = functional.split(trained.model)
    setting = (config.explain.batch_size, config.explain.length_multiple)
    smat_results = {s.smat: smat_aopc(Partial(predict_proba(graphdef), params), texts,
                                      read.scores[file_name(s)], targets, tokenizer, setting)
                    for s in SHARED}
    ranks = {s.smat: order_ranks(read.scores[file_name(s)], shown) for s in SHARED}
    gold = synthetic_rationales(token_word_ids(texts, tokenizer, max_len=shown.shape[1]),
                                shown)
    k = max(1, round(float(gold.sum(1).mean())))
    ferret_aligned = ferret_on_ranks(module, bench, explained, ranks, shown, targets,
                                     rationales=gold, top_k=k, settings=removal)
    native = np.stack([evaluation_scores(evaluated, name)
                       for name in ("aopc_compr", "aopc_suff")])  # (2, E, N)
    n = shown.sum(1)
    survives = np.array([[survives_round_trip(tokenizer, data.input_ids[i, 1:1 + n[i]],
                                              ranks[s.smat][i, 1:1 + n[i]], ks[:, i])
                          for i in range(len(texts))] for s in SHARED])  # (E, N)
    positive = np.array([[(read.scores[file_name(s)][i, shown[i]] > 0).sum()
                          for i in range(len(texts))] for s in SHARED])
    aopc = aopc_agreement(smat_results, native, np.stack([ferret_aligned[name] for name in
                                                          ("aopc_compr", "aopc_suff")]),
                          survives, capped=positive < ks.max(0))
    plausibility = plausibility_agreement(ranks, gold, shown, k, ferret_aligned)

    ferret_means = {s.smat: {"comprehensiveness": float(native[0, j].mean()),
                             "sufficiency": float(native[1, j].mean())}
                    for j, s in enumerate(SHARED)}
    smat_means = {name: {measure: (cell or {}).get("mean") for measure, cell in r.items()
                         if measure != "seconds"} for name, r in report["explainers"].items()}
    explain_run = sum(r["seconds"]["run"] for r in report["explainers"].values())
    summary = {
        "benchmark": "benchmark_vs_ferret",
        "metric": "whole-report wall time ratio ferret / smat (explanations and evaluation "
                  "of every text)",
        "ratio": ferret_seconds / smat_seconds,
        "ratio_including_compile": ferret_seconds / smat_first,
        "ferret_seconds": ferret_seconds,
        "smat_seconds": smat_seconds,
        "smat_first_run_seconds (compile included)": smat_first,
        "smat_report_wall_seconds": report["wall_seconds"],
        "smat_explain_run_seconds": explain_run,
        "smat_seconds_by_explainer": {name: r["seconds"]
                                      for name, r in report["explainers"].items()},
        "smat_seconds_by_phase (last run)": phase_seconds,
        "smat_shared_measures_seconds (explaining and faithfulness phases)": sum(
            t for phase, t in phase_seconds.items()
            if phase.startswith(("explaining", "evaluating faithfulness"))),
        "ferret_model_calls": len(ferret_calls),
        "ferret_rows_x_columns": sum(rows * columns for rows, columns in ferret_calls),
        "ferret_warm_up_seconds (one text)": warm_up,
        "ferret_probe_seconds_by_torch_threads": probe,
        "ferret_best_torch_threads": best_threads,
        "explainers (smat: ferret)": {s.smat: s.ferret for s in SHARED},
        "ferret_report_means": ferret_means,
        "smat_report_means": smat_means,
        "smat_report_table": benchmark_table(report),
        "measures_only_smat_reports": [m for m in report["measures"]
                                       if m not in ("comprehensiveness", "sufficiency")],
        "cross_check": {
            "tokens_match": tokens_match,
            "predictions_match": int((np.asarray(read.predictions) == targets).sum()),
            "explanations": explanations,
            "aopc": aopc,
            "plausibility": plausibility,
            "plausibility_top_k": k,
            "tolerances": TOLERANCES,
        },
        "sentences": len(texts),
        "mean_tokens": float(lengths.mean()),
        "bins": list(DEFAULT_BINS),
        "ig_steps": IG_STEPS,
        "lime_shap_budget": budget if budget is not None else "ferret's defaults",
        "model": "tiny (random)" if smoke else "all-MiniLM-L6-v2 + random mean-pool head",
        "repeats": repeats,
        "smoke": smoke,
        **machine(load_before),
        "versions": {name: importlib.metadata.version(dist) for name, dist in (
            ("ferret", "ferret-xai"), ("lime", "lime"), ("shap", "shap"), ("captum", "captum"),
            ("torch", "torch"), ("jax", "jax"), ("transformers", "transformers"))},
        "jax_device": str(jax.devices()[0]),
    }
    write_json_atomic(output, summary)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=64, help="texts explained")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs of each report (smat's after its compiling first)")
    parser.add_argument("--ferret-default-budgets", action="store_true",
                        help=f"ferret's own LIME samples and SHAP evaluations per text "
                             f"instead of smat's {BUDGET}")
    parser.add_argument("--smoke", action="store_true",
                        help="the tiny random model on 8 texts, into the _smoke result file")
    parser.add_argument("--output", type=Path, help="the JSON summary (default: results/)")
    args = parser.parse_args()
    name = "benchmark_vs_ferret_smoke.json" if args.smoke else RESULT_PATH.name
    summary = run(smoke=args.smoke, num_sentences=8 if args.smoke else args.sentences,
                  repeats=args.repeats, budget=None if args.ferret_default_budgets else BUDGET,
                  output=args.output or RESULT_PATH.with_name(name))
    print(json.dumps(summary, indent=2))
    print(f"RESULT benchmark_vs_ferret {summary['ratio']:.2f}")


if __name__ == "__main__":
    main()
