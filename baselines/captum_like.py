"""Captum-like classes over the pure cores of ``baselines``: Captum code ports by
changing its imports.

Every class of Captum 0.9's that smat implements is here under Captum's name, with
Captum's constructor and ``attribute`` arguments: ``Saliency``, ``InputXGradient``,
``IntegratedGradients``, ``DeepLift``, ``DeepLiftShap``, ``GradientShap``,
``FeatureAblation``, ``Occlusion``, ``Lime``, ``KernelShap`` and ``NoiseTunnel``. Each only
binds arguments and calls one jitted runner (static: the forward function, the core and
the integer / string options), so repeated calls with the same shapes do not retrace.

``forward_func(inputs, *additional_forward_args) -> (B, C)`` must be a JAX function
(traceable; no Python control flow on values). Per-example ``additional_forward_args``
(e.g. the attention mask) keep their batch axis: perturbations and integration steps are
``vmap``-ed around the forward, not concatenated as in Captum.

Where smat differs from Captum, it says so instead of computing something else:

- ``target=None`` selects the predicted class (Captum requires a target for multi-output
  models); ``internal_batch_size`` becomes ``max(1, internal_batch_size // B)`` steps per
  evaluation, ``perturbations_per_eval`` the perturbations evaluated at once.
- The perturbation and surrogate methods (``FeatureAblation``, ``Occlusion``, ``Lime``,
  ``KernelShap``) and ``GradientShap`` / ``NoiseTunnel`` take ``(B, T, E)`` inputs whose
  features are the T tokens: ``feature_mask`` must number the tokens (Captum's default,
  every scalar a feature, is refused), and ``Occlusion`` windows span whole tokens.
- Randomness comes from a JAX ``key`` (default ``jax.random.key(0)``), an argument Captum
  does not have; draws follow Captum's distributions, not torch's random numbers.
- ``Lime`` fits a weighted linear regression: pass
  ``interpretable_model=SkLearnLinearRegression()`` (this module's marker, as in Captum's
  ``captum._utils.models``); Captum's default, a Lasso, is refused, as are custom
  similarity and perturbation functions (the defaults, a cosine kernel of width 1 and
  Bernoulli(1/2) tokens, are what smat computes).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from baselines._common import baseline_like, check_inputs, resolve_target
from baselines.deeplift import (
    EPS,
    _check_references,
    _deeplift_attributions,
    _deeplift_shap_attributions,
    _delta,
)
from baselines.gradient_shap import gradient_shap
from baselines.gradients import (
    _input_x_gradient_attributions,
    _integrated_gradients_attributions,
    _saliency_attributions,
)
from baselines.noise_tunnel import noise_tunnel
from baselines.perturbation import feature_ablation, occlusion
from baselines.surrogate import kernel_shap, lime

__all__ = ["DeepLift", "DeepLiftShap", "FeatureAblation", "GradientShap", "InputXGradient",
           "IntegratedGradients", "KernelShap", "Lime", "NoiseTunnel", "Occlusion", "Saliency",
           "SkLearnLinearRegression"]


@partial(jax.jit, static_argnames=("core", "forward", "options"))
def _run(core, forward, inputs, args, arrays, options):
    """``core(forward, inputs, args, **arrays, **options)`` compiled once per forward,
    core, options and shapes: every facade's call."""
    return core(forward, inputs, args, **arrays, **dict(options))


def _on_tokens(function: Callable[..., Any]) -> Callable[..., Any]:
    """A core over ``f(x, mask)`` (the token explainers) as a facade core: ``forward`` with
    its extra arguments bound, every token real, the per-dimension attributions back."""

    def core(forward, inputs, args, **options):
        result = function(lambda x, _mask: forward(x, *args), inputs,
                          jnp.ones(inputs.shape[:2], bool), **options)
        return result.attributions, result.delta

    return core


_GRADIENT_SHAP, _FEATURE_ABLATION, _OCCLUSION, _LIME, _KERNEL_SHAP, _NOISE_TUNNEL = map(
    _on_tokens, (gradient_shap, feature_ablation, occlusion, lime, kernel_shap, noise_tunnel))


def _deeplift_core(forward, inputs, args, *, baselines, target, multiply_by_inputs,
                   return_convergence_delta):
    check_inputs(inputs, jnp.ones(inputs.shape[:2], bool))
    reference = baseline_like(baselines, inputs)
    target = resolve_target(forward, inputs, args, target)
    attributions = _deeplift_attributions(forward, inputs, args, reference, target,
                                          multiply_by_inputs=multiply_by_inputs)
    delta = (_delta(forward, inputs, args, reference, target, attributions)
             if return_convergence_delta else None)
    return attributions, delta


def _deeplift_shap_core(forward, inputs, args, *, baselines, target, multiply_by_inputs,
                        return_convergence_delta):
    check_inputs(inputs, jnp.ones(inputs.shape[:2], bool))
    _check_references(baselines, inputs)
    target = resolve_target(forward, inputs, args, target)
    return _deeplift_shap_attributions(forward, inputs, args, baselines, target,
                                       multiply_by_inputs=multiply_by_inputs,
                                       return_convergence_delta=return_convergence_delta)


class SkLearnLinearRegression:
    """Captum's ``SkLearnLinearRegression`` as ``Lime``'s surrogate: a marker for the
    weighted least squares smat's Lime fits (no scikit-learn involved)."""


def _arguments(additional_forward_args: Any) -> tuple[Any, ...]:
    if additional_forward_args is None:
        return ()
    if isinstance(additional_forward_args, tuple):
        return additional_forward_args
    return (additional_forward_args,)


def _array(value: ArrayLike | None) -> jax.Array | None:
    return None if value is None else jnp.asarray(value)


def _key(key: jax.Array | None) -> jax.Array:
    return jax.random.key(0) if key is None else key


def _check_token_features(feature_mask: ArrayLike | None, inputs: jax.Array, *,
                          method: str) -> None:
    """Refuse a ``feature_mask`` that does not number the tokens of ``(B, T, E)`` inputs
    (smat's perturbation methods take tokens as their features).

    Raises:
      ValueError: inputs that are not (B, T, E), no feature mask, or another grouping.
    """
    if inputs.ndim != 3:
        raise ValueError(f"{method} takes (B, T, E) inputs whose features are the T tokens; "
                         f"got inputs of shape {inputs.shape}")
    tokens = np.broadcast_to(np.arange(inputs.shape[1])[None, :, None], inputs.shape)
    if feature_mask is None:
        raise ValueError(f"{method}: pass feature_mask numbering the tokens (feature t = token "
                         "t); Captum's default, every scalar a feature of its own, is not "
                         "implemented")
    try:
        given = np.broadcast_to(np.asarray(feature_mask), inputs.shape)
    except ValueError:
        raise ValueError(f"{method}: feature_mask of shape {np.shape(feature_mask)} does not "
                         f"broadcast to the inputs {inputs.shape}") from None
    if not np.array_equal(given, tokens):
        raise ValueError(f"{method}: feature_mask must number the tokens (feature t = token "
                         "t); other feature groups are not implemented")


class _Facade:
    """A Captum attribution class: built from the forward function (checked), calling one
    core through the shared jitted runner."""

    def __init__(self, forward_func: Callable[..., jax.Array]) -> None:
        if not callable(forward_func):
            raise TypeError(f"forward_func must be callable; got {type(forward_func).__name__}.")
        self.forward_func = forward_func

    def _call(self, core, inputs, additional_forward_args, **options):
        """Run `core`; array options (None included) are traced, the others static."""
        arrays = {k: v for k, v in options.items()
                  if v is None or isinstance(v, jax.Array | np.ndarray)}
        static = tuple(sorted((k, v) for k, v in options.items() if k not in arrays))
        return _run(core, self.forward_func, jnp.asarray(inputs),
                    _arguments(additional_forward_args), arrays, static)


def _with_delta(result, return_convergence_delta: bool):
    attributions, delta = result
    return (attributions, delta) if return_convergence_delta else attributions


class Saliency(_Facade):
    """Captum-like ``Saliency``: the (absolute) gradient of the target output
    (:func:`baselines.saliency`)."""

    def attribute(self, inputs: ArrayLike, target: ArrayLike | int | None = None,
                  abs: bool = True, additional_forward_args: Any = None) -> jax.Array:
        return self._call(_saliency_attributions, inputs, additional_forward_args,
                          target=_array(target), abs=bool(abs))


class InputXGradient(_Facade):
    """Captum-like ``InputXGradient``: ``inputs * gradient`` of the target output."""

    def attribute(self, inputs: ArrayLike, target: ArrayLike | int | None = None,
                  additional_forward_args: Any = None) -> jax.Array:
        return self._call(_input_x_gradient_attributions, inputs, additional_forward_args,
                          target=_array(target))


class IntegratedGradients(_Facade):
    """Captum-like ``IntegratedGradients`` (:func:`baselines.integrated_gradients`).

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
      multiply_by_inputs: multiply by ``inputs - baselines`` (global attribution).
    """

    def __init__(self, forward_func: Callable[..., jax.Array],
                 multiply_by_inputs: bool = True) -> None:
        super().__init__(forward_func)
        self.multiplies_by_inputs = bool(multiply_by_inputs)

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  n_steps: int = 50, method: str = "gausslegendre",
                  internal_batch_size: int | None = None,
                  return_convergence_delta: bool = False
                  ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Integrated gradients of ``inputs``; with the ``(B,)`` delta if requested.

        Raises:
          ValueError: an invalid ``internal_batch_size`` and the errors of the core.
        """
        inputs = jnp.asarray(inputs)
        if internal_batch_size is None:
            chunk = int(n_steps)
        elif not isinstance(internal_batch_size, int) or internal_batch_size < 1:
            raise ValueError(
                f"internal_batch_size must be None or an int >= 1; got {internal_batch_size!r}.")
        else:
            chunk = max(1, internal_batch_size // inputs.shape[0])
        return _with_delta(self._call(
            _integrated_gradients_attributions, inputs, additional_forward_args,
            baseline=_array(baselines), target=_array(target), n_steps=int(n_steps),
            method=method, chunk_size=chunk, multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta)), return_convergence_delta)


class _AbstractDeepLift(_Facade):
    """What Captum's ``DeepLift`` and ``DeepLiftShap`` are built from.

    Args:
      model: ``model(inputs, *additional_forward_args) -> (B, C)``, rows independent; the
        nonlinearities that get the rescale rule are those it applies through
        :func:`baselines.rescale` (Captum's ``eps`` is that function's argument).
      multiply_by_inputs: multiply the multipliers by ``inputs - baselines``.
      eps: Captum's default only: the rescale rule's threshold is the argument of
        :func:`baselines.rescale` inside the model.

    Raises:
      ValueError: another `eps` (give it to :func:`baselines.rescale`).
    """

    def __init__(self, model: Callable[..., jax.Array], multiply_by_inputs: bool = True,
                 eps: float = EPS) -> None:
        super().__init__(model)
        if eps != EPS:
            raise ValueError(f"{type(self).__name__}(eps={eps}): the rescale rule's eps is an "
                             "argument of baselines.rescale, where the model applies it")
        self.model = model
        self.multiplies_by_inputs = bool(multiply_by_inputs)


def _no_custom_attribution(function: Any) -> None:
    if function is not None:
        raise ValueError("custom_attribution_func is not implemented: DeepLift's "
                         "attributions are the multipliers times inputs - baselines")


class DeepLift(_AbstractDeepLift):
    """Captum-like ``DeepLift`` (rescale rule; :func:`baselines.deeplift`); extra arguments
    are repeated for the references, as Captum does."""

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  return_convergence_delta: bool = False, custom_attribution_func: Any = None
                  ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Raises ValueError for a ``custom_attribution_func`` (not implemented)."""
        _no_custom_attribution(custom_attribution_func)
        return _with_delta(self._call(
            _deeplift_core, inputs, additional_forward_args, baselines=_array(baselines),
            target=_array(target), multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta)), return_convergence_delta)


class DeepLiftShap(_AbstractDeepLift):
    """Captum-like ``DeepLiftShap`` (:func:`baselines.deeplift_shap`): the mean DeepLift
    over ``(R, T, E)`` references (R >= 2); its delta is the mean over the references
    (Captum returns the ``B * R`` per-pair deltas)."""

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  return_convergence_delta: bool = False, custom_attribution_func: Any = None
                  ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Raises ValueError for a ``custom_attribution_func`` (not implemented)."""
        _no_custom_attribution(custom_attribution_func)
        inputs = jnp.asarray(inputs)
        return _with_delta(self._call(
            _deeplift_shap_core, inputs, additional_forward_args,
            baselines=jnp.asarray(baselines, inputs.dtype), target=_array(target),
            multiply_by_inputs=self.multiplies_by_inputs,
            return_convergence_delta=bool(return_convergence_delta)), return_convergence_delta)


class GradientShap(_Facade):
    """Captum-like ``GradientShap`` over tokens (:func:`baselines.gradient_shap`).

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
      multiply_by_inputs: must be True (the global attribution, Captum's default).
    """

    def __init__(self, forward_func: Callable[..., jax.Array],
                 multiply_by_inputs: bool = True) -> None:
        super().__init__(forward_func)
        if not multiply_by_inputs:
            raise ValueError("GradientShap(multiply_by_inputs=False) is not implemented: smat "
                             "computes Captum's default, the global attribution")

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike, n_samples: int = 5,
                  stdevs: float = 0.0, target: ArrayLike | int | None = None,
                  additional_forward_args: Any = None, return_convergence_delta: bool = False,
                  key: jax.Array | None = None) -> jax.Array:
        """Raises ValueError for ``return_convergence_delta`` (not implemented)."""
        if return_convergence_delta:
            raise ValueError("GradientShap: return_convergence_delta is not implemented")
        check_inputs(jnp.asarray(inputs), jnp.ones(np.shape(inputs)[:2], bool))
        return self._call(_GRADIENT_SHAP, inputs, additional_forward_args,
                          baselines=jnp.asarray(baselines), key=_key(key),
                          n_samples=int(n_samples), stdevs=float(stdevs),
                          target=_array(target))[0]


class FeatureAblation(_Facade):
    """Captum-like ``FeatureAblation`` over tokens (:func:`baselines.feature_ablation`)."""

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  feature_mask: ArrayLike | None = None, perturbations_per_eval: int = 1,
                  show_progress: bool = False) -> jax.Array:
        inputs = jnp.asarray(inputs)
        _check_token_features(feature_mask, inputs, method="FeatureAblation")
        return self._call(_FEATURE_ABLATION, inputs, additional_forward_args,
                          baseline=_array(baselines), target=_array(target),
                          chunk_size=int(perturbations_per_eval))[0]


class Occlusion(_Facade):
    """Captum-like ``Occlusion`` over windows of whole tokens (:func:`baselines.occlusion`):
    ``sliding_window_shapes=(window, E)`` and ``strides=stride`` or ``(stride, E)``."""

    def attribute(self, inputs: ArrayLike, sliding_window_shapes: tuple[int, int],
                  strides: int | tuple[int, int] | None = None,
                  baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  perturbations_per_eval: int = 1, show_progress: bool = False) -> jax.Array:
        """Raises ValueError for windows or strides that do not span whole tokens."""
        inputs = jnp.asarray(inputs)
        width = inputs.shape[-1]
        shape = tuple(sliding_window_shapes)
        if inputs.ndim != 3 or len(shape) != 2 or shape[1] != width:
            raise ValueError(f"Occlusion: sliding_window_shapes must be (tokens, {width}) on "
                             f"(B, T, {width}) inputs; got {shape} on {inputs.shape}")
        stride = 1 if strides is None else strides
        if isinstance(stride, tuple):
            if len(stride) != 2 or stride[1] != width:
                raise ValueError(f"Occlusion: strides must be an int or (tokens, {width}); "
                                 f"got {stride}")
            stride = stride[0]
        return self._call(_OCCLUSION, inputs, additional_forward_args, window=int(shape[0]),
                          stride=int(stride), baseline=_array(baselines),
                          target=_array(target), chunk_size=int(perturbations_per_eval))[0]


class Lime(_Facade):
    """Captum-like ``Lime`` over tokens with a linear-regression surrogate
    (:func:`baselines.lime`).

    Args:
      forward_func: ``forward_func(inputs, *additional_forward_args) -> (B, C)``.
      interpretable_model: :class:`SkLearnLinearRegression` (the surrogate smat fits).
      similarity_func, perturb_func: None (Captum's defaults, which smat computes).

    Raises:
      ValueError: another surrogate, similarity or perturbation function.
    """

    def __init__(self, forward_func: Callable[..., jax.Array],
                 interpretable_model: Any = None, similarity_func: Any = None,
                 perturb_func: Any = None) -> None:
        super().__init__(forward_func)
        if not isinstance(interpretable_model, SkLearnLinearRegression):
            raise ValueError("Lime fits a weighted linear regression: pass interpretable_model="
                             "SkLearnLinearRegression() (from baselines.captum_like); Captum's "
                             "default surrogate, a Lasso, is not implemented")
        if similarity_func is not None or perturb_func is not None:
            raise ValueError("Lime: custom similarity_func and perturb_func are not "
                             "implemented (the defaults are: a cosine kernel of width 1, "
                             "each token kept with probability 1/2)")

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  feature_mask: ArrayLike | None = None, n_samples: int = 50,
                  perturbations_per_eval: int = 1, return_input_shape: bool = True,
                  show_progress: bool = False, key: jax.Array | None = None) -> jax.Array:
        return _surrogate(self, _LIME, "Lime", inputs, baselines, target,
                          additional_forward_args, feature_mask, n_samples,
                          perturbations_per_eval, return_input_shape, key)


class KernelShap(_Facade):
    """Captum-like ``KernelShap`` over tokens (:func:`baselines.kernel_shap`)."""

    def attribute(self, inputs: ArrayLike, baselines: ArrayLike | float | None = None,
                  target: ArrayLike | int | None = None, additional_forward_args: Any = None,
                  feature_mask: ArrayLike | None = None, n_samples: int = 25,
                  perturbations_per_eval: int = 1, return_input_shape: bool = True,
                  show_progress: bool = False, key: jax.Array | None = None) -> jax.Array:
        return _surrogate(self, _KERNEL_SHAP, "KernelShap", inputs, baselines, target,
                          additional_forward_args, feature_mask, n_samples,
                          perturbations_per_eval, return_input_shape, key)


def _surrogate(facade, core, method, inputs, baselines, target, additional_forward_args,
               feature_mask, n_samples, perturbations_per_eval, return_input_shape, key):
    """Lime's and KernelShap's shared ``attribute``: checked, then the core."""
    if not return_input_shape:
        raise ValueError(f"{method}: return_input_shape=False is not implemented")
    inputs = jnp.asarray(inputs)
    _check_token_features(feature_mask, inputs, method=method)
    return facade._call(core, inputs, additional_forward_args, key=_key(key),
                        n_samples=int(n_samples), baseline=_array(baselines),
                        target=_array(target), chunk_size=int(perturbations_per_eval))[0]


class NoiseTunnel:
    """Captum-like ``NoiseTunnel`` around ``Saliency``, ``InputXGradient`` or
    ``IntegratedGradients`` of this module (:func:`baselines.noise_tunnel`).

    Args:
      attribution_method: one of those three, built on the forward function.

    Raises:
      TypeError: another attribution method.
    """

    _WRAPPED = {Saliency: "saliency", InputXGradient: "input_x_gradient",
                IntegratedGradients: "integrated_gradients"}

    def __init__(self, attribution_method: _Facade) -> None:
        if type(attribution_method) not in self._WRAPPED:
            raise TypeError(f"NoiseTunnel wraps Saliency, InputXGradient or "
                            f"IntegratedGradients; got {type(attribution_method).__name__}")
        self.attribution_method = attribution_method

    def attribute(self, inputs: ArrayLike, nt_type: str = "smoothgrad", nt_samples: int = 5,
                  nt_samples_batch_size: int | None = None, stdevs: float = 1.0,
                  draw_baseline_from_distrib: bool = False, key: jax.Array | None = None,
                  **kwargs: Any) -> jax.Array:
        """The wrapped method over noisy copies; ``kwargs`` are its ``attribute``
        arguments (``target``, ``additional_forward_args``, ``abs``, ``baselines``,
        ``n_steps``, ``method``, ``internal_batch_size``). ``nt_samples_batch_size`` changes
        nothing here: the noisy copies run in one program.

        Raises:
          ValueError: ``draw_baseline_from_distrib`` (not implemented), or an argument the
            wrapped method does not take.
        """
        if draw_baseline_from_distrib:
            raise ValueError("NoiseTunnel: draw_baseline_from_distrib is not implemented")
        method = self.attribution_method
        args = kwargs.pop("additional_forward_args", None)
        options = {"target": _array(kwargs.pop("target", None))}
        if "internal_batch_size" in kwargs:  # integration steps per evaluation
            batch = kwargs.pop("internal_batch_size")
            options["chunk_size"] = max(1, int(batch) // np.shape(inputs)[0])
        if "baselines" in kwargs:
            options["baseline"] = _array(kwargs.pop("baselines"))
        options.update(kwargs)
        if isinstance(method, IntegratedGradients):
            options["multiply_by_inputs"] = method.multiplies_by_inputs
        return method._call(_NOISE_TUNNEL, inputs, args, key=_key(key),
                            explainer=self._WRAPPED[type(method)], nt_type=nt_type,
                            nt_samples=int(nt_samples), stdevs=float(stdevs),
                            **options)[0]
