"""Pooling (ScalarMix, CLS, mean) and the sequence classification / regression head.

The paper's students and teachers put a linear head on a *scalar mix* of all hidden
states (Fernandes et al., 2022, §4 "we also use scalar mixing [Peters et al., 2018]"):

.. math::
    \\bar h_\\ell = \\frac{\\sum_t m_t h_{\\ell,t}}{\\sum_t m_t}, \\qquad
    \\mathrm{pool} = \\gamma \\sum_{\\ell=0}^{L} \\mathrm{softmax}(s)_\\ell \\, \\bar h_\\ell

with mixing coefficients ``s`` initialised to 0 (uniform mix) and ``gamma`` to 1.

References:
  Peters et al, `Deep contextualized word representations
  <https://arxiv.org/abs/1802.05365>`_, 2018, Eq. 1.
  Fernandes et al, `Learning to Scaffold <https://arxiv.org/abs/2204.10810>`_, 2022.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from smat.data.images import pixels_of_patch_tokens
from smat.models.layers import Dense, EncoderOutput, dropout, fold_key
from smat.models.text import TextConfig, TextEncoder
from smat.models.vision import ViTConfig, ViTEncoder

Pooling = Literal["scalar_mix", "cls", "mean"]
Task = Literal["classification", "regression"]
Head = Literal["linear", "electra", "roberta"]

POOLINGS = ("scalar_mix", "cls", "mean")
TASKS = ("classification", "regression")
# What maps the pooled vector to the logits: one dense layer (smat's default), or the
# hidden layer of the SMaT reference's heads, Hugging Face's ELECTRA head (dense, exact GELU,
# dropout, dense: its IMDB / SST-2 models) and RoBERTa head (the same with tanh: MLQE's XLM-R).
HEADS = ("linear", "electra", "roberta")
_HIDDEN_ACTIVATIONS = {"electra": lambda x: jax.nn.gelu(x, approximate=False),
                       "roberta": jnp.tanh}

#: Encoder class for each config type (explicit mapping, no duck typing).
ENCODERS: dict[type, type[nnx.Module]] = {TextConfig: TextEncoder, ViTConfig: ViTEncoder}


class ClassifierOutput(NamedTuple):
    """Output of :class:`SequenceClassifier`.

    Attributes:
      logits: (B, C) class logits, or (B, 1) regression predictions.
      encoder: the encoder's :class:`EncoderOutput`.
    """

    logits: Float[Array, "batch labels"]
    encoder: EncoderOutput


def masked_mean(
    hidden: Float[Array, "batch seq hidden"], mask: Bool[Array, "batch seq"]
) -> Float[Array, "batch hidden"]:
    """Mean over real tokens: ``sum_t m_t h_t / max(sum_t m_t, 1)``.

    Args:
      hidden: (B, T, D) token representations.
      mask: (B, T) bool, True on real tokens.

    Returns:
      (B, D) masked token mean (zeros for an all-padding row).
    """
    weights = mask.astype(hidden.dtype)  # (B, T)
    count = jnp.maximum(jnp.sum(weights, axis=1), 1.0)  # (B,)
    return jnp.einsum("btd,bt->bd", hidden, weights) / count[:, None]


def cls_pool(hidden: Float[Array, "batch seq hidden"]) -> Float[Array, "batch hidden"]:
    """The first token's representation, (B, T, D) -> (B, D)."""
    return hidden[:, 0, :]


class ScalarMix(nnx.Module):
    """Softmax-weighted mix of the masked token-means of every hidden state, times gamma.

    Args:
      num_states: number of mixed hidden states (L + 1 for an L-layer encoder).
    """

    def __init__(self, num_states: int):
        if num_states < 1:
            raise ValueError(f"num_states must be >= 1, got {num_states}")
        self.coefficients = nnx.Param(jnp.zeros((num_states,), jnp.float32))
        self.gamma = nnx.Param(jnp.ones((), jnp.float32))

    def __call__(
        self,
        hidden_states: Sequence[Float[Array, "batch seq hidden"]],
        mask: Bool[Array, "batch seq"],
    ) -> Float[Array, "batch hidden"]:
        """Mixes ``hidden_states`` (S arrays of shape (B, T, D)) into (B, D).

        Raises:
          ValueError: the number of hidden states differs from ``num_states``.
        """
        num_states = self.coefficients[...].shape[0]
        if len(hidden_states) != num_states:
            raise ValueError(
                f"ScalarMix was built for {num_states} hidden states, got {len(hidden_states)}"
            )
        means = jnp.stack([masked_mean(h, mask) for h in hidden_states])  # (S, B, D)
        weights = jax.nn.softmax(self.coefficients[...])  # (S,)
        return self.gamma[...] * jnp.einsum("s,sbd->bd", weights, means)


class SequenceClassifier(nnx.Module):
    """Encoder + pooling + dropout + linear head, for classification or 1-output regression.

    Args:
      encoder_config: a :class:`TextConfig` or :class:`ViTConfig`; picks the encoder.
      num_labels: C; >= 2 for classification, exactly 1 for regression.
      task: "classification" or "regression".
      pooling: "scalar_mix" (paper default), "cls" (first token of the last layer) or
        "mean" (masked mean of the last layer).
      head: "linear" (dropout, then one dense layer to the logits), or the SMaT
        reference's "electra" (dropout, dense D -> D, exact GELU, dropout, dense D -> C:
        Hugging Face's ELECTRA classification head) or "roberta" (the same with tanh).
      rngs: initialisation RNGs.

    Raises:
      ValueError: unknown task / pooling, or ``num_labels`` inconsistent with ``task``.
      TypeError: unsupported config type.
    """

    def __init__(self, encoder_config: TextConfig | ViTConfig, *, num_labels: int,
                 task: Task = "classification", pooling: Pooling = "scalar_mix",
                 head: Head = "linear", rngs: nnx.Rngs):
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if task == "classification" and num_labels < 2:
            raise ValueError(f"classification needs num_labels >= 2, got {num_labels}")
        if task == "regression" and num_labels != 1:
            raise ValueError(f"regression needs num_labels == 1, got {num_labels}")
        if type(encoder_config) not in ENCODERS:
            raise TypeError(
                f"encoder_config must be one of {[c.__name__ for c in ENCODERS]}, "
                f"got {type(encoder_config).__name__}"
            )
        self.task = task
        self.pooling = pooling
        self.head = head
        self.num_labels = num_labels
        self.dropout_rate = encoder_config.hidden_dropout
        self.encoder = ENCODERS[type(encoder_config)](encoder_config, rngs=rngs)
        self.scalar_mix = (
            ScalarMix(encoder_config.num_layers + 1) if pooling == "scalar_mix" else None
        )
        hidden = encoder_config.hidden_size
        self.head_hidden = Dense(hidden, hidden, rngs=rngs) if head != "linear" else None
        self.classifier = Dense(hidden, num_labels, rngs=rngs)

    def __call__(
        self,
        input_ids: Int[ArrayLike, "batch seq"] | None = None,
        *,
        attention_mask: Int[ArrayLike, "batch seq"] | Bool[ArrayLike, "batch seq"] | None = None,
        token_type_ids: Int[ArrayLike, "batch seq"] | None = None,
        inputs_embeds: Float[ArrayLike, "batch seq embed"] | None = None,
        embedding_output: Float[ArrayLike, "batch seq hidden"] | None = None,
        pixel_values: Float[ArrayLike, "batch channels height width"] | None = None,
        dropout_rng: jax.Array | None = None,
        attention: str = "full",
        query_pooling: str = "mean",
    ) -> ClassifierOutput:
        """Encodes and classifies a batch.

        Text encoders take ``input_ids`` / ``inputs_embeds`` / ``embedding_output`` and a
        required ``attention_mask``; ViT takes ``pixel_values`` (or ``inputs_embeds`` /
        ``embedding_output``, or patch tokens as ``input_ids``, when its segment ids are
        ignored) and an optional mask over [CLS] + patches. The other keyword
        arguments are those of the encoder. The encoder gets ``fold_in(dropout_rng, 0)``,
        the head dropout ``fold_in(dropout_rng, 1)``.

        Returns:
          :class:`ClassifierOutput` with logits (B, C).

        Raises:
          ValueError: inputs of the wrong modality for the encoder, missing text mask.
        """
        encoder_key, head_key = fold_key(dropout_rng, 0), fold_key(dropout_rng, 1)
        common: dict[str, Any] = dict(
            inputs_embeds=inputs_embeds, embedding_output=embedding_output,
            dropout_rng=encoder_key, attention=attention, query_pooling=query_pooling,
        )
        if isinstance(self.encoder, TextEncoder):
            if pixel_values is not None:
                raise ValueError("pixel_values given to a text model; pass input_ids")
            if attention_mask is None:
                raise ValueError("attention_mask (B, T) is required for text models")
            out = self.encoder(input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids, **common)
        else:
            if input_ids is not None:
                # patch tokens (smat.data.PatchLayout): the rows the training path batches
                if pixel_values is not None or jnp.ndim(input_ids) != 3:
                    raise ValueError(
                        "a vision model reads pixel_values (B, C, H, W) or patch tokens "
                        "(B, 1 + patches, C * patch^2) as input_ids, not token ids")
                pixel_values = pixels_of_patch_tokens(
                    jnp.asarray(input_ids), channels=self.encoder.config.num_channels)
            elif token_type_ids is not None:
                raise ValueError("token_type_ids given to a vision model; pass pixel_values")
            out = self.encoder(pixel_values, attention_mask=attention_mask, **common)
        batch, seq = out.last_hidden_state.shape[:2]
        if attention_mask is None:
            mask = jnp.ones((batch, seq), bool)
        else:
            mask = jnp.asarray(attention_mask).astype(bool)
        with jax.named_scope("head"):
            if self.scalar_mix is not None:
                pooled = self.scalar_mix(out.hidden_states, mask)  # (B, D)
            elif self.pooling == "cls":
                pooled = cls_pool(out.last_hidden_state)  # (B, D)
            else:
                pooled = masked_mean(out.last_hidden_state, mask)  # (B, D)
            logits = self.classify(pooled, dropout_rng=head_key)  # (B, C)
        return ClassifierOutput(logits=logits, encoder=out)

    def classify(self, pooled: Float[Array, "batch hidden"], *,
                 dropout_rng: jax.Array | None = None) -> Float[Array, "batch labels"]:
        """The head on pooled vectors (B, D) -> logits (B, C); dropout only with a key (the
        second dropout of the reference heads draws from ``fold_in(dropout_rng, 1)``)."""
        pooled = dropout(pooled, rate=self.dropout_rate, key=dropout_rng)
        if self.head_hidden is not None:
            pooled = _HIDDEN_ACTIVATIONS[self.head](self.head_hidden(pooled))
            pooled = dropout(pooled, rate=self.dropout_rate, key=fold_key(dropout_rng, 1))
        return self.classifier(pooled)
