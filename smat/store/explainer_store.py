"""Learned explainers on disk, and back as pure functions for any model.

A saved SMaT explainer is its head coefficients phi (orbax) plus its
:class:`~smat.explainers.AttentionExplainerConfig` (JSON). :func:`load_explainer` returns a
:class:`LoadedExplainer`: call it on query-pooled attention rows (L, B, H, T) and a mask —
from a smat model (``EncoderOutput.pooled_attention_logits``) or from a user's own Flax model
through :func:`smat.explainers.attention.pool_attention` on its attention logits or
(log-)probabilities. Nothing of smat's models or trainer is needed to use it.

Example:
  >>> explainer = smat.load_explainer("runs/demo/students/smat-seed0/explainer")  # doctest: +SKIP
  >>> pooled = pool_attention(my_attention_probs, mask, kind="probs")             # doctest: +SKIP
  >>> saliency = explainer(pooled, mask)                                          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.typing import ArrayLike

from smat.explainers import (
    AttentionExplainerConfig,
    AttentionExplainerParams,
    Saliency,
    head_weights,
)
from smat.explainers import apply as apply_attention_explainer
from smat.json_files import read_json, recorded_dataclass
from smat.store import checkpoint
from smat.store.run_log import write_json_atomic


class LoadedExplainer(NamedTuple):
    """A learned attention explainer: parameters + static config, callable as a pure function.

    Calling it, ``explainer(pooled (L, B, H, T), mask (B, T)) -> Saliency``, is
    ``smat.explainers.apply(params, pooled, mask, config=config)`` (paper Eq. 11); it is
    jit-able and differentiable in ``params`` when called through that function.
    """

    params: AttentionExplainerParams
    config: AttentionExplainerConfig

    def __call__(self, pooled: ArrayLike, mask: ArrayLike) -> Saliency:
        return apply_attention_explainer(self.params, pooled, mask, config=self.config)

    def head_weights(self) -> np.ndarray:
        """lambda = NORMALIZE(phi) as a (layers, heads) array (paper Fig. 5)."""
        return np.asarray(head_weights(self.params, config=self.config))


def save_explainer(path: str | Path, params: AttentionExplainerParams,
                   config: AttentionExplainerConfig) -> Path:
    """Write head coefficients (orbax) and config (JSON) to the folder `path`."""
    path = Path(path)
    checkpoint.save(path / "params", {"phi": params.phi}, overwrite=True,
                    metadata={"format": "smat.attention_explainer"})
    write_json_atomic(path / "config.json", dataclasses.asdict(config))
    return path


def load_explainer(path: str | Path, *, model_config: Any = None) -> LoadedExplainer:
    """Load a learned explainer written by :func:`save_explainer` (e.g. by `smat train-student`).

    Args:
      path: the explainer's folder.
      model_config: the encoder config (``num_layers``, ``num_heads``) of a smat model the
        explainer is about to explain; a model with other heads than the ones it weighs is
        refused here, naming both, before any work.

    Raises:
      FileNotFoundError: `path` holds no saved explainer.
      ValueError: the stored coefficients do not fit the stored config, or the explainer
        does not fit `model_config`.
    """
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} holds no saved explainer (no config.json); save one with "
                                "smat.store.explainer_store.save_explainer or `smat train-student`")
    config = recorded_dataclass(AttentionExplainerConfig, read_json(path / "config.json"),
                                source=path / "config.json")
    if model_config is not None and (config.num_layers, config.num_heads) != (
            model_config.num_layers, model_config.num_heads):
        raise ValueError(f"the learned explainer {path} weighs the attention heads of a model "
                         f"with {config.num_layers} layers x {config.num_heads} heads; this "
                         f"model has {model_config.num_layers} x {model_config.num_heads}: "
                         "explain it with an explainer learned for it")
    target = {"phi": jax.ShapeDtypeStruct((config.num_coefficients,), np.float32)}
    restored, _ = checkpoint.restore(path / "params", target=target)
    return LoadedExplainer(AttentionExplainerParams(phi=restored["phi"]), config)
