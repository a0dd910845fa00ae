"""Model-parameter randomization for sanity checks (Adebayo et al., 2018; the Oxford thesis
§2.2.3.3 and §3.3): transformer blocks (self-attention + MLP, as one unit) re-initialised with
the model's own initializers, as one stacked family of parameter sets.

- *cascading*: step i re-initialises the last i blocks (step 0 is the trained model, step L
  the whole encoder stack);
- *independent*: step 0 is the trained model, step j (1-based) re-initialises block j - 1
  alone.

The embeddings are never re-initialised; ``head=True`` re-initialises the classification head
(and the scalar mix) in every step but 0. The family has a leading step axis on every leaf,
so ``jax.vmap`` over it explains every step in one compiled call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from smat.models import functional
from smat.models.heads import SequenceClassifier

MODES = ("cascading", "independent", "full")
HEAD_KEYS = ("classifier", "head_hidden", "scalar_mix")


class RandomizedFamily(NamedTuple):
    """Parameter sets of one model with blocks re-initialised."""

    params: nnx.State  # every leaf with a leading step axis (S, ...)
    randomized: np.ndarray  # (S, L) bool: which blocks step s re-initialised
    labels: tuple[str, ...]  # one readable label per step


def _steps(mode: str, num_layers: int, depth: int | None,
           blocks: Sequence[int]) -> tuple[np.ndarray, tuple[str, ...]]:
    if mode not in MODES:
        raise ValueError(f"unknown randomization mode {mode!r}; choose from {MODES}")
    if mode == "full":  # the cascade's last step alone: every block re-initialised
        return np.stack([np.zeros(num_layers, bool), np.ones(num_layers, bool)]), (
            "original", f"last {num_layers}")
    if mode == "cascading":
        depth = num_layers if depth is None else depth
        if not 1 <= depth <= num_layers:
            raise ValueError(f"cascading depth must lie in [1, {num_layers}] (the model's "
                             f"blocks), got {depth}")
        rows = [np.arange(num_layers) >= num_layers - i for i in range(depth + 1)]
        labels = ["original"] + [f"last {i}" for i in range(1, depth + 1)]
    else:
        chosen = list(blocks) or list(range(num_layers))
        bad = [b for b in chosen if not 0 <= b < num_layers]
        if bad:
            raise ValueError(f"block indices must lie in [0, {num_layers - 1}] (the model's "
                             f"blocks), got {bad}")
        rows = [np.zeros(num_layers, bool)] + [np.arange(num_layers) == b for b in chosen]
        labels = ["original"] + [f"block {b}" for b in chosen]
    return np.stack(rows), tuple(labels)


def randomized_family(model: SequenceClassifier, *, mode: str = "cascading",
                      depth: int | None = None, blocks: Sequence[int] = (),
                      head: bool = False, seed: int = 0) -> RandomizedFamily:
    """The trained parameters and their randomized variants, stacked on a step axis.

    Args:
      model: a smat text classifier (its layers stacked on a leading layer axis).
      mode: "cascading", "independent" or "full" (the trained model and the one with
        every block re-initialised: the cascade's two ends).
      depth: cascading: how many blocks deep to go (default all).
      blocks: independent: which blocks, 0-based (default all).
      head: also re-initialise the classification head in every randomized step.
      seed: seed of the fresh initialization (one fresh model; each step takes its blocks).

    Raises:
      ValueError: an unknown mode, a depth or block index outside the model's blocks.
    """
    graphdef, trained = functional.split(model)
    num_layers = model.encoder.config.num_layers
    randomized, labels = _steps(mode, num_layers, depth, blocks)
    fresh_model = SequenceClassifier(model.encoder.config, num_labels=model.num_labels,
                                     task=model.task, pooling=model.pooling,
                                     head=model.head, rngs=nnx.Rngs(seed))
    fresh = functional.split(fresh_model)[1]
    steps = jnp.asarray(randomized)
    any_step = jnp.asarray(randomized.any(axis=1))
    any_step = any_step.at[0].set(False)

    def combine(path, old, new):
        keys = [getattr(k, "key", None) for k in path]
        if "layers" in keys:  # (L, ...) -> (S, L, ...)
            pick = steps.reshape(steps.shape + (1,) * (old.ndim - 1))
            return jnp.where(pick, new[None], old[None])
        if head and keys[0] in HEAD_KEYS:
            pick = any_step.reshape((-1,) + (1,) * old.ndim)
            return jnp.where(pick, new[None], old[None])
        return jnp.broadcast_to(old[None], (len(labels), *old.shape))

    params = jax.tree_util.tree_map_with_path(combine, trained, fresh)
    return RandomizedFamily(params, randomized, labels)
