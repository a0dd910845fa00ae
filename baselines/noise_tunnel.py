r"""NoiseTunnel (SmoothGrad, SmoothGrad², VarGrad) around a gradient explainer, Captum 0.9
semantics, as a pure JAX function.

Each of ``nt_samples`` noisy copies :math:`x + \epsilon_s`, :math:`\epsilon_s \sim
\mathcal{N}(0, \sigma^2)` (``stdevs`` = :math:`\sigma`, absolute as in Captum), is explained
with the same target, and the attributions are combined:

.. math::

  \text{smoothgrad} = \tfrac{1}{S}\sum_s a(x + \epsilon_s), \quad
  \text{smoothgrad\_sq} = \tfrac{1}{S}\sum_s a(x + \epsilon_s)^2, \quad
  \text{vargrad} = \text{smoothgrad\_sq} - \text{smoothgrad}^2

(Smilkov et al., 2017; Adebayo et al., 2018). The samples run in a ``lax.scan``, one at a
time, so memory is that of one explanation. The noise comes from a JAX key. The wrapped
explainer is ``explainer=``; its options (integrated gradients' quadrature ``method``,
``n_steps``, ``baseline``, ...) keep their own names, as in Captum.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines._common import (
    Attribution,
    check_inputs,
    check_reduction,
    resolve_target,
)
from baselines.gradients import (
    METHODS,
    _input_x_gradient_attributions,
    _integrated_gradients_attributions,
    _saliency_attributions,
)
from smat.explainers.base import reduce_tokens

__all__ = ["NT_TYPES", "SMOOTHED", "noise_tunnel"]

NT_TYPES = ("smoothgrad", "smoothgrad_sq", "vargrad")
"""Captum's NoiseTunnel combinations."""

SMOOTHED = ("saliency", "input_x_gradient", "integrated_gradients")
"""The gradient explainers :func:`noise_tunnel` wraps."""


# The options of noise_tunnel that reach the wrapped integrated gradients, under the names
# baselines.integrated_gradients gives them.
_IG_OPTIONS = ("baseline", "n_steps", "method", "chunk_size", "multiply_by_inputs")

_MOVED = ("noise_tunnel names the wrapped explainer `explainer` (one of {explainers}); "
          "`method` is integrated gradients' quadrature rule (one of {methods}). Write "
          "explainer={method!r}.")


def _attributions(explainer: str, forward, x, args, target, options):
    if explainer == "saliency":
        return _saliency_attributions(forward, x, args, target=target, abs=options["abs"])
    if explainer == "input_x_gradient":
        return _input_x_gradient_attributions(forward, x, args, target=target)
    return _integrated_gradients_attributions(
        forward, x, args, target=target, return_convergence_delta=False,
        **{name: options[name] for name in _IG_OPTIONS})[0]


def _explainer_options(explainer: str, *, abs, baseline, n_steps, method, chunk_size,
                       multiply_by_inputs) -> dict:
    """The wrapped explainer's options with their defaults filled in.

    Raises:
      ValueError: an option given for an explainer that does not take it, or a `method`
        that names an explainer (the name it had before `explainer`).
    """
    if method in SMOOTHED:
        raise ValueError(_MOVED.format(explainers=SMOOTHED, methods=METHODS, method=method))
    given = {"abs": abs, "baseline": baseline, "n_steps": n_steps, "method": method,
             "chunk_size": chunk_size, "multiply_by_inputs": multiply_by_inputs}
    takes = {"saliency": ("abs",), "input_x_gradient": (),
             "integrated_gradients": _IG_OPTIONS}[explainer]
    foreign = [name for name, value in given.items() if value is not None and name not in takes]
    if foreign:
        own = f"its options are {list(takes)}" if takes else "it takes no options"
        raise ValueError(f"explainer={explainer!r} takes none of {foreign}; {own}.")
    defaults = {"abs": True, "baseline": None, "n_steps": 50, "method": "gausslegendre",
                "chunk_size": 32, "multiply_by_inputs": True}
    return {name: defaults[name] if given[name] is None else given[name] for name in takes}


def noise_tunnel(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    key: jax.Array | None = None,
    noise: Float[Array, "samples batch seq dim"] | None = None,
    explainer: str = "saliency",
    nt_type: str = "smoothgrad",
    nt_samples: int = 5,
    stdevs: float = 1.0,
    target: Int[Array, " batch"] | int | None = None,
    reduction: str = "l2",
    abs: bool | None = None,
    baseline: ArrayLike | None = None,
    n_steps: int | None = None,
    method: str | None = None,
    chunk_size: int | None = None,
    multiply_by_inputs: bool | None = None,
) -> Attribution:
    r"""A gradient explainer averaged over noisy copies of ``x`` (Captum ``NoiseTunnel``).

    The wrapped explainer's options keep the names that explainer's own function gives
    them, as Captum's ``NoiseTunnel.attribute`` passes its extra keywords to the wrapped
    method: ``noise_tunnel(..., explainer="integrated_gradients", method="riemann_trapezoid",
    n_steps=20)`` is Captum's ``NoiseTunnel(IntegratedGradients(f)).attribute(...,
    method="riemann_trapezoid", n_steps=20)``. An option left at ``None`` takes the wrapped
    explainer's default; one its explainer does not take is an error.

    Args:
      f: ``f(x (B, T, E), mask (B, T)) -> (B, C)`` JAX function.
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      key: JAX PRNG key of the noise: ``stdevs * normal(key, (nt_samples, B, T, E))``.
      noise: the standard-normal draws themselves, ``(nt_samples, B, T, E)``, instead of
        `key` (e.g. drawn per data-set row, so a row's noise does not depend on its batch).
      explainer: the wrapped explainer, one of :data:`SMOOTHED`.
      nt_type: one of :data:`NT_TYPES`.
      nt_samples: noisy copies (>= 1).
      stdevs: standard deviation of the Gaussian noise (>= 0; 0 gives the plain method).
      target: output index per example ``(B,)`` or scalar; ``None`` = the predicted class
        at the clean ``x``, used for every noisy copy.
      reduction: token reduction name.
      abs: saliency only: absolute gradients (default ``True``).
      baseline: integrated gradients only: its baseline, broadcastable to ``x`` (default
        zeros).
      n_steps: integrated gradients only: quadrature nodes (default 50).
      method: integrated gradients only: its quadrature rule, one of
        :data:`~baselines.METHODS` (default ``"gausslegendre"``).
      chunk_size: integrated gradients only: steps evaluated at once (default 32).
      multiply_by_inputs: integrated gradients only: Captum's "global" attribution
        (default ``True``); ``False`` gives the "local" one.

    Returns:
      :class:`~baselines.Attribution` with the combined ``(B, T, E)`` attributions.

    Raises:
      ValueError / TypeError: a bad explainer, nt_type, nt_samples, stdevs, key / noise,
      shape, target or reduction; an option the wrapped explainer does not take; a
      `method` naming an explainer (the wrapped explainer was called `method` before
      `explainer`); a bad option of the wrapped explainer.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    if explainer not in SMOOTHED:
        raise ValueError(f"explainer must be one of {SMOOTHED}; got {explainer!r}.")
    options = _explainer_options(explainer, abs=abs, baseline=baseline, n_steps=n_steps,
                                 method=method, chunk_size=chunk_size,
                                 multiply_by_inputs=multiply_by_inputs)
    if nt_type not in NT_TYPES:
        raise ValueError(f"nt_type must be one of {NT_TYPES}; got {nt_type!r}.")
    if not isinstance(nt_samples, int) or nt_samples < 1:
        raise ValueError(f"nt_samples must be an int >= 1; got {nt_samples!r}.")
    if not stdevs >= 0:
        raise ValueError(f"stdevs must be >= 0; got {stdevs!r}.")
    if (key is None) == (noise is None):
        raise ValueError("give exactly one of key (to draw the noise) and noise.")
    if noise is None:
        noise = jax.random.normal(key, (nt_samples, *x.shape), x.dtype)
    elif noise.shape != (nt_samples, *x.shape):
        raise ValueError(f"noise must have shape (nt_samples, B, T, E) = "
                         f"{(nt_samples, *x.shape)}; got {noise.shape}.")
    args = (mask,)
    target = resolve_target(f, x, args, target)

    def sample(totals, draw):
        attr = _attributions(explainer, f, x + stdevs * draw, args, target, options)
        return (totals[0] + attr, totals[1] + attr * attr), None

    with jax.named_scope("noise_tunnel"):
        (total, total_sq), _ = jax.lax.scan(
            sample, (jnp.zeros_like(x), jnp.zeros_like(x)), jnp.asarray(noise, x.dtype))
    mean, mean_sq = total / nt_samples, total_sq / nt_samples
    attr = {"smoothgrad": mean, "smoothgrad_sq": mean_sq,
            "vargrad": mean_sq - mean * mean}[nt_type]
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), None, reduction)
