"""Explain a trained smat model's predictions with any explainer, by name.

One explicit name -> computation mapping (no registry filled by imports): the static
explainers of ``baselines`` (Captum-equivalent gradients at the word embeddings, attention
baselines, rollout, a seeded random baseline) and learned explainers loaded from disk.
Every explainer runs as one jitted call per batch; gradients explain the predicted class.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import baselines
from smat import model_store
from smat.data import Encoded, length_sorted_batches, take, tokenize_texts
from smat.explainer_store import LoadedExplainer, load_explainer
from smat.models import functional
from smat.parallel import resolve_mesh, shard_batch
from smat.render import render_html
from smat.run_log import write_json_atomic
from smat.train import predict_logits, predictions_from_logits, trim_to_length

STATIC_EXPLAINERS = ("gradient", "input_x_gradient", "integrated_gradients", "attention_all",
                     "attention_last", "attention_rollout", "random")


@functools.partial(jax.jit, static_argnames=("graphdef", "name", "ig_steps", "ig_method"))
def static_scores(graphdef, params, input_ids, attention_mask, token_type_ids, target=None, *,
                  name: str, ig_steps: int = 50, ig_method: str = "gausslegendre",
                  seed: int = 0, row_ids: jax.Array | None = None) -> jax.Array:
    """(B, T) scores of the static explainer `name` on a batch (0 at padding).

    Gradient explainers attribute `target` (B,) (default: the predicted class) at the word
    embeddings: "gradient" is the L2 norm of the gradient per token (the SMaT paper's
    Gradient L2), "input_x_gradient" and "integrated_gradients" (zero baseline, `ig_method`
    quadrature) sum over the embedding dimension. Attention explainers use the query-mean-
    pooled attention logits (Eq. 11 with uniform head weights) or the attention rollout of
    the full logits. "random" draws row i of the batch from the key
    ``fold_in(PRNGKey(seed), row_ids[i])`` (default ``row_ids = 0..B-1``): with the rows'
    indices in the data set, its random scores do not depend on how it is cut into batches
    (the draws do depend on the batch's width T).

    Raises:
      ValueError: an unknown `name` (at trace time).
    """
    if name not in STATIC_EXPLAINERS:
        raise ValueError(f"unknown explainer {name!r}; choose from {STATIC_EXPLAINERS} or give "
                         "a saved learned explainer folder")
    mask = jnp.asarray(attention_mask) != 0
    if name == "random":
        rows = jnp.arange(mask.shape[0]) if row_ids is None else jnp.asarray(row_ids)
        keys = jax.vmap(lambda row: jax.random.fold_in(jax.random.PRNGKey(seed), row))(rows)
        return jax.vmap(lambda key, row: baselines.random_saliency(key, row[None]).scores[0])(
            keys, mask)
    if name.startswith("attention"):
        out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids,
                               attention="full" if name == "attention_rollout" else "pooled")
        if name == "attention_rollout":
            return baselines.attention_rollout(out.encoder.attention_logits, mask).scores
        pooled = out.encoder.pooled_attention_logits
        explain = (baselines.all_layers_attention if name == "attention_all"
                   else baselines.last_layer_attention)
        return explain(pooled, mask).scores
    f, x, mask = baselines.attribution_inputs(graphdef, params, input_ids=input_ids,
                                              attention_mask=attention_mask,
                                              token_type_ids=token_type_ids)
    if name == "gradient":
        return baselines.saliency(f, x, mask, target=target, reduction="l2").saliency.scores
    if name == "input_x_gradient":
        return baselines.input_x_gradient(f, x, mask, target=target).saliency.scores
    return baselines.integrated_gradients(f, x, mask, target=target, n_steps=ig_steps,
                                          method=ig_method).saliency.scores


@functools.partial(jax.jit, static_argnames=("graphdef", "explainer_config"))
def _learned_scores(graphdef, params, input_ids, attention_mask, token_type_ids,
                    explainer_params, *, explainer_config) -> jax.Array:
    out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, attention="pooled")
    explainer = LoadedExplainer(explainer_params, explainer_config)
    return explainer(out.encoder.pooled_attention_logits, attention_mask).scores


class Explanations(NamedTuple):
    """Explanations of N examples by several explainers."""

    tokens: list[list[str]]  # N token lists (length T, padding included)
    scores: dict[str, np.ndarray]  # explainer name -> (N, T)
    show: np.ndarray  # (N, T) bool: real, non-special tokens
    predictions: np.ndarray  # (N,) predicted class ids (or values for regression)


def explain_encoded(graphdef, params, data: Encoded, explainers: Sequence[str | Path], *,
                    task: str, ig_steps: int = 50, batch_size: int = 16,
                    length_multiple: int = 16, mesh: jax.sharding.Mesh | None = None
                    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Scores (N, T) of each explainer and the model's predictions on tokenized data.

    Examples run in length-sorted batches (:func:`smat.data.length_sorted_batches`), each
    cut to its longest row rounded up to `length_multiple`: explainers never run on columns
    that are padding in every row, and the scores there are 0 as everywhere on padding.
    "random" runs on the uncut batch with the rows' data-set indices, so its scores do not
    depend on the batching. The last batch is filled up to `batch_size` (then sliced), so
    each explainer compiles once per cut length. With a `mesh` (or an ambient one, see
    :func:`smat.parallel.resolve_mesh`) every batch is sharded over its devices and
    `batch_size` must be a multiple of their number.

    Args:
      graphdef, params: the model (``smat.models.functional.split``).
      data: tokenized examples.
      explainers: static explainer names (:data:`STATIC_EXPLAINERS`) or folders of saved
        learned explainers (``smat.load_explainer``); a learned one is named by its folder.
      task: "classification" or "regression".
      ig_steps: quadrature nodes of integrated gradients.
      batch_size: rows per jitted call.
      length_multiple: batches are cut to a multiple of this many columns.
      mesh: data parallelism over devices; None uses the ambient mesh, if any.

    Raises:
      ValueError: an unknown explainer name, or a batch that does not divide over the mesh;
      FileNotFoundError: a missing explainer folder.
    """
    learned = {str(e): load_explainer(e) for e in explainers if str(e) not in STATIC_EXPLAINERS}
    scores = {str(e): np.zeros(data.input_ids.shape, np.float32) for e in explainers}
    mesh = resolve_mesh(mesh)

    def model_inputs(batch: Encoded) -> tuple:
        inputs = (batch.input_ids, batch.attention_mask, batch.token_type_ids)
        return inputs if mesh is None else shard_batch(inputs, mesh)

    for rows, count in length_sorted_batches(data.attention_mask, batch_size=batch_size):
        full = take(data, rows)
        args = (graphdef, params, *model_inputs(trim_to_length(full, length_multiple)))
        for name, out in scores.items():
            if name in learned:
                value = _learned_scores(*args, learned[name].params,
                                        explainer_config=learned[name].config)
            elif name == "random":
                value = static_scores(graphdef, params, *model_inputs(full), name=name,
                                      row_ids=rows)
            else:
                value = static_scores(*args, name=name, ig_steps=ig_steps)
            value = np.asarray(value)[:count]
            out[rows[:count], :value.shape[1]] = value
    logits = predict_logits(graphdef, params, data, batch_size=batch_size,
                            length_multiple=length_multiple, mesh=mesh)
    return scores, predictions_from_logits(logits, task)


def explain_texts(model_dir: str | Path, texts: Sequence[str], explainers: Sequence[str | Path],
                  *, ig_steps: int = 50, batch_size: int = 16) -> Explanations:
    """Tokenize `texts`, predict them with the saved model and explain each prediction."""
    if not texts:
        raise ValueError("no texts to explain (the input is empty)")
    if not explainers:
        raise ValueError(f"name at least one explainer: {STATIC_EXPLAINERS} or a saved folder")
    trained = model_store.load(model_dir)
    data = tokenize_texts(list(texts), trained.tokenizer, max_len=trained.info["max_len"])
    return explain_data(trained, data, explainers, ig_steps=ig_steps, batch_size=batch_size)


def explain_data(trained: model_store.TrainedModel, data: Encoded,
                 explainers: Sequence[str | Path], *, ig_steps: int = 50,
                 batch_size: int = 16) -> Explanations:
    """Predict tokenized `data` with a loaded model and explain each prediction."""
    graphdef, params = functional.split(trained.model)
    scores, predictions = explain_encoded(graphdef, params, data, explainers,
                                          task=trained.info["task"], ig_steps=ig_steps,
                                          batch_size=batch_size)
    tokens = [trained.tokenizer.convert_ids_to_tokens(row.tolist()) for row in data.input_ids]
    show = (data.attention_mask != 0) & ~data.special_tokens_mask
    return Explanations(tokens, scores, show, predictions)


def write_explanations(explanations: Explanations, output_dir: str | Path, *,
                       texts: Sequence[str], label_names: Sequence[str] = ()) -> dict[str, Any]:
    """Write ``explanations.json`` and the side-by-side ``explanations.html``."""
    output_dir = Path(output_dir)

    def label(prediction) -> str:
        if label_names and float(prediction).is_integer():
            return label_names[int(prediction)]
        return f"{float(prediction):.3f}"

    records = [{"text": text, "prediction": label(explanations.predictions[i]),
                "tokens": [t for t, s in zip(explanations.tokens[i], explanations.show[i],
                                             strict=True) if s],
                "scores": {name: [round(float(v), 6) for v in values[i][explanations.show[i]]]
                           for name, values in explanations.scores.items()}}
               for i, text in enumerate(texts)]
    write_json_atomic(output_dir / "explanations.json", records)
    render_html(output_dir / "explanations.html", explanations.tokens, explanations.scores,
                show=explanations.show,
                titles=[f"{r['text']}  (prediction: {r['prediction']})" for r in records])
    return {"json": str(output_dir / "explanations.json"),
            "html": str(output_dir / "explanations.html")}
