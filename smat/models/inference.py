"""The one batched inference loop over tokenized data, and predictions.

Every model call over a data set goes through here: rows in batches of a fixed size (the
last one padded with copies of its first row, so one compiled shape serves all), each batch
cut to its longest row rounded up to a multiple (only padding columns go, so outputs over
real tokens are unchanged), and sharded over the device mesh when there is one
(:mod:`smat.parallel`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import numpy as np
from flax import nnx

from smat.data import Encoded, iterate_batches, padded_length
from smat.models import functional
from smat.parallel import resolve_mesh, shard_batch


def trim_to_length(batch: Encoded, multiple: int) -> Encoded:
    """Cut every (N, T) field to the batch's longest sequence, rounded up to `multiple`.

    Only padding columns are removed, so any model output over real tokens is unchanged.
    """
    length = padded_length(batch.attention_mask, multiple)
    return batch._replace(
        input_ids=batch.input_ids[:, :length],
        attention_mask=batch.attention_mask[:, :length],
        token_type_ids=batch.token_type_ids[:, :length],
        special_tokens_mask=batch.special_tokens_mask[:, :length],
    )


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _logits(graphdef, params, input_ids, attention_mask, token_type_ids):
    return functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids, attention="none").logits


def pad_rows(batch: NamedTuple, batch_size: int) -> NamedTuple:
    """`batch` with copies of its first row appended up to `batch_size` rows (fixed shapes)."""
    rows = len(batch[0])
    if rows >= batch_size:
        return batch
    pad = np.zeros(batch_size - rows, dtype=np.int64)
    return type(batch)(*(np.concatenate([f, f[pad]]) for f in batch))


def predict_logits(graphdef: nnx.GraphDef, params: nnx.State, data: Encoded, *,
                   batch_size: int = 64, length_multiple: int = 16,
                   mesh: jax.sharding.Mesh | None = None) -> np.ndarray:
    """Model outputs (N, C) for every row of `data`, in order, in eval mode (no dropout).

    The last batch is padded to `batch_size` with copies of its first row (then sliced
    away) so every call reuses the same compiled shapes. With a `mesh` (or an ambient one,
    see :func:`smat.parallel.resolve_mesh`) every batch is sharded over its devices, so
    `batch_size` must be a multiple of their number.
    """
    mesh = resolve_mesh(mesh)
    outputs = []
    for batch in iterate_batches(data, batch_size=batch_size, seed=0, epoch=0, shuffle=False):
        rows = batch.input_ids.shape[0]
        batch = trim_to_length(pad_rows(batch, batch_size), length_multiple)
        inputs = (batch.input_ids, batch.attention_mask, batch.token_type_ids)
        if mesh is not None:
            inputs = shard_batch(inputs, mesh)
        logits = _logits(graphdef, params, *inputs)
        outputs.append(np.asarray(logits)[:rows])
    return np.concatenate(outputs)


def predictions_from_logits(logits: np.ndarray, task: str) -> np.ndarray:
    """Class ids (argmax) for classification, the single output for regression."""
    return np.argmax(logits, axis=-1) if task == "classification" else logits[:, 0]
