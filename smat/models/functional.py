"""Pure functional view of smat models: ``split`` once, ``apply`` many times.

Training code differentiates a function of the parameters, sometimes twice (the SMaT
meta step differentiates through a student gradient step), so models cross ``jit`` /
``grad`` boundaries as a static ``graphdef`` plus an ``nnx.State`` of parameters:

>>> graphdef, params = split(model)                                      # doctest: +SKIP
>>> loss = lambda p: apply(graphdef, p, input_ids=ids, attention_mask=m).logits.sum()
>>> jax.grad(lambda p: tree_l2(jax.grad(loss)(p)))(params)               # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

PRECISIONS = ("float32", "bfloat16")


def split(model: nnx.Module) -> tuple[nnx.GraphDef, nnx.State]:
    """Splits a model into its static graph definition and its parameter pytree.

    Args:
      model: an NNX module whose only state is ``nnx.Param`` (true for every smat model).

    Returns:
      ``(graphdef, params)``; ``graphdef`` is hashable (a valid static argument) and
      ``params`` an ``nnx.State`` pytree of arrays.

    Raises:
      ValueError: the module holds non-parameter state (e.g. RNG or batch statistics),
        which ``apply`` could not thread through purely.
    """
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    if jax.tree.leaves(rest):
        paths = [".".join(map(str, path)) for path, _ in nnx.to_flat_state(rest)]
        raise ValueError(
            f"model holds non-parameter state at {paths}; smat.models.functional only "
            "supports modules whose state is nnx.Param"
        )
    return graphdef, params


def apply(graphdef: nnx.GraphDef, params: nnx.State, *args: Any, **kwargs: Any) -> Any:
    """Runs ``nnx.merge(graphdef, params)(*args, **kwargs)`` as a pure function of params.

    Args:
      graphdef: from :func:`split`.
      params: an ``nnx.State`` with the structure produced by :func:`split` (possibly
        traced, e.g. inside ``jax.grad``).
      *args: positional arguments of the model's ``__call__`` (e.g. ``input_ids``).
      **kwargs: keyword arguments of the model's ``__call__``.

    Returns:
      Whatever the model returns (``ClassifierOutput`` for ``SequenceClassifier``).
    """
    return nnx.merge(graphdef, params)(*args, **kwargs)


def cast(params: nnx.State, precision: str) -> nnx.State:
    """The parameters with every floating-point leaf in `precision` ("float32" or "bfloat16").

    A model applied to bfloat16 parameters runs its matmuls in bfloat16 (embeddings, and
    so every activation, inherit the dtype); its normalization statistics still reduce in
    float32 (jnp's mean/var promote). Integer leaves are kept.

    Raises:
      ValueError: an unknown precision.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    dtype = jnp.dtype(precision)
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating)
                        else a, params)


def precision_of(params: nnx.State) -> str:
    """The precision (one of :data:`PRECISIONS`) of the parameters' floating-point leaves.

    Raises:
      ValueError: leaves of several floating-point dtypes, or of one not in PRECISIONS.
    """
    dtypes = {str(a.dtype) for a in jax.tree.leaves(params)
              if jnp.issubdtype(a.dtype, jnp.floating)}
    if len(dtypes) != 1 or not dtypes <= set(PRECISIONS):
        raise ValueError(f"parameters in {sorted(dtypes)}; expected all in one of {PRECISIONS} "
                         "(see cast)")
    return dtypes.pop()
