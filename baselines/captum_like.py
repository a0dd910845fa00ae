"""Captum-like facades over the pure cores of :mod:`baselines.gradients`.

The classes mirror Captum 0.9's names and ``attribute`` arguments so Captum code
ports by changing imports. They only bind arguments and call the module-level
jitted cores (static: the forward function and the integer / string options), so
repeated calls with the same shapes do not retrace.

``forward_func(inputs, *additional_forward_args) -> (B, C)`` must be a JAX
function (traceable; no Python control flow on values). Per-example
``additional_forward_args`` (e.g. the attention mask) keep their batch axis: the
integration steps are ``vmap``-ed around the forward, not concatenated as in Captum.

Note:
  ``target=None`` selects the predicted class (Captum requires a target for
  multi-output models). ``internal_batch_size`` is translated to a step chunk of
  ``max(1, internal_batch_size // B)`` steps per evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from baselines.deeplift import (
    _check_references,
    _deeplift_attributions,
    _deeplift_shap_attributions,
    _delta,
)
from baselines.gradients import (
    _baseline_like,
    _check_inputs,
    _input_x_gradient_attributions,
    _integrated_gradients_attributions,
    _resolve_target,
    _saliency_attributions,
)

__all__ = ["DeepLift", "DeepLiftShap", "InputXGradient", "IntegratedGradients", "Saliency"]


def _format_args(additional_forward_args: Any) -> tuple[Any, ...]:
    if additional_forward_args is None:
        return ()
    if isinstance(additional_forward_args, tuple):
        return additional_forward_args
    return (additional_forward_args,)


def _check_forward(forward_func: Any) -> None:
    if not callable(forward_func):
        raise TypeError(f"forward_func must be callable; got {type(forward_func).__name__}.")


@partial(jax.jit, static_argnames=("forward", "abs"))
def _saliency_jit(forward, inputs, args, target, *, abs):
    return _saliency_attributions(forward, inputs, args, target=target, abs=abs)


@partial(jax.jit, static_argnames=("forward",))
def _input_x_gradient_jit(forward, inputs, args, target):
    return _input_x_gradient_attributions(forward, inputs, args, target=target)


@partial(
    jax.jit,
    static_argnames=(
        "forward", "n_steps", "method", "chunk_size", "multiply_by_inputs",
        "return_convergence_delta",
    ),
)
def _integrated_gradients_jit(
    forward, inputs, args, baselines, target, *, n_steps, method, chunk_size,
    multiply_by_inputs, return_convergence_delta,
):
    return _integrated_gradients_attributions(
        forward, inputs, args, baseline=baselines, target=target, n_steps=n_steps, method=method,
        chunk_size=chunk_size, multiply_by_inputs=multiply_by_inputs,
        return_convergence_delta=return_convergence_delta,
    )


@partial(jax.jit, static_argnames=("forward", "multiply_by_inputs", "return_convergence_delta"))
def _deeplift_jit(forward, inputs, args, baselines, target, *, multiply_by_inputs,
                  return_convergence_delta):
    _check_inputs(inputs, jnp.ones(inputs.shape[:2], bool))
    reference = _baseline_like(baselines, inputs)
    target = _resolve_target(forward, inputs, args, target)
    attributions = _deeplift_attributions(forward, inputs, args, reference, target,
                                          multiply_by_inputs=multiply_by_inputs)
    delta = (_delta(forward, inputs, args, reference, target, attributions)
             if return_convergence_delta else None)
    return attributions, delta


@partial(jax.jit, static_argnames=("forward", "multiply_by_inputs", "return_convergence_delta"))
def _deeplift_shap_jit(forward, inputs, args, baselines, target, *, multiply_by_inputs,
                       return_convergence_delta):
    _check_inputs(inputs, jnp.ones(inputs.shape[:2], bool))
    _check_references(baselines, inputs)
    target = _resolve_target(forward, inputs, args, target)
    return _deeplift_shap_attributions(forward, inputs, args, baselines, target,
                                       multiply_by_inputs=multiply_by_inputs,
                                       return_convergence_delta=return_convergence_delta)


class Saliency:
    """Captum-like ``Saliency``: (absolute) gradient of the target output.

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
    """

    def __init__(self, forward_func: Callable[..., jax.Array]) -> None:
        _check_forward(forward_func)
        self.forward_func = forward_func

    def attribute(
        self,
        inputs: ArrayLike,
        target: ArrayLike | int | None = None,
        abs: bool = True,
        additional_forward_args: Any = None,
    ) -> jax.Array:
        """Attributions with the shape of ``inputs`` (see :func:`baselines.saliency`)."""
        return _saliency_jit(
            self.forward_func, jnp.asarray(inputs), _format_args(additional_forward_args),
            target, abs=bool(abs),
        )


class InputXGradient:
    """Captum-like ``InputXGradient``: ``inputs * gradient`` of the target output.

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
    """

    def __init__(self, forward_func: Callable[..., jax.Array]) -> None:
        _check_forward(forward_func)
        self.forward_func = forward_func

    def attribute(
        self,
        inputs: ArrayLike,
        target: ArrayLike | int | None = None,
        additional_forward_args: Any = None,
    ) -> jax.Array:
        """Attributions with the shape of ``inputs`` (see :func:`baselines.input_x_gradient`)."""
        return _input_x_gradient_jit(
            self.forward_func, jnp.asarray(inputs), _format_args(additional_forward_args), target
        )


class IntegratedGradients:
    """Captum-like ``IntegratedGradients`` (see :func:`baselines.integrated_gradients`).

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
      multiply_by_inputs: multiply by ``inputs - baselines`` (global attribution).
    """

    def __init__(
        self, forward_func: Callable[..., jax.Array], multiply_by_inputs: bool = True
    ) -> None:
        _check_forward(forward_func)
        self.forward_func = forward_func
        self.multiplies_by_inputs = bool(multiply_by_inputs)

    def attribute(
        self,
        inputs: ArrayLike,
        baselines: ArrayLike | float | None = None,
        target: ArrayLike | int | None = None,
        additional_forward_args: Any = None,
        n_steps: int = 50,
        method: str = "gausslegendre",
        internal_batch_size: int | None = None,
        return_convergence_delta: bool = False,
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Integrated gradients of ``inputs``; with the ``(B,)`` delta if requested.

        Args:
          inputs: ``(B, ...)`` attribution point.
          baselines: ``None`` (zeros), a scalar or an array broadcastable to ``inputs``.
          target: output index per example ``(B,)`` or scalar; ``None`` = predicted.
          additional_forward_args: extra argument(s) passed to ``forward_func``.
          n_steps: number of quadrature steps.
          method: Captum method name, e.g. ``"gausslegendre"`` or ``"riemann_trapezoid"``.
          internal_batch_size: rows (examples x steps) per evaluation; ``None`` = all steps.
          return_convergence_delta: also return the completeness gap per example.

        Returns:
          Attributions shaped like ``inputs``, or ``(attributions, delta)``.

        Raises:
          ValueError: invalid ``internal_batch_size`` and the errors of the core.
        """
        inputs = jnp.asarray(inputs)
        if internal_batch_size is None:
            chunk = int(n_steps)
        elif not isinstance(internal_batch_size, int) or internal_batch_size < 1:
            raise ValueError(
                f"internal_batch_size must be None or an int >= 1; got {internal_batch_size!r}."
            )
        else:
            chunk = max(1, internal_batch_size // inputs.shape[0])
        attributions, delta = _integrated_gradients_jit(
            self.forward_func, inputs, _format_args(additional_forward_args),
            None if baselines is None else jnp.asarray(baselines), target,
            n_steps=int(n_steps), method=method, chunk_size=chunk,
            multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta),
        )
        return (attributions, delta) if return_convergence_delta else attributions


class _AbstractDeepLift:
    """What Captum's ``DeepLift`` and ``DeepLiftShap`` are built from.

    Args:
      model: ``model(inputs, *additional_forward_args) -> (B, C)``, rows independent; the
        nonlinearities that get the rescale rule are those it applies through
        :func:`baselines.rescale` (Captum's ``eps`` is that function's argument).
      multiply_by_inputs: multiply the multipliers by ``inputs - baselines``.
    """

    def __init__(self, model: Callable[..., jax.Array], multiply_by_inputs: bool = True) -> None:
        _check_forward(model)
        self.model = model
        self.multiplies_by_inputs = bool(multiply_by_inputs)


class DeepLift(_AbstractDeepLift):
    """Captum-like ``DeepLift`` (rescale rule; see :func:`baselines.deeplift`)."""

    def attribute(
        self,
        inputs: ArrayLike,
        baselines: ArrayLike | float | None = None,
        target: ArrayLike | int | None = None,
        additional_forward_args: Any = None,
        return_convergence_delta: bool = False,
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """DeepLift attributions shaped like ``inputs`` (with the ``(B,)`` delta if asked).

        Args:
          inputs: ``(B, T, E)`` attribution point.
          baselines: ``None`` (zeros), a scalar or an array broadcastable to ``inputs``.
          target: output index per example ``(B,)`` or scalar; ``None`` = predicted.
          additional_forward_args: extra argument(s) of ``model``, each with a batch axis
            (they are repeated for the references, as Captum does).
          return_convergence_delta: also return ``sum(attr) - (f(x) - f(x'))``.
        """
        inputs = jnp.asarray(inputs)
        attributions, delta = _deeplift_jit(
            self.model, inputs, _format_args(additional_forward_args),
            None if baselines is None else jnp.asarray(baselines), target,
            multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta))
        return (attributions, delta) if return_convergence_delta else attributions


class DeepLiftShap(_AbstractDeepLift):
    """Captum-like ``DeepLiftShap`` (see :func:`baselines.deeplift_shap`)."""

    def attribute(
        self,
        inputs: ArrayLike,
        baselines: ArrayLike,
        target: ArrayLike | int | None = None,
        additional_forward_args: Any = None,
        return_convergence_delta: bool = False,
    ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Mean DeepLift attributions over the ``(R, T, E)`` references (R >= 2).

        With ``return_convergence_delta`` also the ``(B,)`` delta, the mean over the
        references (Captum returns the ``B * R`` per-pair deltas).
        """
        inputs = jnp.asarray(inputs)
        attributions, delta = _deeplift_shap_jit(
            self.model, inputs, _format_args(additional_forward_args),
            jnp.asarray(baselines, inputs.dtype), target,
            multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta))
        return (attributions, delta) if return_convergence_delta else attributions
