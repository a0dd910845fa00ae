"""BERT-family text encoder (BERT / MiniLM, ELECTRA, RoBERTa / XLM-R) in Flax NNX.

One module covers the three Hugging Face architectures; they differ only in the
embedding block:

* BERT / MiniLM: word + absolute position (``0..T-1``) + token type embeddings,
  LayerNorm.
* ELECTRA: the same in an ``embedding_size`` space, then a linear projection to
  ``hidden_size`` when the two differ.
* RoBERTa / XLM-R: position ids start at ``pad_token_id + 1`` for real tokens and
  padding positions get ``pad_token_id`` (``position_offset = pad_token_id + 1``).

The transformer layers are post-LN (Vaswani et al., 2017; Devlin et al., 2019),
stored stacked along a leading layer axis and run with ``jax.lax.scan``. Every
forward exposes what the explainers need (design §1): all hidden states, the
pre-softmax attention logits ``q.k / sqrt(d_head)`` *before* the padding bias,
optionally only their query-pooled rows (memory-light at T=512), the word
embeddings (``inputs_embeds``) and the embedding-layer output
(``embedding_output``), the two attribution points of gradient explainers.

Dropout is a pure function of ``dropout_rng``: ``None`` is evaluation mode; a key
turns dropout on, one ``fold_in`` per site, no RNG state in the module.

References:
  Devlin et al, `BERT <https://arxiv.org/abs/1810.04805>`_, 2019.
  Clark et al, `ELECTRA <https://arxiv.org/abs/2003.10555>`_, 2020.
  Liu et al, `RoBERTa <https://arxiv.org/abs/1907.11692>`_, 2019.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from smat.models.layers import (
    ACTIVATIONS,
    AttentionMode,
    Dense,
    EncoderOutput,
    LayerNorm,
    QueryPooling,
    SelfAttention,
    check_attention_args,
    dropout,
    encoder_output,
    fold_key,
    normal_param,
    run_layers,
    stack_layers,
)

ARCHITECTURES = ("bert", "electra", "roberta")

#: ``model_type`` values of HF ``config.json`` accepted by :meth:`TextConfig.from_hf`.
HF_TEXT_MODEL_TYPES: Mapping[str, str] = {
    "bert": "bert",
    "electra": "electra",
    "roberta": "roberta",
    "xlm-roberta": "roberta",
}


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_rate(name: str, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextConfig:
    """Hyperparameters of a BERT-family encoder (hashable, usable as a static argument).

    Attributes:
      architecture: "bert" (also MiniLM), "electra" or "roberta" (also XLM-R).
      vocab_size: V, rows of the word embedding table.
      hidden_size: D.
      num_layers: L.
      num_heads: H; must divide ``hidden_size``.
      intermediate_size: F, width of the feed-forward block.
      max_position_embeddings: rows of the position table.
      type_vocab_size: rows of the token-type table (1 for RoBERTa).
      layer_norm_eps: LayerNorm epsilon.
      hidden_act: one of :data:`ACTIVATIONS` ("gelu" is the exact erf GELU).
      pad_token_id: id of the padding token.
      embedding_size: E, width of the embedding tables (ELECTRA may have E != D; a linear
        projection maps E -> D). Must equal ``hidden_size`` for bert / roberta.
      position_offset: first position id of real tokens; 0 for bert / electra and
        ``pad_token_id + 1`` for roberta.
      hidden_dropout: dropout rate on embeddings and sub-block outputs.
      attention_dropout: dropout rate on attention probabilities.
    """

    architecture: str = "bert"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    pad_token_id: int = 0
    embedding_size: int | None = None
    position_offset: int = 0
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"architecture must be one of {ARCHITECTURES}, got {self.architecture!r}"
            )
        if self.embedding_size is None:
            object.__setattr__(self, "embedding_size", self.hidden_size)
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size",
                     "embedding_size"):
            _check_positive(name, getattr(self, name))
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads "
                f"({self.num_heads})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {self.hidden_act!r}"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id must be in [0, vocab_size={self.vocab_size}), "
                f"got {self.pad_token_id}"
            )
        if self.architecture != "electra" and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"embedding_size ({self.embedding_size}) may differ from hidden_size "
                f"({self.hidden_size}) only for architecture='electra', "
                f"got architecture={self.architecture!r}"
            )
        expected_offset = self.pad_token_id + 1 if self.architecture == "roberta" else 0
        if self.position_offset != expected_offset:
            raise ValueError(
                f"position_offset must be {expected_offset} for architecture="
                f"{self.architecture!r} (pad_token_id={self.pad_token_id}), "
                f"got {self.position_offset}"
            )
        if self.position_offset >= self.max_position_embeddings:
            raise ValueError(
                f"position_offset ({self.position_offset}) must be smaller than "
                f"max_position_embeddings ({self.max_position_embeddings})"
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")
        _check_rate("hidden_dropout", self.hidden_dropout)
        _check_rate("attention_dropout", self.attention_dropout)

    @property
    def head_dim(self) -> int:
        """K = hidden_size / num_heads."""
        return self.hidden_size // self.num_heads

    @property
    def max_length(self) -> int:
        """Longest sequence the position table supports."""
        return self.max_position_embeddings - self.position_offset

    @classmethod
    def tiny(cls, *, architecture: str = "bert", **overrides: Any) -> TextConfig:
        """A 2-layer, 32-wide random config for unit tests (any architecture)."""
        pad = overrides.get("pad_token_id", 1 if architecture == "roberta" else 0)
        fields: dict[str, Any] = dict(
            architecture=architecture, vocab_size=101, hidden_size=32, num_layers=2,
            num_heads=4, intermediate_size=37, max_position_embeddings=64,
            type_vocab_size=1 if architecture == "roberta" else 2, pad_token_id=pad,
            embedding_size=16 if architecture == "electra" else 32,
            position_offset=pad + 1 if architecture == "roberta" else 0,
        )
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def all_minilm_l6_v2(cls) -> TextConfig:
        """sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers x 12 heads, D=384)."""
        return cls(
            architecture="bert", vocab_size=30522, hidden_size=384, num_layers=6,
            num_heads=12, intermediate_size=1536, max_position_embeddings=512,
            type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="gelu", pad_token_id=0,
        )

    @classmethod
    def from_hf(cls, config: Mapping[str, Any]) -> TextConfig:
        """Builds a config from a Hugging Face ``config.json`` dictionary.

        Args:
          config: the parsed ``config.json`` of a bert / electra / roberta / xlm-roberta
            checkpoint.

        Returns:
          The matching :class:`TextConfig` (dropout rates taken from the checkpoint).

        Raises:
          ValueError: unsupported ``model_type`` or architecture options (relative
            position embeddings, decoder / cross-attention), or a missing field.
        """
        model_type = config.get("model_type")
        if model_type not in HF_TEXT_MODEL_TYPES:
            raise ValueError(
                f"unsupported model_type {model_type!r} (architectures="
                f"{config.get('architectures')}); smat's text encoder supports "
                f"{sorted(HF_TEXT_MODEL_TYPES)}"
            )
        position_type = config.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ValueError(
                f"position_embedding_type={position_type!r} is not supported; only 'absolute'"
            )
        for flag in ("is_decoder", "add_cross_attention"):
            if config.get(flag, False):
                raise ValueError(f"{flag}=True is not supported: smat encoders are bidirectional")
        required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size")
        missing = [name for name in required if name not in config]
        if missing:
            raise ValueError(f"config.json lacks required fields {missing}")
        architecture = HF_TEXT_MODEL_TYPES[model_type]
        pad = int(config.get("pad_token_id", 1 if architecture == "roberta" else 0))
        return cls(
            architecture=architecture,
            vocab_size=int(config["vocab_size"]),
            hidden_size=int(config["hidden_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            max_position_embeddings=int(config.get("max_position_embeddings", 512)),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            hidden_act=str(config.get("hidden_act", "gelu")),
            pad_token_id=pad,
            embedding_size=int(config.get("embedding_size", config["hidden_size"])),
            position_offset=pad + 1 if architecture == "roberta" else 0,
            hidden_dropout=float(config.get("hidden_dropout_prob", 0.1)),
            attention_dropout=float(config.get("attention_probs_dropout_prob", 0.1)),
        )



class TextLayer(nnx.Module):
    """One post-LN transformer layer (HF ``BertLayer``): attention, add & norm, FFN, add & norm."""

    def __init__(self, config: TextConfig, *, rngs: nnx.Rngs):
        d, f = config.hidden_size, config.intermediate_size
        self.attention = SelfAttention(d, config.num_heads,
                                       dropout_rate=config.attention_dropout, rngs=rngs)
        self.attention_norm = LayerNorm(d, eps=config.layer_norm_eps)
        self.intermediate = Dense(d, f, rngs=rngs)
        self.output = Dense(f, d, rngs=rngs)
        self.output_norm = LayerNorm(d, eps=config.layer_norm_eps)
        self.hidden_act = config.hidden_act
        self.dropout_rate = config.hidden_dropout

    def __call__(self, h, *, mask, dropout_rng):
        with jax.named_scope("attention"):
            attended, logits = self.attention(h, mask=mask, dropout_rng=fold_key(dropout_rng, 0))
            attended = dropout(attended, rate=self.dropout_rate, key=fold_key(dropout_rng, 1))
            h = self.attention_norm(h + attended)  # (B, T, D)
        with jax.named_scope("ffn"):
            inner = ACTIVATIONS[self.hidden_act](self.intermediate(h))  # (B, T, F)
            out = dropout(self.output(inner), rate=self.dropout_rate, key=fold_key(dropout_rng, 2))
            h = self.output_norm(h + out)  # (B, T, D)
        return h, logits


class TextEncoder(nnx.Module):
    """BERT / MiniLM, ELECTRA and RoBERTa / XLM-R encoder with explainer hooks.

    Args:
      config: a :class:`TextConfig`.
      rngs: initialisation RNGs (weights ~ N(0, 0.02), biases 0, LayerNorm 1/0 as in HF).
    """

    def __init__(self, config: TextConfig, *, rngs: nnx.Rngs):
        if not isinstance(config, TextConfig):
            raise TypeError(f"config must be a TextConfig, got {type(config).__name__}")
        self.config = config
        e = config.embedding_size
        self.word_embeddings = normal_param(rngs, (config.vocab_size, e))
        self.position_embeddings = normal_param(rngs, (config.max_position_embeddings, e))
        self.token_type_embeddings = normal_param(rngs, (config.type_vocab_size, e))
        self.embeddings_norm = LayerNorm(e, eps=config.layer_norm_eps)
        self.embeddings_project = (
            Dense(e, config.hidden_size, rngs=rngs) if e != config.hidden_size else None
        )
        self.layers = stack_layers(lambda r: TextLayer(config, rngs=r), config.num_layers, rngs)

    def _check_inputs(self, input_ids, attention_mask, token_type_ids, inputs_embeds,
                      embedding_output):
        given = [name for name, value in (("input_ids", input_ids),
                                          ("inputs_embeds", inputs_embeds),
                                          ("embedding_output", embedding_output))
                 if value is not None]
        if len(given) != 1:
            raise ValueError(
                "pass exactly one of input_ids, inputs_embeds, embedding_output; got "
                f"{given or 'none'}"
            )
        cfg = self.config
        mask_shape = jnp.shape(attention_mask)
        if len(mask_shape) != 2:
            raise ValueError(f"attention_mask must be (batch, seq), got shape {mask_shape}")
        expected = {
            "input_ids": mask_shape,
            "inputs_embeds": (*mask_shape, cfg.embedding_size),
            "embedding_output": (*mask_shape, cfg.hidden_size),
        }
        for name, value in (("input_ids", input_ids), ("inputs_embeds", inputs_embeds),
                            ("embedding_output", embedding_output),
                            ("token_type_ids", token_type_ids)):
            if value is not None and jnp.shape(value) != expected.get(name, mask_shape):
                raise ValueError(
                    f"{name} must have shape {expected.get(name, mask_shape)} (attention_mask "
                    f"is {mask_shape}), got {jnp.shape(value)}"
                )
        if mask_shape[1] > cfg.max_length:
            raise ValueError(
                f"sequence length {mask_shape[1]} exceeds the position table: at most "
                f"{cfg.max_length} tokens (max_position_embeddings="
                f"{cfg.max_position_embeddings}, position_offset={cfg.position_offset})"
            )

    def _position_ids(self, mask: jax.Array) -> jax.Array:
        """(B, T) position ids: 0..T-1, or RoBERTa's cumsum of real tokens past the pad id."""
        cfg = self.config
        batch, seq = mask.shape
        if cfg.architecture == "roberta":
            # HF create_position_ids_from_input_ids, computed from the mask.
            ranks = jnp.cumsum(mask.astype(jnp.int32), axis=1)  # (B, T) 1..n on real tokens
            return jnp.where(mask, ranks + cfg.pad_token_id, cfg.pad_token_id)
        return jnp.broadcast_to(jnp.arange(seq)[None, :], (batch, seq))

    def embed(
        self,
        inputs_embeds: Float[Array, "batch seq embed"],
        *,
        attention_mask: Bool[Array, "batch seq"],
        token_type_ids: Int[Array, "batch seq"] | None = None,
        dropout_rng: jax.Array | None = None,
    ) -> Float[Array, "batch seq hidden"]:
        """Embedding block: word + position + type embeddings, LayerNorm, dropout, projection."""
        mask = jnp.asarray(attention_mask).astype(bool)
        if token_type_ids is None:
            token_type_ids = jnp.zeros(mask.shape, jnp.int32)
        positions = jnp.take(self.position_embeddings[...], self._position_ids(mask), axis=0)
        types = jnp.take(self.token_type_embeddings[...], token_type_ids, axis=0)
        h = self.embeddings_norm(inputs_embeds + positions + types)  # (B, T, E)
        h = dropout(h, rate=self.config.hidden_dropout, key=dropout_rng)
        if self.embeddings_project is not None:
            h = self.embeddings_project(h)  # (B, T, D)
        return h

    def __call__(
        self,
        input_ids: Int[ArrayLike, "batch seq"] | None = None,
        *,
        attention_mask: Int[ArrayLike, "batch seq"] | Bool[ArrayLike, "batch seq"],
        token_type_ids: Int[ArrayLike, "batch seq"] | None = None,
        inputs_embeds: Float[ArrayLike, "batch seq embed"] | None = None,
        embedding_output: Float[ArrayLike, "batch seq hidden"] | None = None,
        dropout_rng: jax.Array | None = None,
        attention: AttentionMode = "full",
        query_pooling: QueryPooling = "mean",
    ) -> EncoderOutput:
        """Encodes a padded batch.

        Args:
          input_ids: (B, T) int token ids. Exactly one of ``input_ids``, ``inputs_embeds``,
            ``embedding_output`` must be given.
          attention_mask: (B, T) bool or int, 1 / True on real tokens.
          token_type_ids: (B, T) int segment ids (default zeros).
          inputs_embeds: (B, T, E) word embeddings, replacing the lookup of ``input_ids``.
          embedding_output: (B, T, D) output of the embedding block, skipping it.
          dropout_rng: None for evaluation; a PRNG key turns dropout on.
          attention: "full" returns full and pooled logits, "pooled" only the pooled rows,
            "none" neither.
          query_pooling: "mean" over non-padded queries or "cls" (query 0).

        Returns:
          An :class:`EncoderOutput`. With ``embedding_output`` given, ``inputs_embeds`` is
          that same array (no word embeddings exist on that path).

        Raises:
          ValueError: not exactly one input, inconsistent shapes, sequence longer than the
            position table, unknown ``attention`` / ``query_pooling``.
        """
        check_attention_args(attention, query_pooling)
        self._check_inputs(input_ids, attention_mask, token_type_ids, inputs_embeds,
                           embedding_output)
        mask = jnp.asarray(attention_mask).astype(bool)
        with jax.named_scope("embeddings"):
            if embedding_output is None:
                if inputs_embeds is None:
                    inputs_embeds = jnp.take(self.word_embeddings[...],
                                             jnp.asarray(input_ids), axis=0)  # (B, T, E)
                inputs_embeds = jnp.asarray(inputs_embeds)
                embedding_output = self.embed(
                    inputs_embeds, attention_mask=mask, token_type_ids=token_type_ids,
                    dropout_rng=fold_key(dropout_rng, 0),
                )
            else:
                embedding_output = jnp.asarray(embedding_output)
                inputs_embeds = embedding_output
        with jax.named_scope("layers"):
            stack = run_layers(
                self.layers, embedding_output, num_layers=self.config.num_layers, mask=mask,
                dropout_rng=dropout_rng, attention=attention, query_pooling=query_pooling,
            )
        return encoder_output(embedding_output, inputs_embeds, stack)
