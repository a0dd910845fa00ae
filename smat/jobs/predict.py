"""Predictions of a loaded trained model on raw texts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from smat.models import functional
from smat.models.inference import predict_logits
from smat.store import model_store


def predict_texts(trained: model_store.TrainedModel, texts: Sequence[str], *,
                  batch_size: int = 64) -> list[dict[str, Any]]:
    """Label (or score) each text with a loaded text model.

    Args:
      trained: a model loaded with :func:`smat.store.model_store.load` (a folder written by
        `smat train-teacher`), as :func:`smat.jobs.explain.explain_texts` takes it.
      texts: the inputs; longer than the model's max_len are truncated with one warning.
      batch_size: rows per forward pass.

    Returns:
      One record per text: its text and, for classification, the predicted label name and
      class probabilities; for regression, the predicted value.

    Raises:
      ValueError: no texts, or a model without a tokenizer.
    """
    encoded = model_store.encode_texts(trained, texts, job="predict")
    graphdef, params = functional.split(trained.model)
    logits = predict_logits(graphdef, params, encoded, batch_size=batch_size)
    if trained.info["task"] == "regression":
        return [{"text": t, "prediction": float(v)} for t, v in zip(texts, logits[:, 0],
                                                                    strict=True)]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    names = trained.info.get("label_names") or [str(i) for i in range(logits.shape[1])]
    return [{"text": t, "label": names[int(np.argmax(p))],
             "probabilities": {n: round(float(q), 4) for n, q in zip(names, p, strict=True)}}
            for t, p in zip(texts, probs, strict=True)]
