"""Explain a trained smat model's predictions with any explainer, by name.

Names resolve in :mod:`smat.registry` (the static explainers of ``baselines`` and learned
explainers loaded from disk). Every explainer runs as one jitted call per batch; gradients
explain the predicted class.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx

from smat import registry
from smat.data import Encoded
from smat.models import functional
from smat.models.inference import (
    batch_logits,
    map_batches,
    predict_logits,
    predictions_from_logits,
)
from smat.parallel import gather_blocks, is_primary, process_block
from smat.store import model_store
from smat.store.explainer_store import load_explainer
from smat.store.explanation_file import file_texts, is_explanation_file, read_explanations
from smat.store.render import render_html
from smat.store.run_log import write_json_atomic


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExplainConfig:
    """Which explainers a command runs and how (``smat explain`` and the evaluation
    commands).

    Attributes:
      explainers: explainers to run, by name
      ig_steps: quadrature nodes of integrated gradients.
      batch_size: rows per jitted explainer call.
      length_multiple: batches (length-sorted) are cut to their longest row rounded up to a
        multiple of this many tokens: smaller pads less and compiles more shapes.
      num_examples: explain only the first N examples (None: all).
      precision: "float32" (as trained) or "bfloat16": the model is cast on loading and
        every explanation and evaluation computes in it (scores are returned as float32).
    """

    explainers: tuple[str, ...] = dataclasses.field(metadata={"names": registry.names_help})
    ig_steps: int = 50
    batch_size: int = 16
    length_multiple: int = 16
    num_examples: int | None = None
    precision: str = dataclasses.field(default="float32",
                                       metadata={"choices": functional.PRECISIONS})

    def __post_init__(self) -> None:
        registry.check_explainers(self.explainers, files=True)
        for name in ("ig_steps", "batch_size", "length_multiple"):
            if getattr(self, name) < 1:
                raise ValueError(f"ExplainConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.precision not in functional.PRECISIONS:
            raise ValueError(f"ExplainConfig.precision must be one of {functional.PRECISIONS}, "
                             f"got {self.precision!r}")
        if self.num_examples is not None and self.num_examples < 1:
            raise ValueError(f"ExplainConfig.num_examples must be >= 1, got "
                             f"{self.num_examples}")


class Explanations(NamedTuple):
    """Explanations of N examples by several explainers."""

    tokens: list[list[str]]  # N token lists (length T, padding included)
    scores: dict[str, np.ndarray]  # explainer name -> (N, T)
    show: np.ndarray  # (N, T) bool: real, non-special tokens
    predictions: np.ndarray  # (N,) predicted class ids (or values for regression)
    probabilities: np.ndarray  # (N,) the predicted class's probability (NaN: regression)


TARGETS = ("predicted", "gold")


def explain_encoded(graphdef, params, data: Encoded, explainers: Sequence[str | Path], *,
                    task: str, ig_steps: int = 50, batch_size: int = 16,
                    length_multiple: int = 16, mesh: jax.sharding.Mesh | None = None,
                    target: str = "predicted", ig_method: str = "gausslegendre",
                    num_rows: int | None = None,
                    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Scores (N, T) of each explainer, the model's predictions and the predicted class's
    probability (NaN for regression) on tokenized data: the one way smat explains a data
    set (``smat explain``, the evaluation reports, ROAR, the experiments).

    Examples run through :func:`smat.models.inference.map_batches`: length-sorted batches,
    each cut to its longest row rounded up to `length_multiple`, so explainers never run on
    columns that are padding in every row (the scores there are 0, as everywhere on
    padding). The seeded explainers draw from the rows' data-set indices; "random" and
    "smoothgrad", whose draws also depend on the width, run on the uncut batch, so no
    scores depend on the batching. With a `mesh` (or an ambient one, see
    :func:`smat.parallel.resolve_mesh`) every batch is sharded over its devices and
    `batch_size` must be a multiple of their number.

    Args:
      graphdef, params: the model (``smat.models.functional.split``).
      data: tokenized examples.
      explainers: registry names (:mod:`smat.registry`) or folders of saved learned
        explainers (``smat.load_explainer``); a learned one is named by its folder.
      task: "classification" or "regression".
      ig_steps: quadrature nodes of integrated gradients.
      batch_size: rows per jitted call.
      length_multiple: batches are cut to a multiple of this many columns.
      mesh: data parallelism over devices; None uses the ambient mesh, if any.
      target: the output the gradient explainers attribute: "predicted" (the model's
        class) or "gold" (``data.labels``, as ROAR does); regression explains its output.
      ig_method: the quadrature rule of integrated gradients.
      num_rows: the rows of the whole data set when `data` is only this process's block
        of them (:func:`smat.parallel.process_block`); every process gets all rows'
        scores.

    Raises:
      ValueError: an unknown explainer name or target, or a batch that does not divide over
        the mesh;
      FileNotFoundError: a missing explainer folder.
    """
    registry.check_explainers(explainers)
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
    learned_folders = [e for e in explainers if not registry.is_static(e)]
    model_config = (nnx.merge(graphdef, params).encoder.config if learned_folders else None)
    learned = {str(e): load_explainer(e, model_config=model_config) for e in learned_folders}

    def explain_batch(batch: Encoded, rows: np.ndarray, full: Encoded) -> dict[str, Any]:
        args = (graphdef, params, batch.input_ids, batch.attention_mask, batch.token_type_ids)
        outputs = {"logits": batch_logits(*args)}
        gold = None
        if target == "gold":
            gold = (np.asarray(batch.labels, np.int32) if task == "classification"
                    else np.zeros(len(rows), np.int32))
        for explainer in explainers:
            name = str(explainer)
            if name in learned:
                outputs[name] = registry.learned_scores(*args, learned[name].params,
                                                        explainer_config=learned[name].config)
                continue
            # every explainer sees the rows' data-set indices (row_ids); those whose random
            # draws depend on the width see the uncut rows, so that no score depends on
            # how the rows are batched
            source = full if registry.spec(name).full_width else batch
            outputs[name] = registry.static_scores(
                graphdef, params, source.input_ids, source.attention_mask,
                source.token_type_ids, gold, name=name, ig_steps=ig_steps,
                ig_method=ig_method, row_ids=rows)
        return outputs

    names = [str(e) for e in explainers]
    outputs = map_batches(explain_batch, data, batch_size=batch_size, desc="explain",
                          length_multiple=length_multiple, per_token=names, mesh=mesh,
                          num_rows=num_rows)
    scores = {name: outputs[name].astype(np.float32) for name in names}
    return (scores, *predictions_of(outputs["logits"], task))


def predictions_of(logits: np.ndarray, task: str) -> tuple[np.ndarray, np.ndarray]:
    """The predictions of (N, C) logits and the predicted class's probability (NaN for
    regression)."""
    if task != "classification":
        return predictions_from_logits(logits, task), np.full(len(logits), np.nan)
    wide = np.asarray(logits, np.float64)
    shifted = np.exp(wide - wide.max(axis=-1, keepdims=True))
    return (predictions_from_logits(logits, task),
            (shifted / shifted.sum(axis=-1, keepdims=True)).max(axis=-1))


def explain_texts(trained: model_store.TrainedModel, texts: Sequence[str],
                  explain: ExplainConfig) -> Explanations:
    """Tokenize `texts` at the model's length, predict them with a loaded model and explain
    each prediction (:func:`explain_data`). In a multi-process run each process tokenizes
    only its block of the texts (:func:`smat.parallel.process_block`) and the batches are
    assembled from every block.

    Raises:
      ValueError: no texts, or a model without a tokenizer (:func:`model_store.encode_texts`),
        and as :func:`explain_data`.
    """
    if jax.process_count() == 1:
        return explain_data(trained, model_store.encode_texts(trained, texts, job="explain"),
                            explain)
    block = process_block(len(texts))
    print(f"explain: process {jax.process_index()} tokenizes texts {block.start + 1}-"
          f"{block.stop} of {len(texts)}", file=sys.stderr, flush=True)
    return explain_data(trained, model_store.encode_texts(trained, texts, job="explain",
                                                          rows=block),
                        explain, num_rows=len(texts))


def explain_data(trained: model_store.TrainedModel, data: Encoded,
                 explain: ExplainConfig, *, num_rows: int | None = None) -> Explanations:
    """Predict tokenized `data` with a loaded model and explain each prediction with
    ``explain``'s explainers and settings (:func:`explain_encoded`); explainers that are
    files of explanations computed elsewhere are read (:mod:`smat.store.explanation_file`;
    the rows must then be the file's first texts). With `num_rows`, `data` is this
    process's block of `num_rows` rows (:func:`smat.parallel.process_block`); the
    explanations are of all of them.

    Raises:
      ValueError: the model is not in ``explain.precision`` (load it with
        ``model_store.load(path, precision=...)``), `data` has more rows than
        ``explain.num_examples`` (the commands select those rows; here the caller does), or
        a file's explanations are not of these rows or repeat a name.
    """
    graphdef, params = functional.split(trained.model)
    check_model_and_rows(params, num_rows or len(data.labels), explain)
    files = [str(e) for e in explain.explainers if is_explanation_file(e)]
    computed = [e for e in explain.explainers if str(e) not in files]
    options = dict(batch_size=explain.batch_size, length_multiple=explain.length_multiple,
                   num_rows=num_rows)
    if computed:
        scores, predictions, probabilities = explain_encoded(
            graphdef, params, data, computed, ig_steps=explain.ig_steps,
            task=trained.info["task"], **options)
    else:
        scores = {}
        predictions, probabilities = predictions_of(
            predict_logits(graphdef, params, data, **options), trained.info["task"])
    if num_rows is not None:
        data = gather_blocks(data, num_rows)  # every row, for the tokens and the files
    tokens = [trained.tokenizer.convert_ids_to_tokens(row.tolist()) for row in data.input_ids]
    show = (data.attention_mask != 0) & ~data.special_tokens_mask
    for path in files:
        check_file_rows(trained, data, path)
        given = read_explanations(path, data, tokens, shown=show).scores
        repeated = sorted(set(given) & set(scores))
        if repeated:
            raise ValueError(f"{path} names explainers {repeated} that are already explained "
                             "(by another file or by smat): rename them in the file")
        scores.update(given)
    return Explanations(tokens, scores, show, predictions, probabilities)


def check_file_rows(trained: model_store.TrainedModel, data: Encoded, path: str) -> None:
    """Raise unless the rows of `data` are the first texts of the explanation file `path`
    as the model tokenizes them."""
    texts = file_texts(path)[:len(data.input_ids)]
    own = model_store.encode_texts(trained, texts, job="explain")
    if own.input_ids.shape != data.input_ids.shape or not np.array_equal(own.input_ids,
                                                                          data.input_ids):
        raise ValueError(f"{path} explains other texts than the rows evaluated: its texts "
                         "are the rows (the commands read them from the file; do not give "
                         "--texts or --groups beside it)")


def require_classification(trained: model_store.TrainedModel, what: str) -> None:
    """Raise ValueError unless `trained` classifies: `what` needs a predicted class."""
    if trained.info["task"] != "classification":
        raise ValueError(f"{what} read a predicted class: the model is a "
                         f"{trained.info['task']} model")


def check_model_and_rows(params, num_rows: int, explain: ExplainConfig) -> None:
    """Raise unless `params` are in ``explain.precision`` and `num_rows` is within
    ``explain.num_examples``: nothing the config asks for is silently left undone."""
    precision = functional.precision_of(params)
    if precision != explain.precision:
        raise ValueError(f"the model is in {precision} but ExplainConfig.precision is "
                         f"{explain.precision!r}: load it with model_store.load(path, "
                         f"precision={explain.precision!r})")
    if explain.num_examples is not None and num_rows > explain.num_examples:
        raise ValueError(f"{num_rows} rows given but ExplainConfig.num_examples is "
                         f"{explain.num_examples}: select the rows first (e.g. "
                         "held_out_split(trained, num_examples=...))")


def write_explanations(explanations: Explanations, output_dir: str | Path, *,
                       texts: Sequence[str], label_names: Sequence[str] = (),
                       word_pieces: bool = False,
                       kinds: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """Write ``explanations.json`` and the side-by-side ``explanations.html`` (whole words,
    or the tokenizer's pieces with `word_pieces`); each record and caption carries the
    prediction and, for classification, its probability. Each explainer is drawn as its
    kind of scores says (`kinds`, by default :func:`smat.registry.score_kind` of its
    name). In a multi-process run process 0 alone writes (every process holds all rows:
    :func:`explain_encoded` gathers them); every process returns the paths."""
    output_dir = Path(output_dir)

    def label(prediction) -> str:
        if label_names and float(prediction).is_integer():
            return label_names[int(prediction)]
        return f"{float(prediction):.3f}"

    records = [{"text": text, "prediction": label(explanations.predictions[i]),
                **({} if np.isnan(explanations.probabilities[i]) else
                   {"probability": round(float(explanations.probabilities[i]), 4)}),
                "tokens": [t for t, s in zip(explanations.tokens[i], explanations.show[i],
                                             strict=True) if s],
                "scores": {name: [round(float(v), 6) for v in values[i][explanations.show[i]]]
                           for name, values in explanations.scores.items()}}
               for i, text in enumerate(texts)]
    if kinds is None:
        kinds = {name: registry.score_kind(name) for name in explanations.scores}
    if is_primary():  # every process of a multi-process run holds every row: one writes
        write_json_atomic(output_dir / "explanations.json", records)
        render_html(output_dir / "explanations.html", explanations.tokens,
                    explanations.scores, show=explanations.show, word_pieces=word_pieces,
                    kinds=kinds,
                    titles=[f"{r['text']}  (prediction: {r['prediction']}"
                            + (f", probability {r['probability']:.2f})" if "probability" in r
                               else ")") for r in records])
    return {"json": str(output_dir / "explanations.json"),
            "html": str(output_dir / "explanations.html")}
