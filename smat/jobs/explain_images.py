"""Explain a trained ViT's predictions on images, one score per patch (``smat explain`` on
an image model).

The static explainers run through :func:`smat.registry.static_patch_scores` (gradients and
perturbations at the patch embeddings, attention over the patches), learned explainers
through :func:`smat.registry.learned_patch_scores`. Images go in the fixed-size batches of
:func:`smat.data.length_sorted_batches` (the last repeats its first image), so each
explainer compiles one program.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from smat import registry
from smat.data import ImageDataset, length_sorted_batches
from smat.jobs.explain import ExplainConfig, check_model_and_rows, predictions_of
from smat.models import functional
from smat.store import model_store
from smat.store.explainer_store import load_explainer
from smat.store.explanation_file import is_explanation_file
from smat.store.render import plot_patch_saliency, render_image_html
from smat.store.run_log import write_json_atomic
from smat.store.run_record import model_input_layout


class ImageExplanations(NamedTuple):
    """Explanations of N images by several explainers."""

    scores: dict[str, np.ndarray]  # explainer name -> (N, patches), row-major patch order
    predictions: np.ndarray  # (N,) predicted class ids (or values for regression)
    probabilities: np.ndarray  # (N,) the predicted class's probability (NaN: regression)


@functools.partial(jax.jit, static_argnames=("graphdef",))
def image_logits(graphdef, params, pixel_values) -> jax.Array:
    """The model's outputs (B, C) on (B, C, H, W) images, in eval mode."""
    return functional.apply(graphdef, params, pixel_values=pixel_values,
                            attention="none").logits


def model_pixels(trained: model_store.TrainedModel, images: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) images in [0, 1] as the model reads them: (N, 3, S, S) at its image
    size, normalised with the mean and deviation its model.json records (ImageNet's when
    it records none)."""
    return model_input_layout(trained.model, trained.tokenizer, trained.info).pixels(images)


def explain_images(trained: model_store.TrainedModel, images: np.ndarray,
                   explain: ExplainConfig) -> ImageExplanations:
    """Predict (N, H, W, 3) images in [0, 1] with a loaded ViT and explain each prediction
    with ``explain``'s explainers (gradients explain the predicted class).

    Raises:
      ValueError: a text model, no images, an explainer that does not explain patches or a
        file of explanations (text only), and as :func:`smat.jobs.explain.check_model_and_rows`.
    """
    if trained.info.get("encoder") != "vit":
        raise ValueError("explain_images needs an image (ViT) model; this one is "
                         f"{trained.info.get('encoder')!r}: explain texts instead")
    if len(images) == 0:
        raise ValueError("no images to explain")
    files = [str(e) for e in explain.explainers if is_explanation_file(e)]
    if files:
        raise ValueError(f"{files}: files of explanations are read for text models only")
    graphdef, params = functional.split(trained.model)
    check_model_and_rows(params, len(images), explain)
    registry.check_image_explainers(explain.explainers)
    static = [str(e) for e in explain.explainers if registry.is_static(e)]
    learned = {str(e): load_explainer(e, model_config=trained.model.encoder.config)
               for e in explain.explainers if not registry.is_static(e)}
    pixels = model_pixels(trained, images)
    outputs: dict[str, list[np.ndarray]] = {"logits": []}
    # every image has the same length, so these are the images in order, in batches of
    # batch_size whose last one repeats its first image: one compiled shape
    for padded, count in length_sorted_batches(np.ones((len(pixels), 1)),
                                               batch_size=explain.batch_size):
        batch = pixels[padded]
        values = {"logits": image_logits(graphdef, params, batch)}
        for name in static:
            values[name] = registry.static_patch_scores(
                graphdef, params, batch, name=registry.canonical(name),
                ig_steps=explain.ig_steps, row_ids=padded)
        for name, loaded in learned.items():
            values[name] = registry.learned_patch_scores(
                graphdef, params, batch, loaded.params, explainer_config=loaded.config)
        for name, value in jax.device_get(values).items():
            outputs.setdefault(name, []).append(np.asarray(value)[:count])
    joined = {name: np.concatenate(parts) for name, parts in outputs.items()}
    predictions, probabilities = predictions_of(joined.pop("logits"), trained.info["task"])
    return ImageExplanations({name: joined[name].astype(np.float32)
                              for name in map(str, explain.explainers)},
                             predictions, probabilities)


PNG_GRID_IMAGES = 16
"""Images the PNG grid shows (the first ones): a grid of a whole data set would be a figure
hundreds of inches tall (240 images took 11 s to lay out and 11 s to save); the JSON and
the HTML page hold every image."""


def write_image_explanations(explanations: ImageExplanations, data: ImageDataset,
                             output_dir: str | Path, *,
                             label_names: Sequence[str] = ()) -> dict[str, Any]:
    """Write ``explanations.json`` (per image: its label, the prediction and each
    explainer's patch scores), the page ``explanations.html`` (each explainer's patch
    saliency over the image) and the PNG grid ``explanations.png`` of the first
    :data:`PNG_GRID_IMAGES` images."""
    output_dir = Path(output_dir)

    def name_of(value) -> str:
        if label_names and float(value).is_integer() and int(value) < len(label_names):
            return label_names[int(value)]
        return f"{float(value):.3f}"

    records = []
    for i in range(len(data)):
        label = data.label_names[data.labels[i]] if data.label_names else int(data.labels[i])
        record = {"image": i, "label": label,
                  "prediction": name_of(explanations.predictions[i])}
        if not np.isnan(explanations.probabilities[i]):
            record["probability"] = round(float(explanations.probabilities[i]), 4)
        record["scores"] = {name: [round(float(v), 6) for v in values[i]]
                            for name, values in explanations.scores.items()}
        records.append(record)
    titles = [f"image {r['image']}: label {r['label']}, prediction {r['prediction']}"
              + (f" ({r['probability']:.2f})" if "probability" in r else "")
              for r in records]
    write_json_atomic(output_dir / "explanations.json", records)
    kinds = {name: registry.score_kind(name) for name in explanations.scores}
    render_image_html(output_dir / "explanations.html", data.images, explanations.scores,
                      titles=titles, kinds=kinds)
    shown = slice(PNG_GRID_IMAGES)
    plot_patch_saliency(data.images[shown],
                        {name: values[shown] for name, values in explanations.scores.items()},
                        output_dir / "explanations.png", kinds=kinds,
                        titles=[f"{r['label']} -> {r['prediction']}" for r in records[shown]])
    return {"json": str(output_dir / "explanations.json"),
            "html": str(output_dir / "explanations.html"),
            "png": str(output_dir / "explanations.png")}
