"""What every explainer of ``baselines`` shares: the result type and the checks and
target handling each core starts with.

A core's forward is ``forward(x, *args) -> (B, C)`` (or ``(B,)``): the model at the
attribution point ``x``, with per-example extra arguments such as the token mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from smat.explainers.base import REDUCTIONS, Saliency

Forward = Callable[..., jax.Array]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Attribution:
    """Result of a gradient explainer.

    Attributes:
      attributions: ``(B, T, E)`` per-dimension attributions (Captum's return value).
      saliency: per-token :class:`~smat.explainers.Saliency` after ``reduction``.
      delta: ``(B,)`` convergence delta :math:`\\sum a - (F(x) - F(x'))` (IG with
        ``return_convergence_delta=True``), else ``None``.
      reduction: name of the token reduction (static pytree metadata), see
        :data:`smat.explainers.REDUCTIONS`.
    """

    attributions: Float[Array, "batch seq dim"]
    saliency: Saliency
    delta: Float[Array, " batch"] | None
    reduction: str = field(default="sum", metadata={"static": True})

    def __post_init__(self) -> None:
        if not isinstance(self.reduction, str):
            raise TypeError(f"Attribution.reduction must be a str; got {self.reduction!r}.")


def outputs_2d(outputs: jax.Array) -> jax.Array:
    if outputs.ndim == 1:
        return outputs[:, None]
    if outputs.ndim != 2:
        raise ValueError(
            f"The forward function must return (B, C) outputs (or (B,)); got shape "
            f"{outputs.shape}."
        )
    return outputs


def resolve_target(
    forward: Forward, x: jax.Array, args: Sequence[Any], target: ArrayLike | None
) -> jax.Array:
    """``(B,)`` int32 target indices: given (scalar or per example) or the predicted class."""
    batch = x.shape[0]
    if target is None:
        outputs = outputs_2d(forward(x, *args))
        return jnp.argmax(outputs, axis=-1).astype(jnp.int32)
    if isinstance(target, int | np.integer) and target < 0:
        raise ValueError(f"target must be a nonnegative output index; got {target}.")
    target = jnp.asarray(target)
    if not jnp.issubdtype(target.dtype, jnp.integer):
        raise TypeError(f"target must hold integers; got dtype {target.dtype}.")
    if target.ndim == 0:
        return jnp.broadcast_to(target, (batch,)).astype(jnp.int32)
    if target.shape != (batch,):
        raise ValueError(f"target must be a scalar or have shape ({batch},); got {target.shape}.")
    return target.astype(jnp.int32)


def target_outputs(forward: Forward, x: jax.Array, args: Sequence[Any], target: jax.Array):
    outputs = outputs_2d(forward(x, *args))  # (B, C)
    return jnp.take_along_axis(outputs, target[:, None], axis=1)[:, 0]  # (B,)


def target_gradient(
    forward: Forward, x: jax.Array, args: Sequence[Any], target: jax.Array
) -> jax.Array:
    """``d f(x)[b, target_b] / d x`` for every example (examples are independent)."""
    return jax.grad(lambda z: jnp.sum(target_outputs(forward, z, args, target)))(x)


def baseline_like(baseline: ArrayLike | None, x: jax.Array) -> jax.Array:
    """The baseline broadcast to ``x`` (zeros when ``None``)."""
    if baseline is None:
        return jnp.zeros_like(x)
    baseline = jnp.asarray(baseline, dtype=x.dtype)
    try:
        return jnp.broadcast_to(baseline, x.shape)
    except ValueError:
        raise ValueError(f"baseline of shape {baseline.shape} does not broadcast to inputs "
                         f"{x.shape}.") from None


def check_inputs(x: jax.Array, mask: jax.Array) -> None:
    if x.ndim != 3 or mask.shape != x.shape[:2]:
        raise ValueError(
            f"Expected x (B, T, E) and mask (B, T); got x {x.shape} and mask {mask.shape}."
        )
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"x must be floating point (e.g. embeddings); got dtype {x.dtype}.")


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"Unknown reduction {reduction!r}; valid choices are {sorted(REDUCTIONS)}."
        )
