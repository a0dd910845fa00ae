"""Model-randomization sanity checks of explainers (Adebayo et al., 2018; the Oxford thesis
§3.3): does an explanation change when the model it explains is destroyed?

Every step of a :func:`smat.models.randomize.randomized_family` (cascading or independent
re-initialisation of transformer blocks) explains the same rows in one vmapped call per
batch and explainer. Each step's explanation is compared with the trained model's (step 0)
per row, over its real non-special tokens: Spearman rho of the signed scores, Spearman rho
of their absolute values, and the top-k overlap; means with a bootstrap 95% CI over rows.
Every step explains the class the *trained* model predicts, so all steps attribute the same
output unit. A faithful explainer's similarity falls as blocks are randomized; one that
stays high reflects the input more than the model, *if the model changed*: each step also
reports how many predictions the randomized model keeps and how far the predicted class's
probability moves (a re-initialised late block of a residual network can leave the function
nearly as it was, and then a faithful explanation should stay too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from smat import registry
from smat.data import Encoded
from smat.evaluation.agreement import spearman_rho, top_k_overlap
from smat.evaluation.statistics import mean_with_ci
from smat.jobs.explain import ExplainConfig, check_model_and_rows
from smat.models import functional
from smat.models.inference import batch_logits, map_batches, predict_logits
from smat.models.randomize import MODES, RandomizedFamily, randomized_family
from smat.parallel import is_primary
from smat.store import model_store

SIMILARITIES = ("spearman", "spearman_abs", "top_k")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SanityConfig:
    """Settings of a randomization sanity check (:func:`sanity_report`).

    Attributes:
      mode: "cascading" (the last i blocks re-initialised at step i), "independent" (one
        block at a time) or "full" (every block at once: the cascade's last step alone).
      depth: cascading: how many blocks deep (None: all).
      blocks: independent: which blocks, 0-based (empty: all).
      head: also re-initialise the classification head at every randomized step.
      seed: seed of the fresh initialization.
      top_k: tokens compared by the top-k overlap.
      explain: which explainers run and how (ExplainConfig; static explainers only).
    """

    mode: str = dataclasses.field(default="cascading", metadata={"choices": MODES})
    depth: int | None = None
    blocks: tuple[int, ...] = ()
    head: bool = False
    seed: int = 0
    top_k: int = 5
    explain: ExplainConfig

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"SanityConfig.mode must be one of {MODES}, got {self.mode!r}")
        if self.top_k < 1:
            raise ValueError(f"SanityConfig.top_k must be >= 1, got {self.top_k}")
        learned = [str(e) for e in self.explain.explainers if not registry.is_static(e)]
        if learned:
            raise ValueError(f"sanity checks re-initialise the model a static explainer "
                             f"reads; {learned} are not static explainers (a learned "
                             "explainer's heads are fixed; a file's explanations cannot be "
                             "recomputed)")


def _family_scores(graphdef, family, ids, mask, types, target, *, name, ig_steps, row_ids):
    """(B, S, T) scores of every family member for the same batch and target."""

    def one(params):
        return registry.static_scores(graphdef, params, ids, mask, types, target, name=name,
                                      ig_steps=ig_steps, row_ids=row_ids)

    return jnp.moveaxis(jax.vmap(one)(family), 0, 1)


def family_explanations(trained: model_store.TrainedModel, data: Encoded, family: Any,
                        explain: ExplainConfig) -> dict[str, np.ndarray]:
    """(N, S, T) scores of every static explainer of `explain` under every parameter set of
    `family` (leaves stacked on a leading step axis), all explaining the class `trained`
    predicts; one vmapped call per batch and explainer.

    Raises:
      ValueError: as :func:`smat.jobs.explain.explain_data`.
    """
    graphdef, params = functional.split(trained.model)
    check_model_and_rows(params, len(data.labels), explain)
    names = [str(e) for e in explain.explainers]

    def explain_batch(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, Any]:
        # the trained model's class, once per batch (the cut columns are padding)
        target = jnp.argmax(batch_logits(graphdef, params, batch.input_ids,
                                         batch.attention_mask, batch.token_type_ids), axis=-1)
        outputs = {}
        for name in names:
            source = full if registry.spec(name).full_width else batch
            args = (source.input_ids, source.attention_mask, source.token_type_ids)
            outputs[name] = _family_scores(graphdef, family, *args, target, name=name,
                                           ig_steps=explain.ig_steps, row_ids=rows)
        return outputs

    return map_batches(explain_batch, data, batch_size=explain.batch_size,
                       length_multiple=explain.length_multiple, per_token=names)


def _model_change(trained: model_store.TrainedModel, data: Encoded,
                  family: RandomizedFamily, explain: ExplainConfig) -> dict[str, list[float]]:
    """Per family step: share of the trained model's predictions kept, and the mean absolute
    change of the predicted class's probability."""
    graphdef, _ = functional.split(trained.model)
    probs = [jax.nn.softmax(predict_logits(
        graphdef, jax.tree_util.tree_map(lambda leaf, s=step: leaf[s], family.params), data,
        batch_size=explain.batch_size, length_multiple=explain.length_multiple), axis=-1)
        for step in range(len(family.labels))]
    predicted = np.argmax(probs[0], axis=-1)
    rows = np.arange(len(predicted))
    return {"predictions_kept": [float(np.mean(np.argmax(p, -1) == predicted)) for p in probs],
            "probability_change": [float(np.mean(np.abs(p[rows, predicted]
                                                        - probs[0][rows, predicted])))
                                   for p in probs]}


def _step_scores(trained: model_store.TrainedModel, data: Encoded, family: RandomizedFamily,
                 explain: ExplainConfig, names: list[str],
                 trained_scores: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    """(N, steps, T) scores per explainer; step 0 (the trained model) from `trained_scores`
    when given, so that only the randomized steps are explained."""
    if trained_scores is None:
        return family_explanations(trained, data, family.params, explain)
    missing = sorted(set(names) - set(trained_scores))
    if missing:
        raise ValueError(f"trained_scores lacks the explainers {missing}")
    randomized = jax.tree_util.tree_map(lambda leaf: leaf[1:], family.params)
    rest = family_explanations(trained, data, randomized, explain)
    return {name: np.concatenate([np.asarray(trained_scores[name])[:, None], rest[name]],
                                 axis=1) for name in names}


def sanity_report(trained: model_store.TrainedModel, data: Encoded, config: SanityConfig,
                  *, plot_path: str | Path | None = None,
                  trained_scores: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Similarity of each randomized step's explanations to the trained model's.

    `trained_scores` (explainer -> (N, T) scores of the trained model on these rows, of the
    class it predicts, as :func:`smat.jobs.explain.explain_data` gives them) spares
    explaining the trained model again: only the randomized steps are explained.

    Returns:
      ``{"mode", "steps" (labels), "randomized" (S x L), "head", "seed", "top_k",
      "num_examples", "model": {"predictions_kept", "probability_change"} (per step: the
      share of rows whose predicted class is the trained model's, and the mean absolute
      change of that class's probability), "explainers": {name: {similarity: [{"mean",
      "low", "high", "num_valid"} per step]}}}``.

    Raises:
      ValueError: invalid settings (:func:`smat.models.randomize.randomized_family`).
    """
    family = randomized_family(trained.model, mode=config.mode, depth=config.depth,
                               blocks=config.blocks, head=config.head, seed=config.seed)
    names = [str(e) for e in config.explain.explainers]
    scores = _step_scores(trained, data, family, config.explain, names, trained_scores)
    show = (data.attention_mask != 0) & ~data.special_tokens_mask
    report: dict[str, Any] = {
        "mode": config.mode, "steps": list(family.labels),
        "randomized": family.randomized.astype(int).tolist(), "head": config.head,
        "seed": config.seed, "top_k": config.top_k, "num_examples": int(len(data.labels)),
        "model": _model_change(trained, data, family, config.explain),
        "explainers": {}}
    for name in names:
        original = scores[name][:, 0]
        curves: dict[str, list[dict[str, float]]] = {s: [] for s in SIMILARITIES}
        for step in range(len(family.labels)):
            current = scores[name][:, step]
            for similarity, per_row in (
                    ("spearman", spearman_rho(original, current, show)),
                    ("spearman_abs", spearman_rho(np.abs(original), np.abs(current), show)),
                    ("top_k", top_k_overlap(original, current, show, k=config.top_k))):
                values = np.asarray(per_row.values)[np.asarray(per_row.valid)]
                curves[similarity].append({**mean_with_ci(values),
                                           "num_valid": int(values.size)})
        report["explainers"][name] = curves
    if plot_path is not None and is_primary():  # one process of a multi-process run draws
        plot_sanity(report, plot_path)
    return report


def plot_sanity(report: dict[str, Any], path: str | Path, *,
                similarity: str = "spearman_abs"):
    """One curve per explainer: similarity to the trained model's explanation per step,
    with its bootstrap 95% CI as a band. Returns the ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1.5 + 0.8 * len(report["steps"]), 4))
    ax = fig.add_subplot()
    x = np.arange(len(report["steps"]))
    # sorted: a report read back from JSON (sorted keys) plots as the fresh one does
    for name, curves in sorted(report["explainers"].items()):
        points = curves[similarity]
        ax.plot(x, [p["mean"] for p in points], marker="o", label=name)
        ax.fill_between(x, [p["low"] for p in points], [p["high"] for p in points], alpha=0.2)
    ax.set_xticks(x, labels=report["steps"], rotation=30, ha="right")
    ax.set_ylabel(f"{similarity} vs the trained model")
    ax.set_title(f"{report['mode']} randomization")
    ax.axhline(0.0, color="grey", linewidth=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return fig


def sanity_table(report: dict[str, Any], *, similarity: str = "spearman_abs") -> str:
    """Markdown: explainers x steps, the mean similarity of each step, then the share of
    predictions each step keeps."""
    lines = ["| explainer | " + " | ".join(report["steps"]) + " |",
             "|---|" + "---|" * len(report["steps"])]
    lines += [f"| {name} | " + " | ".join(f"{p['mean']:.3f}" for p in curves[similarity])
              + " |" for name, curves in report["explainers"].items()]
    lines.append("| *predictions kept* | " + " | ".join(
        f"{v:.3f}" for v in report["model"]["predictions_kept"]) + " |")
    return "\n".join(lines)
