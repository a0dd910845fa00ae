"""Adversarial attacks on explanations (Ghorbani et al., 2019, the top-k attack; the Oxford
thesis §2.3 and §3.5 with its constrained objective), for the gradient explainers.

A perturbation delta of the input embeddings, ``||delta||_inf <= epsilon``, is optimised by
projected gradient ascent inside one jitted ``lax.while_loop`` over a batch, differentiating
through the explainer (second order). With a = the explainer's scores and T_k the original
top-k tokens of each row:

- D(delta) = - sum_{i in T_k} a(x + delta)_i (push the originally most important tokens down);
- "unconstrained": maximize D; a step that would change a row's predicted class is rejected
  for that row (its delta stays);
- "constrained" (the thesis's objective): maximize alpha * D - beta * (p(x) - p(x + delta))^2,
  p = the probability of the originally predicted class.

Defaults are the thesis's: alpha = beta = 1, epsilon = 2, k = floor(0.15 * length) (at least
1), 500 steps, learning rate 0.1 halved every 200 steps, and an early stop once no row's delta
moved by more than 1e-5 (L2) for 20 steps. Measures per row: RankChange (the share of the k
top positions whose token changed; [12, 3, 7] -> [3, 15, 7] gives 2/3), TopkSumChange
(sum over T_k of a(x) - a(x + delta)) and ProbChange (|p(x) - p(x + delta)|).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

import baselines
from smat import registry

OBJECTIVES = ("unconstrained", "constrained")


ATTACKABLE = tuple(name for name, spec in registry.STATIC.items() if spec.attackable)
"""The differentiable explainers an attack can move (the thesis's three; the registry's
``attackable`` entries)."""


@functools.cache
def _explain(name: str) -> Callable[..., jax.Array]:
    """The registry explainer `name` on a bare ``f(x, mask)``, one function object per name
    (the attack loops are compiled per function)."""
    scores = registry.spec(name).scores

    def explain(f, x, mask, target, ig_steps):
        return scores(registry.BatchInputs.of_embeddings(f, x, mask, target,
                                                         ig_steps=ig_steps))

    return explain


class AttackResult(NamedTuple):
    """Per-row outcome of :func:`attack` (numpy arrays)."""

    delta: np.ndarray  # (B, T, E)
    original: np.ndarray  # (B, T) scores at x
    adversarial: np.ndarray  # (B, T) scores at x + delta
    k: np.ndarray  # (B,) top-k size per row
    rank_change: np.ndarray  # (B,)
    topk_sum_change: np.ndarray  # (B,)
    prob_change: np.ndarray  # (B,)
    steps: int  # optimisation steps taken


def top_k_per_row(num_tokens: ArrayLike, *, k: int | None = None,
                  fraction: float = 0.15) -> np.ndarray:
    """k per row: `k` for every row, or ``max(1, floor(fraction * tokens))``.

    Raises:
      ValueError: k < 1, k above a row's token count, or a fraction outside (0, 1].
    """
    num_tokens = np.asarray(num_tokens)
    if k is not None:
        if k < 1 or (num_tokens < k).any():
            raise ValueError(f"k must lie in [1, the tokens of every row]; got k={k} for rows "
                             f"of {int(num_tokens.min())} to {int(num_tokens.max())} tokens")
        return np.full(num_tokens.shape, k)
    if not 0 < fraction <= 1:
        raise ValueError(f"the top-k fraction must lie in (0, 1], got {fraction}")
    return np.maximum(1, np.floor(fraction * num_tokens)).astype(int)


def _ranked(scores, show):
    """Token indices by descending score, tokens outside `show` last."""
    return jnp.argsort(jnp.where(show, -scores, jnp.inf), axis=-1, stable=True)


def rank_change(original: ArrayLike, adversarial: ArrayLike, show: ArrayLike,
                k: ArrayLike) -> jax.Array:
    """(B,) share of the k top positions whose token differs between the two rankings."""
    original, adversarial = jnp.asarray(original), jnp.asarray(adversarial)
    show = jnp.asarray(show).astype(bool)
    k = jnp.asarray(k)
    differ = _ranked(original, show) != _ranked(adversarial, show)
    within = jnp.arange(original.shape[1])[None] < k[:, None]
    return jnp.sum(differ & within, axis=1).astype(original.dtype) / k.astype(original.dtype)


def topk_sum_change(original: ArrayLike, adversarial: ArrayLike, show: ArrayLike,
                    k: ArrayLike) -> jax.Array:
    """(B,) sum over the original top-k tokens of original minus adversarial scores."""
    original, adversarial = jnp.asarray(original), jnp.asarray(adversarial)
    return jnp.sum(jnp.where(_top_mask(original, show, k), original - adversarial, 0.0), axis=1)


def _top_mask(scores, show, k):
    show = jnp.asarray(show).astype(bool)
    ranks = jnp.argsort(_ranked(scores, show), axis=-1)  # rank of each token
    return show & (ranks < jnp.asarray(k)[:, None])


_STATIC = ("explain", "objective", "ig_steps")  # the step budget and patience are traced


def _optimise(f, explain, x, mask, show, k, *, objective, epsilon, alpha, beta, steps,
              learning_rate, ig_steps, tolerance, patience):
    original_logits = f(x, mask)
    target = jnp.argmax(original_logits, axis=-1)
    p0 = jnp.take_along_axis(jax.nn.softmax(original_logits), target[:, None], axis=1)[:, 0]
    original = explain(f, x, mask, target, ig_steps)
    top = _top_mask(original, show, k)
    movable = mask[..., None].astype(x.dtype)

    def probability(delta):
        logits = f(x + delta, mask)
        return jax.nn.softmax(logits), logits

    def objective_fn(delta):
        scores = explain(f, x + delta, mask, target, ig_steps)
        d = -jnp.sum(jnp.where(top, scores, 0.0), axis=1)
        if objective == "constrained":
            probs, _ = probability(delta)
            p = jnp.take_along_axis(probs, target[:, None], axis=1)[:, 0]
            d = alpha * d - beta * (p0 - p) ** 2
        return jnp.sum(d)  # rows are independent: the sum's gradient is each row's

    def cond(state):
        t, _, quiet = state
        return (t < steps) & (quiet < patience)

    def body(state):
        t, delta, quiet = state
        rate = learning_rate * jnp.power(0.5, (t // 200).astype(x.dtype))
        proposal = jnp.clip(delta + rate * jax.grad(objective_fn)(delta) * movable,
                            -epsilon, epsilon)
        if objective == "unconstrained":
            _, logits = probability(proposal)
            keep = jnp.argmax(logits, axis=-1) == target
            proposal = jnp.where(keep[:, None, None], proposal, delta)
        moved = jnp.sqrt(jnp.sum((proposal - delta) ** 2, axis=(1, 2)))
        quiet = jnp.where(jnp.all(moved < tolerance), quiet + 1, 0)
        return t + 1, proposal, quiet

    t, delta, _ = jax.lax.while_loop(cond, body, (jnp.int32(0), jnp.zeros_like(x),
                                                  jnp.int32(0)))
    probs, _ = probability(delta)
    p = jnp.take_along_axis(probs, target[:, None], axis=1)[:, 0]
    adversarial = explain(f, x + delta, mask, target, ig_steps)
    return delta, original, adversarial, jnp.abs(p0 - p), t


_optimise_f = jax.jit(_optimise, static_argnames=("f", *_STATIC))


@functools.partial(jax.jit, static_argnames=("graphdef", *_STATIC))
def _optimise_model(graphdef, params, input_ids, attention_mask, token_type_ids, show, k,
                    **settings):
    f, x, mask = baselines.attribution_inputs(graphdef, params, input_ids=input_ids,
                                              attention_mask=attention_mask,
                                              token_type_ids=token_type_ids)
    return _optimise(f, settings.pop("explain"), x, mask, show & mask, k, **settings)


def _checked(explainer, objective, epsilon, steps, learning_rate):
    if explainer not in ATTACKABLE:
        raise ValueError(f"attacks need a differentiable explainer; {explainer!r} is not one "
                         f"of {sorted(ATTACKABLE)}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose from {OBJECTIVES}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0 (the L-infinity radius), got {epsilon}")
    if steps < 1 or learning_rate < 0:
        raise ValueError(f"steps must be >= 1 and learning_rate >= 0; got {steps} and "
                         f"{learning_rate}")
    return _explain(explainer)


def _result(outputs, show, ks) -> AttackResult:
    delta, original, adversarial, prob_change, t = outputs
    return AttackResult(np.asarray(delta), np.asarray(original), np.asarray(adversarial), ks,
                        np.asarray(rank_change(original, adversarial, show, ks)),
                        np.asarray(topk_sum_change(original, adversarial, show, ks)),
                        np.asarray(prob_change), int(t))


def attack_model(graphdef, params, input_ids: ArrayLike, attention_mask: ArrayLike,
                 token_type_ids: ArrayLike, *, explainer: str, show: ArrayLike | None = None,
                 objective: str = "unconstrained", epsilon: float = 2.0, k: int | None = None,
                 k_fraction: float = 0.15, alpha: float = 1.0, beta: float = 1.0,
                 steps: int = 500, learning_rate: float = 0.1, ig_steps: int = 20,
                 tolerance: float = 1e-5, patience: int = 20) -> AttackResult:
    """:func:`attack` on a smat model's word embeddings (one compiled loop per batch shape).

    Raises:
      ValueError: as :func:`attack`.
    """
    explain = _checked(explainer, objective, epsilon, steps, learning_rate)
    mask = jnp.asarray(attention_mask).astype(bool)
    show = mask if show is None else jnp.asarray(show).astype(bool) & mask
    ks = top_k_per_row(np.asarray(show.sum(axis=1)), k=k, fraction=k_fraction)
    outputs = _optimise_model(graphdef, params, jnp.asarray(input_ids), attention_mask,
                              token_type_ids, show, jnp.asarray(ks), explain=explain,
                              objective=objective, epsilon=epsilon, alpha=alpha, beta=beta,
                              steps=steps, learning_rate=learning_rate, ig_steps=ig_steps,
                              tolerance=tolerance, patience=patience)
    return _result(outputs, show, ks)


def attack(f: Callable[[jax.Array, jax.Array], jax.Array], x: ArrayLike, mask: ArrayLike, *,
           explainer: str, show: ArrayLike | None = None, objective: str = "unconstrained",
           epsilon: float = 2.0, k: int | None = None, k_fraction: float = 0.15,
           alpha: float = 1.0, beta: float = 1.0, steps: int = 500,
           learning_rate: float = 0.1, ig_steps: int = 20, tolerance: float = 1e-5,
           patience: int = 20) -> AttackResult:
    """Attack the explanations of a batch (module doc) and measure what moved.

    Args:
      f: ``f(x, mask) -> logits`` (``baselines.attribution_inputs``); pass the same function
        object for every batch so the loop compiles once.
      x: (B, T, E) input embeddings; mask: (B, T) real tokens (the perturbed ones).
      explainer: one of :data:`ATTACKABLE`.
      show: (B, T) the tokens ranked for the top-k (default `mask`; e.g. without [CLS]).
      objective: "unconstrained" or "constrained".
      epsilon: the L-infinity radius of delta.
      k / k_fraction: a fixed k, or k = max(1, floor(k_fraction * tokens)) per row.

    Raises:
      ValueError: an unknown explainer or objective, epsilon <= 0, steps < 1, a negative
        learning rate, or a k outside a row's tokens.
    """
    explain = _checked(explainer, objective, epsilon, steps, learning_rate)
    mask = jnp.asarray(mask).astype(bool)
    show = mask if show is None else jnp.asarray(show).astype(bool) & mask
    ks = top_k_per_row(np.asarray(show.sum(axis=1)), k=k, fraction=k_fraction)
    outputs = _optimise_f(f=f, explain=explain, x=jnp.asarray(x), mask=mask, show=show,
                          k=jnp.asarray(ks), objective=objective, epsilon=epsilon,
                          alpha=alpha, beta=beta, steps=steps, learning_rate=learning_rate,
                          ig_steps=ig_steps, tolerance=tolerance, patience=patience)
    return _result(outputs, show, ks)
