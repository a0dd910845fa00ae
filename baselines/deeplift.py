r"""DeepLift (rescale rule) and DeepLiftShap with Captum 0.9 semantics, as pure JAX functions.

DeepLift (Shrikumar et al, 2017) explains :math:`f(x) - f(x')` against a reference
:math:`x'` by back-propagating *multipliers*: through a nonlinearity :math:`y = g(z)` the
rescale rule replaces the local derivative :math:`g'(z)` by the secant slope
:math:`\Delta y / \Delta z = (g(z) - g(z')) / (z - z')`, where :math:`z'` is the same
unit's value on the reference; linear operations keep their derivatives. Then

.. math:: a = (x - x') \odot m_x, \qquad \delta = \sum a - \big(f(x)_c - f(x')_c\big)

and :math:`\delta = 0` when every nonlinearity on the path uses the rule (summation to
delta).

How Captum does it, and so smat: the model runs once on inputs and references stacked
along the batch axis, ``[x; x']``; only the nonlinear *modules* of Captum's supported list
(``nn.ReLU``, ``ELU``, ``LeakyReLU``, ``Sigmoid``, ``Tanh``, ``Softplus``, ``MaxPool``,
``Softmax``) get the rescale rule, through backward hooks; every other operation keeps its
ordinary gradient. In smat a nonlinearity gets the rule when the function ``f`` applies it
through :func:`rescale` (``rescale(jnp.tanh)(z)``); plain ``jnp``/``jax.nn`` calls keep
their gradients.

Note (transformers): Hugging Face's BERT applies GELU through its own
``GELUActivation`` module and softmax through ``torch.nn.functional``, neither of which is
in Captum's list, and its tanh pooler is outside the classification path of smat's heads.
So Captum's DeepLift on a BERT encoder applies the rescale rule to *no* unit: its
attributions are :math:`(x - x') \odot \nabla f(x)` and its delta is not zero. smat's
registry entries ``deeplift`` / ``deeplift_shap`` on smat's encoders do the same (the
parity tests check it against Captum on all-MiniLM-L6-v2); a model written with
:func:`rescale` around its activations gets the rule there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int

from baselines._common import (
    Attribution,
    baseline_like,
    check_inputs,
    check_reduction,
    resolve_target,
    target_outputs,
)
from smat.explainers.base import reduce_tokens

__all__ = ["deeplift", "deeplift_shap", "rescale"]

EPS = 1e-10
"""Below this :math:`|\\Delta z|` the rescale rule falls back to the gradient (Captum's eps)."""


def rescale(g: Callable[[jax.Array], jax.Array], *, eps: float = EPS
            ) -> Callable[[jax.Array], jax.Array]:
    r"""An elementwise nonlinearity whose gradient follows DeepLift's rescale rule.

    The returned function computes ``g(z)`` exactly. Its derivative assumes that ``z``
    stacks the activations of inputs and of their references along axis 0 (the layout in
    which :func:`deeplift` evaluates ``f``): with halves :math:`z, z'`, both halves get the
    multiplier :math:`(g(z) - g(z')) / (z - z')`, or :math:`g'` where
    :math:`|z - z'| < \text{eps}` (Captum's ``nonlinear`` rule).

    Use it only inside functions given to :func:`deeplift` / :func:`deeplift_shap`; in
    ordinary gradients it would pair unrelated rows.

    Args:
      g: elementwise nonlinearity, e.g. ``jnp.tanh`` or ``jax.nn.relu``.
      eps: threshold on :math:`|\Delta z|`.

    Returns:
      ``g`` with the rescale-rule derivative.

    Raises:
      ValueError: (when differentiated) an odd leading axis, which cannot hold pairs.
    """

    @jax.custom_vjp
    def rescaled(z):
        return g(z)

    def forward(z):
        return g(z), z

    def backward(z, cotangent):
        if z.shape[0] % 2:
            raise ValueError(f"rescale expects inputs and references stacked on axis 0; got "
                             f"an odd leading axis {z.shape[0]}")
        inputs, references = jnp.split(z, 2)
        delta_in = jnp.concatenate([inputs - references] * 2)
        delta_out = jnp.concatenate([g(inputs) - g(references)] * 2)
        (plain,) = jax.vjp(g, z)[1](cotangent)
        small = jnp.abs(delta_in) < eps
        secant = delta_out / jnp.where(small, 1.0, delta_in).astype(z.dtype)
        return (jnp.where(small, plain, cotangent * secant),)

    rescaled.defvjp(forward, backward)
    return functools.wraps(g)(rescaled)


def _pair(a: jax.Array) -> jax.Array:
    return jnp.concatenate([a, a])


def _deeplift_attributions(forward, x, args, reference, target, *, multiply_by_inputs):
    """Attributions (B, T, E) of ``x`` against one reference row per example.

    ``forward(pair, *paired_args)`` runs on ``[x; reference]`` with every extra argument
    repeated (Captum's main-model hook); the gradient of the summed target outputs w.r.t.
    the stacked rows, restricted to the inputs' half, is the multiplier of Eq. 3.
    """
    paired_args = tuple(_pair(jnp.asarray(a)) for a in args)
    paired_target = _pair(target)
    multipliers = jax.grad(lambda rows: jnp.sum(
        target_outputs(forward, rows, paired_args, paired_target)))(
        jnp.concatenate([x, reference]))[: x.shape[0]]
    return (x - reference) * multipliers if multiply_by_inputs else multipliers


def _delta(forward, x, args, reference, target, attributions):
    gap = (target_outputs(forward, x, args, target)
           - target_outputs(forward, reference, args, target))  # (B,)
    return jnp.sum(attributions.reshape(x.shape[0], -1), axis=-1) - gap


def _check_references(references: jax.Array, x: jax.Array) -> None:
    if references.ndim != x.ndim or references.shape[1:] != x.shape[1:]:
        raise ValueError(f"baselines must be (R, {', '.join(map(str, x.shape[1:]))}) "
                         f"references; got shape {references.shape}")
    if references.shape[0] < 2:
        raise ValueError(f"baselines must hold a distribution of R >= 2 references "
                         f"(Captum's DeepLiftShap requires it); got R = {references.shape[0]}")


def _deeplift_shap_attributions(forward, x, args, references, target, *, multiply_by_inputs,
                                return_convergence_delta):
    """Mean attributions (B, T, E) over references (R, T, E) and the mean delta (B,)."""

    def one(reference):
        reference = jnp.broadcast_to(reference, x.shape)
        attr = _deeplift_attributions(forward, x, args, reference, target,
                                      multiply_by_inputs=multiply_by_inputs)
        delta = (_delta(forward, x, args, reference, target, attr)
                 if return_convergence_delta else jnp.zeros(x.shape[0], x.dtype))
        return attr, delta

    with jax.named_scope("deeplift_shap"):
        attrs, deltas = jax.lax.map(one, references)
    return jnp.mean(attrs, axis=0), jnp.mean(deltas, axis=0)


def deeplift(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    baselines: ArrayLike | None = None,
    target: Int[Array, " batch"] | int | None = None,
    multiply_by_inputs: bool = True,
    return_convergence_delta: bool = False,
    reduction: str = "sum",
) -> Attribution:
    r"""DeepLift attributions of the target output (Captum ``DeepLift``, rescale rule).

    .. math:: a = (x - x') \odot m_x, \qquad \delta = \sum a - (f(x)_c - f(x')_c)

    with multipliers :math:`m_x` back-propagated through ``f`` evaluated on
    ``[x; x']``: :func:`rescale`-wrapped nonlinearities use the secant slope, everything
    else its gradient (module docstring).

    Args:
      f: ``f(x (N, T, E), mask (N, T)) -> (N, C)`` JAX function that treats rows
        independently (it is called on ``2B`` rows).
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens (the references use it too).
      baselines: the reference :math:`x'`, broadcastable to ``x``; ``None`` = zeros.
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      multiply_by_inputs: multiply by ``x - x'`` (Captum's default); ``False`` returns
        the multipliers.
      return_convergence_delta: also compute :math:`\delta` (two extra forwards).
      reduction: token reduction name (default ``"sum"``, signed).

    Returns:
      :class:`~baselines.Attribution`; ``delta`` is ``(B,)`` when requested.

    Raises:
      ValueError / TypeError: bad shapes, baselines, target or reduction.

    References:
      Shrikumar et al, `Learning Important Features Through Propagating Activation
      Differences <https://arxiv.org/abs/1704.02685>`_, 2017, §3.5.2 (rescale rule).
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    reference = baseline_like(baselines, x)
    target = resolve_target(f, x, (mask,), target)
    with jax.named_scope("deeplift"):
        attr = _deeplift_attributions(f, x, (mask,), reference, target,
                                      multiply_by_inputs=multiply_by_inputs)
    delta = (_delta(f, x, (mask,), reference, target, attr) if return_convergence_delta
             else None)
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), delta, reduction)


def deeplift_shap(
    f: Callable[[jax.Array, jax.Array], jax.Array],
    x: Float[Array, "batch seq dim"] | ArrayLike,
    mask: ArrayLike,
    *,
    baselines: Float[Array, "refs seq dim"] | ArrayLike,
    target: Int[Array, " batch"] | int | None = None,
    multiply_by_inputs: bool = True,
    return_convergence_delta: bool = False,
    reduction: str = "sum",
) -> Attribution:
    r"""DeepLiftShap: DeepLift averaged over a distribution of references (Captum
    ``DeepLiftShap``).

    .. math:: a = \frac{1}{R} \sum_{r=1}^{R} \mathrm{DeepLift}(x; x'_r), \qquad
              \delta = \frac{1}{R} \sum_r \delta_r

    The references run one after another in a ``lax.map``, so memory is that of one
    DeepLift call; every example gets every reference.

    Args:
      f: ``f(x (N, T, E), mask (N, T)) -> (N, C)`` JAX function (rows independent).
      x: ``(B, T, E)`` attribution point.
      mask: ``(B, T)`` bool/int, nonzero at real tokens.
      baselines: ``(R, T, E)`` references, R >= 2 (Captum requires a distribution).
      target: output index per example ``(B,)`` or scalar; ``None`` = predicted class.
      multiply_by_inputs: multiply by ``x - x'_r`` before averaging.
      return_convergence_delta: also return the delta per example, the mean of its R
        per-reference deltas (Captum returns the B * R per-pair deltas themselves).
      reduction: token reduction name (default ``"sum"``, signed).

    Returns:
      :class:`~baselines.Attribution`; ``delta`` is ``(B,)`` (mean over references) when
      requested.

    Raises:
      ValueError / TypeError: fewer than 2 references, references of the wrong shape, bad
        inputs, target or reduction.
    """
    x, mask = jnp.asarray(x), jnp.asarray(mask)
    check_inputs(x, mask)
    check_reduction(reduction)
    references = jnp.asarray(baselines, x.dtype)
    _check_references(references, x)
    target = resolve_target(f, x, (mask,), target)
    attr, delta = _deeplift_shap_attributions(
        f, x, (mask,), references, target, multiply_by_inputs=multiply_by_inputs,
        return_convergence_delta=return_convergence_delta)
    delta = delta if return_convergence_delta else None
    return Attribution(attr, reduce_tokens(attr, mask, reduction=reduction), delta, reduction)
