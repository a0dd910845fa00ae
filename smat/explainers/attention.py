r"""The learned attention explainer of SMaT (Fernandes et al, 2022, **Eq. 11**).

For every head :math:`h` of the chosen layers (all layers concatenated, or one),

.. math::

  s^h = \frac{1}{|Q|} \sum_{i \in Q} (q^h_i)^\top K^h, \qquad
  E_\phi(x) = \operatorname{softmax}_t\Big(\sum_h \lambda_h s^h_t\Big), \qquad
  \lambda = \operatorname{NORMALIZE}(\phi),\ \phi \in \mathbb R^{H},

where :math:`Q` are the non-padded query positions (or only position 0 with
``query_pooling="cls"``) and padded keys are excluded from the softmax. The
query-pooled rows :math:`s^h` come from the model forward
(``EncoderOutput.pooled_attention_logits``) or from :func:`pool_attention` for a
user's own model.

Because softmax is invariant to adding a constant per row, pooled *log attention
probabilities* give exactly the same :math:`E_\phi(x)` as pooled logits, for any
:math:`\lambda` (each head's row differs by a per-(layer, example, head) constant).
"""

from __future__ import annotations

import dataclasses
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from smat.explainers.base import AbstractLearnedExplainer, Saliency
from smat.explainers.normalizers import NORMALIZERS, get_normalizer

__all__ = [
    "AttentionExplainer",
    "AttentionExplainerConfig",
    "AttentionExplainerParams",
    "apply",
    "head_weights",
    "init",
    "pool_attention",
]

_QUERY_POOLINGS = ("mean", "cls")
_INITS = ("uniform", "head_k")
_INPUTS = ("logits", "log_probs")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AttentionExplainerConfig:
    """Static structure of an attention explainer (hashable; safe as a jit static arg).

    Attributes:
      num_layers: number of layers ``L`` of the explained model.
      num_heads: heads per layer ``H``.
      layer: ``None`` for all layers (``L * H`` coefficients) or one layer index
        (negative counts from the end; ``-1`` = last layer; ``H`` coefficients).
      normalizer: NORMALIZE of Eq. 11: ``"sparsemax"`` (default), ``"entmax15"``,
        ``"softmax"`` or ``"identity"``.
      query_pooling: ``"mean"`` (over non-padded queries, Eq. 11) or ``"cls"`` (row 0).
        Recorded here; the pooling itself happens in the model forward or
        :func:`pool_attention`, which must use the same value.
      init: ``"uniform"`` (phi = 1/n: the mean over heads, i.e. the static
        all-heads explainer) or ``"head_k"`` (phi = one-hot at ``head``).
      head: flat head index ``layer * H + h`` (over the selected layers) for ``"head_k"``.
      input: what the pooled rows are: ``"logits"`` or ``"log_probs"`` (identical
        explanations after the softmax, see module docstring). Recorded only.
      temperature: the combined scores are divided by this before being returned,
        so ``to_distribution(apply(...))`` is :math:`E_\\phi(x)` at this temperature.
    """

    num_layers: int
    num_heads: int
    layer: int | None = None
    normalizer: str = "sparsemax"
    query_pooling: Literal["mean", "cls"] = "mean"
    init: Literal["uniform", "head_k"] = "uniform"
    head: int = 0
    input: Literal["logits", "log_probs"] = "logits"
    temperature: float = 1.0

    def __post_init__(self) -> None:
        for name in ("num_layers", "num_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"AttentionExplainerConfig.{name} must be an int >= 1; got {value!r}."
                )
        if self.layer is not None and not (-self.num_layers <= self.layer < self.num_layers):
            raise ValueError(
                f"AttentionExplainerConfig.layer={self.layer!r} is out of range for "
                f"num_layers={self.num_layers}; use None (all layers) or an int in "
                f"[{-self.num_layers}, {self.num_layers - 1}]."
            )
        if self.normalizer not in NORMALIZERS:
            raise ValueError(
                f"AttentionExplainerConfig.normalizer={self.normalizer!r} is unknown; valid "
                f"choices are {sorted(NORMALIZERS)}."
            )
        choices = {"query_pooling": _QUERY_POOLINGS, "init": _INITS, "input": _INPUTS}
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(
                    f"AttentionExplainerConfig.{name}={getattr(self, name)!r} is invalid; valid "
                    f"choices are {list(valid)}."
                )
        if not 0 <= self.head < self.num_coefficients:
            raise ValueError(
                f"AttentionExplainerConfig.head={self.head!r} must be in "
                f"[0, {self.num_coefficients - 1}] (flat index over the selected heads)."
            )
        if not self.temperature > 0:
            raise ValueError(
                f"AttentionExplainerConfig.temperature must be > 0; got {self.temperature!r}."
            )

    @property
    def num_coefficients(self) -> int:
        """Number of head coefficients: ``L * H`` for all layers, ``H`` for one layer."""
        return self.num_heads * (self.num_layers if self.layer is None else 1)


class AttentionExplainerParams(NamedTuple):
    """Learned parameters of the attention explainer.

    Attributes:
      phi: ``(n,)`` float32 unnormalized head coefficients, ``n = num_coefficients``,
        flattened layer-major (index ``layer * H + head`` over the selected layers).
    """

    phi: Float[Array, " coefficients"]


def init(rng: jax.Array | None, config: AttentionExplainerConfig) -> AttentionExplainerParams:
    """Initial head coefficients.

    ``"uniform"``: :math:`\\phi_h = 1/n`, so sparsemax / softmax / entmax15 / identity
    all give :math:`\\lambda_h = 1/n` — the mean over heads, which makes the explainer
    start as the static attention explainer (paper §5). ``"head_k"``: one-hot at
    ``config.head`` (sparsemax and entmax15 then select that head only).

    Args:
      rng: unused (the inits are deterministic); accepted for the ``init(rng, ...)`` protocol.
      config: the explainer config.

    Returns:
      :class:`AttentionExplainerParams` with ``phi`` of shape ``(num_coefficients,)``.
    """
    del rng
    n = config.num_coefficients
    if config.init == "uniform":
        phi = jnp.full((n,), 1.0 / n, dtype=jnp.float32)
    else:
        phi = jax.nn.one_hot(config.head, n, dtype=jnp.float32)
    return AttentionExplainerParams(phi=phi)


def head_weights(
    params: AttentionExplainerParams, *, config: AttentionExplainerConfig
) -> Float[Array, "layers heads"]:
    """The normalized head coefficients :math:`\\lambda` arranged per layer.

    Args:
      params: explainer parameters.
      config: the explainer config.

    Returns:
      ``(L_sel, H)`` coefficients, ``L_sel = L`` for all layers, ``1`` for one layer.
    """
    lam = get_normalizer(config.normalizer)(params.phi)  # (n,)
    return lam.reshape((-1, config.num_heads))


def apply(
    params: AttentionExplainerParams,
    pooled: Float[Array, "layers batch heads seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
    *,
    config: AttentionExplainerConfig,
) -> Saliency:
    """Explain a batch from query-pooled attention rows (paper **Eq. 11**).

    Returns the pre-softmax combination :math:`\\sum_h \\lambda_h s^h / \\tau`;
    :func:`smat.explainers.to_distribution` of the result is :math:`E_\\phi(x)`,
    the softmax over non-padded keys.

    Args:
      params: :class:`AttentionExplainerParams` (``phi (n,)``).
      pooled: ``(L, B, H, T)`` pooled attention logits (or log-probabilities) per
        layer, example, head and key; values at padded keys are ignored (may be -inf).
      mask: ``(B, T)`` bool or int, nonzero at real tokens.
      config: the explainer config (keyword-only, static).

    Returns:
      :class:`Saliency` with scores ``(B, T)`` float32 (0 at padded keys) and the mask.

    Raises:
      ValueError: if shapes do not match ``(L, B, H, T)`` / ``(B, T)`` or the config,
        or ``phi`` has the wrong length.
    """
    pooled = jnp.asarray(pooled, dtype=jnp.float32)
    mask = jnp.asarray(mask).astype(bool)
    expected = (config.num_layers, mask.shape[0], config.num_heads, mask.shape[-1])
    if pooled.ndim != 4 or mask.ndim != 2 or pooled.shape != expected:
        raise ValueError(
            f"apply expects pooled (L, B, H, T) = {expected} for config num_layers="
            f"{config.num_layers}, num_heads={config.num_heads} and mask (B, T) "
            f"{mask.shape}; got pooled {pooled.shape}."
        )
    if params.phi.shape != (config.num_coefficients,):
        raise ValueError(
            f"params.phi must have shape ({config.num_coefficients},) for this config; "
            f"got {params.phi.shape}."
        )
    with jax.named_scope("attention_explainer"):
        if config.layer is not None:
            pooled = pooled[config.layer][None]  # (1, B, H, T)
        rows = jnp.where(mask[None, :, None, :], pooled, 0.0)  # (L, B, H, T), pads -> 0
        lam = head_weights(params, config=config)  # (L, H)
        scores = jnp.einsum("lh,lbht->bt", lam, rows) / config.temperature  # (B, T)
    return Saliency(jnp.where(mask, scores, 0.0), mask)


def pool_attention(
    attention: Float[Array, "layers batch heads seq seq"] | ArrayLike,
    mask: Bool[Array, "batch seq"] | ArrayLike,
    *,
    query_pooling: Literal["mean", "cls"] = "mean",
    kind: Literal["logits", "log_probs", "probs"] = "logits",
) -> Float[Array, "layers batch heads seq"]:
    """Query-pool full attention matrices into the rows :math:`s^h` of Eq. 11.

    For a user's own model: pass attention logits, log-probabilities, or
    probabilities such as Hugging Face ``output_attentions=True`` tensors stacked to
    ``(L, B, H, T, T)``. Probabilities are turned into log-probabilities first
    (clipped at the smallest normal float so padded keys stay finite).

    Args:
      attention: ``(L, B, H, T_q, T_k)`` per-layer attention.
      mask: ``(B, T)`` bool or int, nonzero at real tokens.
      query_pooling: ``"mean"`` over non-padded queries, or ``"cls"`` (query row 0).
      kind: what ``attention`` holds: ``"logits"``, ``"log_probs"`` or ``"probs"``.

    Returns:
      ``(L, B, H, T_k)`` pooled rows; values at padded keys are not meaningful.

    Raises:
      ValueError: unknown ``query_pooling`` / ``kind`` or mismatched shapes.
    """
    if query_pooling not in _QUERY_POOLINGS:
        raise ValueError(f"query_pooling={query_pooling!r} is invalid; valid choices are "
                         f"{list(_QUERY_POOLINGS)}.")
    kinds = ("logits", "log_probs", "probs")
    if kind not in kinds:
        raise ValueError(f"kind={kind!r} is invalid; valid choices are {list(kinds)}.")
    attention = jnp.asarray(attention, dtype=jnp.float32)
    mask = jnp.asarray(mask).astype(bool)
    if attention.ndim != 5 or mask.ndim != 2 or attention.shape[1] != mask.shape[0] or (
        attention.shape[3:] != (mask.shape[1], mask.shape[1])
    ):
        raise ValueError(
            f"pool_attention expects attention (L, B, H, T, T) and mask (B, T); got "
            f"{attention.shape} and {mask.shape}."
        )
    if kind == "probs":
        attention = jnp.log(jnp.maximum(attention, jnp.finfo(jnp.float32).tiny))
    if query_pooling == "cls":
        return attention[:, :, :, 0, :]  # (L, B, H, T)
    rows = jnp.where(mask[None, :, None, :, None], attention, 0.0)  # pad queries -> 0
    count = jnp.maximum(jnp.sum(mask, axis=-1), 1).astype(jnp.float32)  # (B,)
    return jnp.sum(rows, axis=3) / count[None, :, None, None]  # (L, B, H, T)


class AttentionExplainer(AbstractLearnedExplainer):
    """Thin facade binding an :class:`AttentionExplainerConfig` to :func:`init` / :func:`apply`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> explainer = AttentionExplainer(AttentionExplainerConfig(num_layers=2, num_heads=2))
      >>> params = explainer.init(jax.random.key(0))
      >>> pooled = jnp.zeros((2, 1, 2, 3))
      >>> explainer.apply(params, pooled, jnp.ones((1, 3), bool)).scores.shape
      (1, 3)
    """

    def __init__(self, config: AttentionExplainerConfig) -> None:
        if not isinstance(config, AttentionExplainerConfig):
            raise TypeError(
                "AttentionExplainer needs an AttentionExplainerConfig; got "
                f"{type(config).__name__}."
            )
        self.config = config

    def init(self, rng: jax.Array | None) -> AttentionExplainerParams:
        """See :func:`init`."""
        return init(rng, self.config)

    def apply(
        self,
        params: AttentionExplainerParams,
        pooled: Float[Array, "layers batch heads seq"] | ArrayLike,
        mask: Bool[Array, "batch seq"] | ArrayLike,
    ) -> Saliency:
        """See :func:`apply`."""
        return apply(params, pooled, mask, config=self.config)
