"""Every explainer smat knows, by name: one table of computations and properties.

The command line, the students, ROAR, the evaluation reports and the demo all resolve
explainer names here. A name is either a static explainer of :data:`STATIC` (the
Captum-equivalent gradient methods and the attention baselines of ``baselines``), one of
its :data:`ALIASES`, or the folder of a learned explainer saved by ``smat train-student``
(``smat.load_explainer``). Adding a static explainer is one :class:`ExplainerSpec` entry in
this file: its ``scores`` function receives the model and a batch and returns (B, T) scores
(0 at padding); everything else reads the properties.

Student settings (:data:`STUDENT_SETTINGS`) are the static explainers a student can learn
from, plus ``"none"`` (no explanation loss) and ``"smat"`` (the teacher explainer learned
by SMaT), each with the paper's default beta (:data:`DEFAULT_BETA`, §5).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

import baselines
from smat.data import pixels_of_patch_tokens
from smat.models import functional
from smat.store.explainer_store import LoadedExplainer
from smat.store.explanation_file import is_explanation_file

NO_EXPLAINER = "none"
LEARNED = "smat"
FIXED_HEADS = "attention_heads"


class BatchInputs(NamedTuple):
    """One batch as every registry explainer reads it, built once per call of
    :func:`static_scores` (what an explainer does not read, XLA drops).

    Attributes:
      graphdef, params: the model (``smat.models.functional.split``); None for a bare
        ``f`` (:meth:`of_embeddings`).
      input_ids, attention_mask, token_type_ids: (B, T) the batch; for images
        (:meth:`of_images`) input_ids and token_type_ids are None and attention_mask is
        the (B, patches) patch mask.
      target: (B,) the class the gradient and perturbation explainers attribute (None: the
        predicted one).
      f, x, mask: the model as ``f(x, mask) -> (B, C)`` at the word embeddings x (B, T, E)
        (``baselines.attribution_inputs``).
      keys: (B,) one PRNG key per row, ``fold_in(PRNGKey(seed), row's data-set index)``.
      ig_steps, ig_method: integrated gradients' quadrature.
      pixel_values: (B, C, H, W) images of a ViT (None for text): positions are patches.
    """

    graphdef: Any
    params: Any
    input_ids: Any
    attention_mask: Any
    token_type_ids: Any
    target: jax.Array | None
    f: Callable[[jax.Array, jax.Array], jax.Array]
    x: jax.Array
    mask: jax.Array
    keys: jax.Array | None
    ig_steps: int
    ig_method: str
    pixel_values: jax.Array | None = None

    @classmethod
    def of_batch(cls, graphdef, params, input_ids, attention_mask, token_type_ids,
                 target=None, *, ig_steps: int = 50, ig_method: str = "gausslegendre",
                 seed: int = 0, row_ids: jax.Array | None = None) -> BatchInputs:
        f, x, mask = baselines.attribution_inputs(graphdef, params, input_ids=input_ids,
                                                  attention_mask=attention_mask,
                                                  token_type_ids=token_type_ids)
        return cls(graphdef, params, input_ids, attention_mask, token_type_ids, target, f, x,
                   mask, _row_keys(seed, row_ids, x.shape[0]), ig_steps, ig_method)

    @classmethod
    def of_images(cls, graphdef, params, pixel_values, target=None, *, ig_steps: int = 50,
                  ig_method: str = "gausslegendre", seed: int = 0,
                  row_ids: jax.Array | None = None) -> BatchInputs:
        """A ViT's batch: f, x, mask at the patch embeddings
        (``baselines.patch_attribution_inputs``), so every position is a patch."""
        f, x, mask = baselines.patch_attribution_inputs(graphdef, params,
                                                        pixel_values=pixel_values)
        return cls(graphdef, params, None, mask, None, target, f, x, mask,
                   _row_keys(seed, row_ids, x.shape[0]), ig_steps, ig_method, pixel_values)

    def pooled_attention(self) -> tuple[jax.Array, jax.Array]:
        """The query-pooled attention logits (L, B, H, T) over the explained positions and
        their (B, T) mask: tokens, or a ViT's patches with the [CLS] key left out
        (``baselines.patch_attention_inputs``)."""
        if self.pixel_values is not None:
            return baselines.patch_attention_inputs(self.graphdef, self.params,
                                                    pixel_values=self.pixel_values)
        out = functional.apply(self.graphdef, self.params, self.input_ids,
                               attention_mask=self.attention_mask,
                               token_type_ids=self.token_type_ids, attention="pooled")
        return out.encoder.pooled_attention_logits, jnp.asarray(self.attention_mask) != 0

    @classmethod
    def of_embeddings(cls, f, x, mask, target=None, *, ig_steps: int = 50,
                      ig_method: str = "gausslegendre") -> BatchInputs:
        """A bare ``f(x, mask)`` (no model, no tokens): enough for the explainers that only
        differentiate or perturb f (``ExplainerSpec.attackable``)."""
        return cls(None, None, None, mask, None, target, f, x, mask, None, ig_steps,
                   ig_method)


def _row_keys(seed: int, row_ids, batch: int) -> jax.Array:
    """One key per row: fold_in(PRNGKey(seed), the row's data-set index (default 0..B-1))."""
    rows = jnp.arange(batch) if row_ids is None else jnp.asarray(row_ids)
    return jax.vmap(lambda row: jax.random.fold_in(jax.random.PRNGKey(seed), row))(rows)


def _gradient_l2(b: BatchInputs) -> jax.Array:
    # the L2 reduction keeps its gradient finite at zero (smat.explainers.base), which the
    # attacks differentiate through
    return baselines.saliency(b.f, b.x, b.mask, target=b.target, reduction="l2").saliency.scores


def _input_x_gradient(b: BatchInputs) -> jax.Array:
    return baselines.input_x_gradient(b.f, b.x, b.mask, target=b.target).saliency.scores


def _integrated_gradients(b: BatchInputs) -> jax.Array:
    return baselines.integrated_gradients(b.f, b.x, b.mask, target=b.target,
                                          n_steps=b.ig_steps,
                                          method=b.ig_method).saliency.scores


def _deeplift(b: BatchInputs) -> jax.Array:
    return baselines.deeplift(b.f, b.x, b.mask, target=b.target).saliency.scores


def _deeplift_shap(b: BatchInputs) -> jax.Array:
    pad_id = nnx.merge(b.graphdef, b.params).encoder.config.pad_token_id
    pad = baselines.token_baseline(b.graphdef, b.params, input_ids=b.input_ids[:1],
                                   attention_mask=b.attention_mask[:1], token_id=pad_id)
    references = jnp.concatenate([jnp.zeros_like(pad), pad])  # (2, T, E): zero and PAD
    return baselines.deeplift_shap(b.f, b.x, b.mask, baselines=references,
                                   target=b.target).saliency.scores


def _feature_ablation(b: BatchInputs) -> jax.Array:
    return baselines.feature_ablation(b.f, b.x, b.mask, target=b.target).saliency.scores


def _occlusion(b: BatchInputs) -> jax.Array:
    return baselines.occlusion(b.f, b.x, b.mask, window=min(3, b.x.shape[1]), stride=1,
                               target=b.target).saliency.scores


SMOOTHGRAD_SAMPLES, SMOOTHGRAD_NOISE = 10, 0.1
"""SmoothGrad's noisy copies and noise level (Gaussian stdevs at the word embeddings)."""


def _smoothgrad(b: BatchInputs) -> jax.Array:
    noise = jax.vmap(lambda key: jax.random.normal(
        key, (SMOOTHGRAD_SAMPLES, *b.x.shape[1:]), b.x.dtype))(b.keys)  # (B, S, T, E)
    return baselines.noise_tunnel(b.f, b.x, b.mask, noise=jnp.swapaxes(noise, 0, 1),
                                  explainer="saliency", nt_samples=SMOOTHGRAD_SAMPLES,
                                  stdevs=SMOOTHGRAD_NOISE,
                                  target=b.target, reduction="l2").saliency.scores


GRADIENT_SHAP_SAMPLES = 20
"""GradientShap's draws per row (zero baseline, no input noise: expected gradients)."""


def _gradient_shap(b: BatchInputs) -> jax.Array:
    alphas = jax.vmap(lambda key: jax.random.uniform(key, (GRADIENT_SHAP_SAMPLES,),
                                                     b.x.dtype))(b.keys)  # (B, S)
    draws = (jnp.zeros((GRADIENT_SHAP_SAMPLES, b.x.shape[0]), jnp.int32), alphas.T,
             jnp.zeros((GRADIENT_SHAP_SAMPLES, *b.x.shape), b.x.dtype))
    return baselines.gradient_shap(b.f, b.x, b.mask, n_samples=GRADIENT_SHAP_SAMPLES,
                                   draws=draws, target=b.target).saliency.scores


SURROGATE_SAMPLES = 200
"""Coalitions per row of Lime and KernelShap (the full and empty ones included for the
latter)."""


def _lime(b: BatchInputs) -> jax.Array:
    samples = jax.vmap(lambda key: baselines.lime_coalitions(key, SURROGATE_SAMPLES,
                                                             b.x.shape[1]))(b.keys)  # (B, N, T)
    return baselines.lime(b.f, b.x, b.mask, samples=jnp.swapaxes(samples, 0, 1),
                          n_samples=SURROGATE_SAMPLES, target=b.target).saliency.scores


def _kernel_shap(b: BatchInputs) -> jax.Array:
    samples = jax.vmap(lambda key, tokens: baselines.kernel_shap_coalitions(
        key, SURROGATE_SAMPLES - 2, b.x.shape[1], tokens))(b.keys, jnp.asarray(b.mask, bool))
    return baselines.kernel_shap(b.f, b.x, b.mask, samples=jnp.swapaxes(samples, 0, 1),
                                 n_samples=SURROGATE_SAMPLES, target=b.target).saliency.scores


def _pooled_attention(explain: Callable):
    def scores(b: BatchInputs) -> jax.Array:
        return explain(*b.pooled_attention()).scores
    return scores


def _attention_rollout(b: BatchInputs) -> jax.Array:
    out = functional.apply(b.graphdef, b.params, b.input_ids, attention_mask=b.attention_mask,
                           token_type_ids=b.token_type_ids, attention="full")
    return baselines.attention_rollout(out.encoder.attention_logits,
                                       jnp.asarray(b.attention_mask) != 0).scores


def _random(b: BatchInputs) -> jax.Array:
    mask = jnp.asarray(b.attention_mask) != 0
    return jax.vmap(lambda key, row: baselines.random_saliency(key, row[None]).scores[0])(
        b.keys, mask)


LEAK_SCORE = 10.0
"""The score ``label_leak`` gives the one token it marks (softmax mass about 1 - n e^-10)."""


def _label_leak(b: BatchInputs) -> jax.Array:
    # the positive control of the leakage checks: the mass says which class is explained
    # (the target, else the predicted one) and nothing about the text: class c marks the
    # (c + 1)-th real token (the first word after [CLS] for class 0), or the last one
    mask = jnp.asarray(b.attention_mask) != 0
    target = (jnp.argmax(b.f(b.x, b.mask), axis=-1) if b.target is None
              else jnp.asarray(b.target))
    position = jnp.minimum(target + 1, jnp.sum(mask, axis=1) - 1)  # (B,)
    marked = jnp.arange(mask.shape[1])[None] == position[:, None]
    return jnp.where(marked & mask, LEAK_SCORE, 0.0).astype(jnp.float32)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExplainerSpec:
    """One static explainer: how to compute it and what it needs.

    Attributes:
      name: the registry name.
      scores: ``(BatchInputs) -> (B, T)`` scores, 0 at padding; traced inside
        :func:`static_scores`' jit.
      summary: one line for ``--help`` and the README.
      needs_gradients: differentiates the model (explains ``target``, default the predicted
        class).
      needs_full_attention: needs the (layers, B, heads, T, T) attention logits, not only
        the query-pooled rows (memory grows with T^2).
      kind: what the scores are, which decides how they are drawn (:data:`SCORE_KINDS`):
        "attribution" (signed evidence for and against the target), "magnitude" (a
        non-negative importance) or "attention" (pooled attention logits, whose softmax
        over the row's tokens is the explanation, Eq. 11).
      student_beta: the explanation-loss weight of a student learning from it (paper §5),
        or None when it is no student setting.
      teacher_temperature: a student learning from it sees its scores divided by this
        before the softmax of the explanation loss (the authors' explainer defaults: 0.1
        for input x gradient, 0.5 for integrated gradients, 1 otherwise).
      batch_independent: its scores for a row need the row's data-set index (``row_ids``)
        rather than the batch's other rows.
      full_width: its random draws depend on the batch's width too, so it explains uncut
        batches (every row padded to the data set's length).
      attackable: differentiable in the embeddings and needs nothing but ``f``, x, mask,
        target and IG's settings (:meth:`BatchInputs.of_embeddings`): the attacks on
        explanations (``smat.evaluation.attacks``) move it.
      images: explains a ViT's patches (:func:`static_patch_scores`); False for those
        that need tokens (a PAD embedding) or a token order (windows, rollout over [CLS]).
    """

    name: str
    scores: Callable[..., jax.Array]
    summary: str
    needs_gradients: bool
    needs_full_attention: bool = False
    kind: str = "magnitude"
    student_beta: float | None = None
    teacher_temperature: float = 1.0
    batch_independent: bool = False
    full_width: bool = False
    attackable: bool = False
    images: bool = True


SCORE_KINDS = ("attribution", "magnitude", "attention")
"""What an explainer's scores are (:attr:`ExplainerSpec.kind`): pages draw an attribution
on a diverging scale around zero, a magnitude on a sequential scale from zero, and
attention as the distribution it stands for (the softmax over the row's tokens) on a
sequential scale from zero."""


STATIC: dict[str, ExplainerSpec] = {spec.name: spec for spec in (
    ExplainerSpec(name="gradient", scores=_gradient_l2, needs_gradients=True, student_beta=0.2,
                  attackable=True,
                  summary="L2 norm of the gradient at each word embedding (SMaT 'Gradient "
                          "L2'; Captum Saliency)"),
    ExplainerSpec(name="input_x_gradient", scores=_input_x_gradient, needs_gradients=True,
                  kind="attribution", student_beta=0.2, teacher_temperature=0.1, attackable=True,
                  summary="embedding x gradient, summed over the embedding (Captum "
                          "InputXGradient)"),
    ExplainerSpec(name="integrated_gradients", scores=_integrated_gradients,
                  needs_gradients=True, kind="attribution", student_beta=0.2,
                  teacher_temperature=0.5, attackable=True,
                  summary="integrated gradients from a zero baseline, summed over the "
                          "embedding (Captum IntegratedGradients)"),
    # From a zero baseline on smat's encoders DeepLift equals input x gradient, so a student
    # sees it at input x gradient's temperature.
    ExplainerSpec(name="deeplift", scores=_deeplift, needs_gradients=True, kind="attribution",
                  student_beta=0.2, teacher_temperature=0.1,
                  summary="DeepLift (rescale rule) from a zero baseline, summed over the "
                          "embedding; on smat's encoders no unit gets the rule, as in Captum "
                          "on BERT (Captum DeepLift)"),
    ExplainerSpec(name="deeplift_shap", scores=_deeplift_shap, needs_gradients=True,
                  kind="attribution", student_beta=0.2, teacher_temperature=0.1, images=False,
                  summary="DeepLift averaged over two references, zero and PAD embeddings, "
                          "summed over the embedding (Captum DeepLiftShap)"),
    ExplainerSpec(name="smoothgrad", scores=_smoothgrad, needs_gradients=True,
                  student_beta=0.2,
                  batch_independent=True, full_width=True,
                  summary=f"gradient L2 averaged over {SMOOTHGRAD_SAMPLES} noisy copies of "
                          f"the word embeddings, stdevs {SMOOTHGRAD_NOISE}, noise seeded per "
                          "row (Captum NoiseTunnel(Saliency), smoothgrad)"),
    ExplainerSpec(name="gradient_shap", scores=_gradient_shap, needs_gradients=True,
                  student_beta=0.2,
                  kind="attribution", batch_independent=True,
                  summary=f"GradientShap with a zero baseline: embedding x gradient at "
                          f"{GRADIENT_SHAP_SAMPLES} uniform points of the segment from the "
                          "baseline, averaged, summed over the embedding; points seeded per "
                          "row (Captum GradientShap, stdevs 0)"),
    ExplainerSpec(name="feature_ablation", scores=_feature_ablation, needs_gradients=False,
                  student_beta=0.2,
                  kind="attribution",
                  summary="drop of the target logit when a token's word embedding is "
                          "zeroed (Captum FeatureAblation over tokens)"),
    ExplainerSpec(name="lime", scores=_lime, needs_gradients=False,
                  student_beta=0.2, kind="attribution",
                  batch_independent=True,
                  summary=f"Lime over tokens: {SURROGATE_SAMPLES} coalitions of each row's "
                          "own tokens (each zeroed with probability 1/2, seeded per row), "
                          "cosine kernel, weighted least squares (Captum Lime on the row "
                          "alone, linear surrogate)"),
    ExplainerSpec(name="kernel_shap", scores=_kernel_shap, needs_gradients=False,
                  student_beta=0.2,
                  kind="attribution", batch_independent=True,
                  summary=f"KernelShap over tokens: {SURROGATE_SAMPLES} coalitions of each "
                          "row's own tokens from Captum's sampler (seeded per row), "
                          "constrained to sum to f(x) - f(zero embeddings) (Captum "
                          "KernelShap on the row alone)"),
    ExplainerSpec(name="occlusion", scores=_occlusion, needs_gradients=False,
                  student_beta=0.2, kind="attribution", images=False,
                  summary="the same drop for windows of 3 tokens, stride 1, averaged over "
                          "the windows covering each token (Captum Occlusion)"),
    ExplainerSpec(name="attention_all", scores=_pooled_attention(baselines.all_layers_attention),
                  needs_gradients=False, kind="attention", student_beta=5.0,
                  summary="query-mean attention logits averaged over every head of every "
                          "layer (Eq. 11, uniform weights)"),
    ExplainerSpec(name="attention_last",
                  scores=_pooled_attention(baselines.last_layer_attention),
                  needs_gradients=False, kind="attention", student_beta=5.0,
                  summary="the same over the heads of the last layer"),
    ExplainerSpec(name="attention_rollout", scores=_attention_rollout, needs_gradients=False,
                  needs_full_attention=True, images=False,
                  summary="attention rollout (Abnar & Zuidema 2020) of the full attention"),
    ExplainerSpec(name="label_leak", scores=_label_leak, needs_gradients=False,
                  student_beta=5.0, images=False,
                  summary="a positive control, not an explanation: all mass on the (c+1)-th "
                          "token when the model's class is c, nothing about the text (the "
                          "leak the probe and the shuffled-text students must see)"),
    ExplainerSpec(name="random", scores=_random, needs_gradients=False,
                  batch_independent=True, full_width=True,
                  summary="seeded uniform scores per row (the baseline every metric needs)"),
)}
"""The static explainers, by name."""

ALIASES = {"attention": "attention_all"}
"""Other names for registry entries (Madsen et al.'s ROAR calls all-layer attention
'attention')."""

STUDENT_SETTINGS = (NO_EXPLAINER,
                    *(name for name, spec in STATIC.items() if spec.student_beta is not None),
                    FIXED_HEADS, LEARNED)
"""What a student can learn from: nothing, a static explainer, static attention over given
head coefficients (``StudentTrainConfig.head_weights``: SMaT's explainer with its
coefficients frozen, the ablations of what SMaT learns), or the SMaT explainer."""

DEFAULT_BETA = {NO_EXPLAINER: 0.0, LEARNED: 5.0, FIXED_HEADS: 5.0,
                **{name: spec.student_beta for name, spec in STATIC.items()
                   if spec.student_beta is not None}}
"""Paper §5: beta = 5 for attention explainers, 0.2 for gradient explainers, 0 without;
the perturbation explainers (ablation, occlusion, Lime, KernelShap) take 0.2 as well."""


ENSEMBLES = {"ensemble": "abs", "ensemble_shift": "shift"}
"""Ensemble name prefixes and how each normalizes its members' scores (see
:func:`ensemble_scores`): ``ensemble:a+b`` and ``ensemble_shift:a+b``."""


def ensemble_scores(members: Sequence[jax.Array], mask: jax.Array, *,
                    normalization: str = "abs") -> jax.Array:
    """The mean of the members' scores, each first normalized to sum to 1 over a row's
    real tokens (the Oxford thesis §3.4). Signed scores cannot sum to 1 as they are:
    ``"abs"`` takes absolute values first (importance regardless of direction),
    ``"shift"`` subtracts the row's minimum over real tokens (the least important token
    gets 0, direction kept). A row whose shifted or absolute scores are all 0 contributes 0.

    Args:
      members: (B, T) scores of each member explainer.
      mask: (B, T), nonzero at real tokens; padding gets 0.
      normalization: "abs" or "shift".

    Raises:
      ValueError: an unknown normalization or no members.
    """
    if normalization not in ("abs", "shift"):
        raise ValueError(f"ensemble normalization must be 'abs' or 'shift', got "
                         f"{normalization!r}")
    if not members:
        raise ValueError("an ensemble needs at least one member")
    real = jnp.asarray(mask) != 0

    def normalized(scores):
        scores = jnp.where(real, scores, 0.0)
        if normalization == "abs":
            scores = jnp.abs(scores)
        else:
            low = jnp.min(jnp.where(real, scores, jnp.inf), axis=1, keepdims=True)
            scores = jnp.where(real, scores - low, 0.0)
        total = jnp.sum(scores, axis=1, keepdims=True)
        return jnp.where(total > 0, scores / jnp.where(total > 0, total, 1.0), 0.0)

    return jnp.mean(jnp.stack([normalized(m) for m in members]), axis=0)


@functools.lru_cache(maxsize=64)
def _ensemble_spec(name: str) -> ExplainerSpec:
    prefix, _, rest = name.partition(":")
    members = tuple(canonical(m) for m in rest.split("+")) if rest else ()
    bad = [m for m in members if m not in STATIC]
    if not members or bad:
        problem = f"{bad} are not" if bad else "none given"
        raise ValueError(f"ensemble {name!r}: members must be static registry names joined "
                         f"by '+' ({', '.join(STATIC)}); {problem}")
    normalization = ENSEMBLES[prefix]
    specs = [STATIC[m] for m in members]

    def scores(b: BatchInputs) -> jax.Array:
        return ensemble_scores([s.scores(b) for s in specs], b.attention_mask,
                               normalization=normalization)

    return ExplainerSpec(
        name=name, scores=scores, needs_gradients=any(s.needs_gradients for s in specs),
        needs_full_attention=any(s.needs_full_attention for s in specs),
        batch_independent=any(s.batch_independent for s in specs),
        full_width=any(s.full_width for s in specs),
        images=all(s.images for s in specs),
        summary=f"mean of {', '.join(members)}, each normalized to sum 1 ({normalization})")


def is_ensemble(name: str | Path) -> bool:
    """Whether `name` has an ensemble prefix (``ensemble:`` or ``ensemble_shift:``)."""
    return str(name).partition(":")[0] in ENSEMBLES and ":" in str(name)


def names_help() -> str:
    """The registry names for a ``--help`` line."""
    return (", ".join(STATIC) + " (alias " + ", ".join(f"{a}={n}" for a, n in ALIASES.items())
            + "), an ensemble such as ensemble:integrated_gradients+lime (or ensemble_shift:"
            "...), the folder of a saved learned explainer or, for explain, faithfulness and "
            "agreement, a .json / .jsonl file of explanations computed elsewhere")


def canonical(name: str) -> str:
    """The registry name behind an alias (other names unchanged)."""
    return ALIASES.get(name, name)


def spec(name: str) -> ExplainerSpec:
    """The :class:`ExplainerSpec` of a static explainer name, alias or ensemble.

    Raises:
      ValueError: `name` is not in the registry (the message lists it), or an ensemble
        member is not a static registry name.
    """
    if is_ensemble(name):
        return _ensemble_spec(str(name))
    try:
        return STATIC[canonical(name)]
    except KeyError:
        raise ValueError(f"unknown explainer {name!r}; choose from {names_help()}") from None


def score_kind(name: str | Path) -> str | None:
    """The :data:`SCORE_KINDS` entry of an explainer name: a static one's declared kind,
    "attention" for the folder of a saved learned explainer, None for anything else, such
    as a file of explanations computed elsewhere (its scores say nothing of what they
    are)."""
    if is_static(name):
        return spec(str(name)).kind
    return "attention" if Path(name).is_dir() else None


def is_static(name: str | Path) -> bool:
    """Whether `name` is a static registry name, alias or ensemble (else: a learned-explainer
    folder or a file of explanations computed elsewhere)."""
    return canonical(str(name)) in STATIC or is_ensemble(name)


def check_explainers(names: Sequence[str | Path], *, files: bool = False) -> None:
    """Every name is a static explainer, an existing learned-explainer folder or, with
    `files`, a file of explanations computed elsewhere
    (:mod:`smat.store.explanation_file`).

    Raises:
      ValueError: an unknown name (listing the registry), an ensemble member that is not a
        static name, an explanation file where none is read, or no names.
    """
    if not names:
        raise ValueError(f"name at least one explainer: {names_help()}")
    for name in filter(is_ensemble, names):
        spec(name)  # an unknown member raises, naming it
    given = [str(n) for n in names if is_explanation_file(n)]
    if given and not files:
        raise ValueError(f"{given} hold explanations computed elsewhere: `smat explain`, "
                         "`faithfulness` and `agreement` read them, this job computes its own")
    unknown = [str(n) for n in names
               if not is_static(n) and not Path(n).is_dir() and not is_explanation_file(n)]
    if unknown:
        raise ValueError(f"unknown explainers {unknown}: not registry names and not folders; "
                         f"choose from {names_help()}")


@functools.partial(jax.jit, static_argnames=("graphdef", "name", "ig_steps", "ig_method"))
def static_scores(graphdef, params, input_ids, attention_mask, token_type_ids, target=None, *,
                  name: str, ig_steps: int = 50, ig_method: str = "gausslegendre",
                  seed: int = 0, row_ids: jax.Array | None = None) -> jax.Array:
    """(B, T) scores of the static explainer `name` on a batch (0 at padding), one jitted call.

    Gradient explainers attribute `target` (B,) (default: the predicted class) at the word
    embeddings: "gradient" is the L2 norm of the gradient per token (the SMaT paper's
    Gradient L2), "input_x_gradient" and "integrated_gradients" (zero baseline, `ig_method`
    quadrature) sum over the embedding dimension. Attention explainers use the query-mean-
    pooled attention logits (Eq. 11 with uniform head weights) or the attention rollout of
    the full logits. "random" draws row i of the batch from the key
    ``fold_in(PRNGKey(seed), row_ids[i])`` (default ``row_ids = 0..B-1``): with the rows'
    indices in the data set, its random scores do not depend on how it is cut into batches
    (the draws do depend on the batch's width T).

    A ViT's patch tokens (``smat.data.PatchLayout``, ``input_ids`` of rank 3) are
    explained as :func:`static_patch_scores` explains its images, with a 0 at the [CLS]
    slot, so the scores line up with the tokens.

    Raises:
      ValueError: an unknown `name` (at trace time), or for patch tokens one that does not
        explain patches.
    """
    if jnp.ndim(input_ids) == 3:
        patches = static_patch_scores(graphdef, params, pixels_of_patch_tokens(input_ids),
                                      target, name=name, ig_steps=ig_steps,
                                      ig_method=ig_method, seed=seed, row_ids=row_ids)
        return jnp.pad(patches, ((0, 0), (1, 0)))
    return spec(name).scores(BatchInputs.of_batch(
        graphdef, params, input_ids, attention_mask, token_type_ids, target,
        ig_steps=ig_steps, ig_method=ig_method, seed=seed, row_ids=row_ids))


def check_image_explainers(names: Sequence[str | Path]) -> None:
    """Raise unless every static name among `names` explains image patches
    (``ExplainerSpec.images``; learned explainers always do).

    Raises:
      ValueError: naming the first explainer that explains tokens only, and the choices.
    """
    for name in filter(is_static, names):
        if not spec(str(name)).images:
            raise ValueError(f"{name} explains tokens, not image patches; for images choose "
                             f"from {sorted(n for n, s in STATIC.items() if s.images)}")


@functools.partial(jax.jit, static_argnames=("graphdef", "name", "ig_steps", "ig_method"))
def static_patch_scores(graphdef, params, pixel_values, target=None, *, name: str,
                        ig_steps: int = 50, ig_method: str = "gausslegendre", seed: int = 0,
                        row_ids: jax.Array | None = None) -> jax.Array:
    """(B, patches) scores of the static explainer `name` on a ViT's images, one jitted
    call: the gradient and perturbation explainers attribute at the patch embeddings, the
    attention explainers read the pooled attention rows over the patches (the [CLS] key
    left out), as :func:`static_scores` does over tokens.

    Raises:
      ValueError: an unknown `name`, or one that does not explain patches
        (``ExplainerSpec.images``), at trace time.
    """
    check_image_explainers([name])
    return spec(name).scores(BatchInputs.of_images(
        graphdef, params, pixel_values, target, ig_steps=ig_steps, ig_method=ig_method,
        seed=seed, row_ids=row_ids))


@functools.partial(jax.jit, static_argnames=("graphdef", "explainer_config"))
def learned_patch_scores(graphdef, params, pixel_values, explainer_params, *,
                         explainer_config) -> jax.Array:
    """(B, patches) scores of a saved learned attention explainer (Eq. 11) on a ViT's
    images, over the patches' pooled attention rows."""
    pooled, mask = baselines.patch_attention_inputs(graphdef, params,
                                                    pixel_values=pixel_values)
    return LoadedExplainer(explainer_params, explainer_config)(pooled, mask).scores


@functools.partial(jax.jit, static_argnames=("graphdef", "explainer_config"))
def learned_scores(graphdef, params, input_ids, attention_mask, token_type_ids,
                   explainer_params, *, explainer_config) -> jax.Array:
    """(B, T) scores of a saved learned attention explainer (Eq. 11) on a batch."""
    out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, attention="pooled")
    explainer = LoadedExplainer(explainer_params, explainer_config)
    return explainer(out.encoder.pooled_attention_logits, attention_mask).scores
