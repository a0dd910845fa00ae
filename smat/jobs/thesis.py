"""The Oxford thesis's evaluations of seven attribution methods on one trained model.

"Interpretability of Large Language Models" (Oxford MSc thesis, 2022) scores its seven
methods and a random baseline on the label-word task (:mod:`smat.jobs.label_word_task`):
(a) against the ground truth and by ERASER AOPC, (b) under layer randomization, (c) as
ensembles, (d) under the top-k attack. :func:`evaluate_model` runs all four with smat's
reports (:func:`smat.jobs.faithfulness.faithfulness_of_scores`,
:func:`smat.jobs.sanity.sanity_report`, :func:`smat.jobs.attacks.attack_report`,
:func:`smat.registry.ensemble_scores`), each stage a JSON file read back on a rerun;
:mod:`smat.jobs.thesis_report` judges the thesis's findings on its result.
``experiments/thesis_evaluations.py`` trains the models and runs it.

Ensembles (:data:`ENSEMBLES`) normalize each member's scores to sum to 1 over the real
tokens, then average (§3.4). Signed scores cannot sum to 1 as they are, so both of the
registry's normalizations are reported: absolute values first (``ensemble:``, ranking by
magnitude) and the row minimum subtracted (``ensemble_shift:``, keeping each member's signed
order). They are computed from the members' stored scores with the function behind those
registry names. Explanations run as ``smat explain`` runs them: length-sorted batches each
cut to its longest row, the seeded explainers seeded by the rows' indices.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from smat import registry
from smat.data import Encoded, take
from smat.evaluation import SyntheticTask, ground_truth_metrics
from smat.evaluation.attacks import ATTACKABLE
from smat.jobs.attacks import AttackConfig, attack_report
from smat.jobs.explain import ExplainConfig, explain_encoded
from smat.jobs.faithfulness import faithfulness_of_scores
from smat.jobs.label_word_task import encode_task
from smat.jobs.sanity import SanityConfig, plot_sanity, sanity_report
from smat.json_files import read_json
from smat.models import functional
from smat.models.inference import predict_logits
from smat.store import model_store
from smat.store.run_log import cached_arrays, settings_hash, write_json_atomic

METHODS = {"Gradients": "gradient", "Gradients*Input": "input_x_gradient",
           "Integrated Gradients": "integrated_gradients", "LIME": "lime",
           "KernelSHAP": "kernel_shap", "Average Attention": "attention_all",
           "Attention Rollout": "attention_rollout"}
"""The thesis's seven methods (§2.2.2) -> smat registry names."""
RANDOM = "random"
EXPLAINERS = (*METHODS.values(), RANDOM)
TOP3 = ("integrated_gradients", "lime", "kernel_shap")
ENSEMBLES = {f"Ensemble ({group}{', shift' if prefix == 'ensemble_shift' else ''})":
             f"{prefix}:" + "+".join(members)
             for prefix in registry.ENSEMBLES
             for group, members in (("All Methods", METHODS.values()), ("Top 3", TOP3))}
"""The thesis's two ensembles (§3.4) under both of the registry's normalizations: absolute
values (``ensemble:``) or the row minimum subtracted (``ensemble_shift:``)."""
SANITY_METHODS = ("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
                  "attention_rollout")
"""§4: the layer randomizations exclude Lime and KernelSHAP (they never read parameters)."""
ATTACKED = tuple(ATTACKABLE)  # gradient, input_x_gradient, integrated_gradients
OBJECTIVES = ("unconstrained", "constrained")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ThesisConfig:
    """How :func:`evaluate_model` evaluates one model (the sizes of a variant).

    Attributes:
      eval_rows: evaluated sentences, scored against the ground truth and by AOPC.
      sanity_rows: the first of them, explained under layer randomization.
      attack_rows: the first of them, attacked.
      max_len: tokens per row.
      ig_steps: Integrated Gradients' steps in the evaluations and randomizations.
      attack_steps: the steps of every attack.
      attack_ig_steps: Integrated Gradients' steps inside the attacks.
      attack_epsilons: the attacks' budgets (the first is the thesis's).
      sanity_modes: the layer randomizations ("cascading", "independent").
      batch_size: rows per batch of explanations and predictions.
      sanity_batch_size: rows per batch of the randomizations (each explains every
        randomized copy of its batch in one vmapped call, so its memory grows with the
        steps and IG's steps).
      attack_batch_size: rows per batch of the attacks.
    """

    eval_rows: int
    sanity_rows: int
    attack_rows: int
    max_len: int
    ig_steps: int
    attack_steps: int
    attack_ig_steps: int
    attack_epsilons: tuple[float, ...]
    sanity_modes: tuple[str, ...]
    batch_size: int
    sanity_batch_size: int
    attack_batch_size: int


def _stage(folder: Path, name: str, settings: dict[str, Any],
           compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A finished stage read back, or computed, timed and written atomically (the file name
    carries a hash of its settings, so changed settings never reuse a stale stage)."""
    path = folder / f"{name}-{settings_hash(settings)}.json"
    if path.is_file():
        return read_json(path)
    start = time.perf_counter()
    result = {**compute(), "settings": settings}
    result["seconds"] = round(time.perf_counter() - start, 1)
    write_json_atomic(path, result)
    return result


def explain_rows(trained: model_store.TrainedModel, data: Encoded, name: str, *,
                 ig_steps: int, batch_size: int) -> np.ndarray:
    """(N, T) scores of one registry explainer for the predicted class
    (:func:`smat.jobs.explain.explain_encoded`: length-sorted batches each cut to its
    longest row, seeded explainers seeded by the rows' indices)."""
    graphdef, params = functional.split(trained.model)
    scores, _, _ = explain_encoded(graphdef, params, data, [name], task=trained.info["task"],
                                   ig_steps=ig_steps, batch_size=batch_size)
    return scores[name]


def evaluate_model(trained: model_store.TrainedModel, task: SyntheticTask,
                   config: ThesisConfig, folder: Path) -> dict[str, Any]:
    """Every evaluation of one model trained on the label-word task, on `task`'s rows
    (:func:`smat.jobs.label_word_task.augmented_data`'s ``eval``); each stage resumable
    under `folder`, the explanations cached there once for all of them.

    Returns:
      ``{"eval_accuracy", "eval_tokens_mean", "ground_truth", "faithfulness", "sanity":
      {mode: report}, "attacks": {epsilon: {objective: report}}}``.

    Raises:
      ValueError: the model's classes are not the label words.
    """
    max_len, ig_steps, batch = config.max_len, config.ig_steps, config.batch_size
    data, gold, show = encode_task(trained, task, max_len=max_len)
    rows = {"rows": config.eval_rows, "max_len": max_len, "ig_steps": ig_steps}
    scores_dir = folder / f"scores-{settings_hash(rows)}"
    scores = {name: cached_arrays(scores_dir / f"{name}.npz", lambda name=name: {
        "scores": explain_rows(trained, data, name, ig_steps=ig_steps, batch_size=batch)})[
        "scores"] for name in EXPLAINERS}
    for name in ENSEMBLES.values():  # registry.spec(name) computes the same from the model
        prefix, _, members = name.partition(":")
        scores[name] = np.asarray(registry.ensemble_scores(
            [scores[m] for m in members.split("+")], data.attention_mask,
            normalization=registry.ENSEMBLES[prefix]), np.float32)
    graphdef, params = functional.split(trained.model)
    predictions = np.argmax(predict_logits(graphdef, params, data, batch_size=batch), axis=-1)
    ground_truth = _stage(folder, "ground_truth", rows,
                          lambda: {"explainers": ground_truth_metrics(scores, gold, show)})
    faithfulness = _stage(folder, "faithfulness", rows, lambda: faithfulness_of_scores(
        trained, data, scores, batch_size=batch))
    sanity = {}
    for mode in config.sanity_modes:
        explain = ExplainConfig(explainers=SANITY_METHODS, ig_steps=ig_steps,
                                batch_size=config.sanity_batch_size)
        subset = take(data, np.arange(config.sanity_rows))
        sanity[mode] = _stage(
            folder, f"sanity_{mode}", {**rows, "sanity_rows": config.sanity_rows},
            lambda mode=mode, explain=explain, subset=subset: sanity_report(
                trained, subset, SanityConfig(mode=mode, explain=explain)))
        # the thesis's Spearman rho of the signed scores, as in the table
        plot_sanity(sanity[mode], folder / f"sanity_{mode}.png", similarity="spearman")
    # the first epsilon is the thesis's; a further one sized to the model's embeddings
    by_epsilon: dict[str, dict[str, Any]] = {}
    subset = take(data, np.arange(config.attack_rows))
    for epsilon in config.attack_epsilons:
        reports = by_epsilon[f"{epsilon:g}"] = {}
        for objective in OBJECTIVES:
            settings = {"rows": config.attack_rows, "steps": config.attack_steps,
                        "ig_steps": config.attack_ig_steps, "max_len": max_len,
                        "epsilon": epsilon}
            attack = AttackConfig(objective=objective, epsilon=epsilon,
                                  steps=config.attack_steps,
                                  explain=ExplainConfig(explainers=ATTACKED,
                                                        ig_steps=config.attack_ig_steps,
                                                        batch_size=config.attack_batch_size))
            # the settings hash (epsilon included) tells the epsilons' files apart
            reports[objective] = _stage(folder, f"attack_{objective}", settings,
                                        lambda attack=attack: attack_report(
                                            trained, subset, attack))
    return {"eval_accuracy": float(np.mean(predictions == data.labels)),
            "eval_tokens_mean": float(show.sum(1).mean()),
            "ground_truth": ground_truth, "faithfulness": faithfulness, "sanity": sanity,
            "attacks": by_epsilon}
