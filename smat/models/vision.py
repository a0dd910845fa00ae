"""Vision Transformer encoder (HF ``ViTModel`` semantics) in Flax NNX.

Images (B, C, H, W) are cut into non-overlapping P x P patches, each linearly embedded
(the stride-P convolution of HF, written as an einsum); a learned [CLS] token is
prepended and learned position embeddings added. The pre-LN layers are

.. math::
    h \\leftarrow h + \\mathrm{MHA}(\\mathrm{LN}_1(h)), \\qquad
    h \\leftarrow h + \\mathrm{MLP}(\\mathrm{LN}_2(h))

followed by a final LayerNorm. The output is the same :class:`EncoderOutput` as the
text encoder: tokens are [CLS] + patches, ``inputs_embeds`` are the patch embeddings
(B, N, D) before the [CLS] token and position embeddings, and the mask defaults to all
ones. ``hidden_states`` are HF's (the last one *before* the final LayerNorm);
``last_hidden_state`` is after it.

References:
  Dosovitskiy et al, `An Image is Worth 16x16 Words <https://arxiv.org/abs/2010.11929>`_,
  2021, Eqs. 1-4.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, ArrayLike, Bool, Float

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class ViTConfig:
    """Hyperparameters of a ViT encoder.

    Attributes:
      image_size: H = W of the input images.
      patch_size: P; must divide ``image_size``.
      num_channels: C.
      hidden_size: D.
      num_layers: L.
      num_heads: H; must divide ``hidden_size``.
      intermediate_size: F.
      layer_norm_eps: LayerNorm epsilon.
      hidden_act: one of :data:`smat.models.text.ACTIVATIONS`.
      hidden_dropout: dropout on embeddings and sub-block outputs.
      attention_dropout: dropout on attention probabilities.
    """

    image_size: int
    patch_size: int
    num_channels: int = 3
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("image_size", "patch_size", "num_channels", "hidden_size", "num_layers",
                     "num_heads", "intermediate_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.image_size % self.patch_size:
            raise ValueError(
                f"patch_size ({self.patch_size}) must divide image_size ({self.image_size})"
            )
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_heads "
                f"({self.num_heads})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {self.hidden_act!r}"
            )
        for name in ("hidden_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")

    @property
    def num_patches(self) -> int:
        """N = (image_size / patch_size) ** 2."""
        return (self.image_size // self.patch_size) ** 2

    @classmethod
    def tiny(cls, **overrides: Any) -> ViTConfig:
        """A 2-layer, 32-wide config on 3 x 16 x 16 images with 4 x 4 patches (tests)."""
        fields: dict[str, Any] = dict(image_size=16, patch_size=4, num_channels=3,
                                      hidden_size=32, num_layers=2, num_heads=4,
                                      intermediate_size=37)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def vit_base_patch16_224(cls) -> ViTConfig:
        """google/vit-base-patch16-224 (12 layers x 12 heads, D=768)."""
        return cls(image_size=224, patch_size=16, hidden_size=768, num_layers=12,
                   num_heads=12, intermediate_size=3072)

    @classmethod
    def from_hf(cls, config: Mapping[str, Any]) -> ViTConfig:
        """Builds a config from a Hugging Face ViT ``config.json`` dictionary.

        Raises:
          ValueError: ``model_type`` is not "vit", ``qkv_bias`` is False, or a required
            field is missing.
        """
        if config.get("model_type") != "vit":
            raise ValueError(
                f"unsupported model_type {config.get('model_type')!r} for ViTConfig; "
                "expected 'vit'"
            )
        if not config.get("qkv_bias", True):
            raise ValueError("qkv_bias=False ViT checkpoints are not supported")
        required = ("image_size", "patch_size", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "intermediate_size")
        missing = [name for name in required if name not in config]
        if missing:
            raise ValueError(f"config.json lacks required fields {missing}")
        return cls(
            image_size=int(config["image_size"]),
            patch_size=int(config["patch_size"]),
            num_channels=int(config.get("num_channels", 3)),
            hidden_size=int(config["hidden_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=int(config["num_attention_heads"]),
            intermediate_size=int(config["intermediate_size"]),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            hidden_act=str(config.get("hidden_act", "gelu")),
            hidden_dropout=float(config.get("hidden_dropout_prob", 0.0)),
            attention_dropout=float(config.get("attention_probs_dropout_prob", 0.0)),
        )


class ViTLayer(nnx.Module):
    """One pre-LN ViT layer (HF ``ViTLayer``)."""

    def __init__(self, config: ViTConfig, *, rngs: nnx.Rngs):
        d, f = config.hidden_size, config.intermediate_size
        self.norm_before = LayerNorm(d, eps=config.layer_norm_eps)
        self.attention = SelfAttention(d, config.num_heads,
                                       dropout_rate=config.attention_dropout, rngs=rngs)
        self.norm_after = LayerNorm(d, eps=config.layer_norm_eps)
        self.intermediate = Dense(d, f, rngs=rngs)
        self.output = Dense(f, d, rngs=rngs)
        self.hidden_act = config.hidden_act
        self.dropout_rate = config.hidden_dropout

    def __call__(self, h, *, mask, dropout_rng):
        with jax.named_scope("attention"):
            attended, logits = self.attention(self.norm_before(h), mask=mask,
                                              dropout_rng=fold_key(dropout_rng, 0))
            h = h + dropout(attended, rate=self.dropout_rate, key=fold_key(dropout_rng, 1))
        with jax.named_scope("mlp"):
            inner = ACTIVATIONS[self.hidden_act](self.intermediate(self.norm_after(h)))
            out = dropout(self.output(inner), rate=self.dropout_rate, key=fold_key(dropout_rng, 2))
            h = h + out  # (B, N+1, D)
        return h, logits


class ViTEncoder(nnx.Module):
    """ViT encoder returning an :class:`EncoderOutput` over [CLS] + patch tokens.

    Args:
      config: a :class:`ViTConfig`.
      rngs: initialisation RNGs.
    """

    def __init__(self, config: ViTConfig, *, rngs: nnx.Rngs):
        if not isinstance(config, ViTConfig):
            raise TypeError(f"config must be a ViTConfig, got {type(config).__name__}")
        self.config = config
        c, p, d = config.num_channels, config.patch_size, config.hidden_size
        self.patch_kernel = normal_param(rngs, (c, p, p, d))
        self.patch_bias = nnx.Param(jnp.zeros((d,), jnp.float32))
        self.cls_token = normal_param(rngs, (d,))
        self.position_embeddings = normal_param(rngs, (config.num_patches + 1, d))
        self.layers = stack_layers(lambda r: ViTLayer(config, rngs=r), config.num_layers, rngs)
        self.final_norm = LayerNorm(d, eps=config.layer_norm_eps)

    def patchify(
        self, pixel_values: Float[Array, "batch channels height width"]
    ) -> Float[Array, "batch patches hidden"]:
        """Patch embeddings (B, N, D), patches in row-major order (HF's conv + flatten)."""
        cfg = self.config
        expected = (cfg.num_channels, cfg.image_size, cfg.image_size)
        if pixel_values.ndim != 4 or pixel_values.shape[1:] != expected:
            raise ValueError(
                f"pixel_values must have shape (batch, {', '.join(map(str, expected))}), "
                f"got {pixel_values.shape}"
            )
        batch, p = pixel_values.shape[0], cfg.patch_size
        grid = cfg.image_size // p
        patches = pixel_values.reshape(batch, cfg.num_channels, grid, p, grid, p)
        # (B, C, gh, P, gw, P) -> (B, gh, gw, D)
        embedded = jnp.einsum("bcipjq,cpqd->bijd", patches, self.patch_kernel[...])
        return embedded.reshape(batch, grid * grid, -1) + self.patch_bias[None, None]  # (B, N, D)

    def __call__(
        self,
        pixel_values: Float[ArrayLike, "batch channels height width"] | None = None,
        *,
        attention_mask: Bool[ArrayLike, "batch tokens"] | None = None,
        inputs_embeds: Float[ArrayLike, "batch patches hidden"] | None = None,
        embedding_output: Float[ArrayLike, "batch tokens hidden"] | None = None,
        dropout_rng: jax.Array | None = None,
        attention: AttentionMode = "full",
        query_pooling: QueryPooling = "mean",
    ) -> EncoderOutput:
        """Encodes a batch of images.

        Args:
          pixel_values: (B, C, H, W) images (HF channel-first layout). Exactly one of
            ``pixel_values``, ``inputs_embeds``, ``embedding_output`` must be given.
          attention_mask: optional (B, N+1) mask over [CLS] + patches (default all ones).
          inputs_embeds: (B, N, D) patch embeddings, replacing the patch projection.
          embedding_output: (B, N+1, D) output of the embedding block.
          dropout_rng: None for evaluation; a PRNG key turns dropout on.
          attention: "full", "pooled" or "none" (see :class:`EncoderOutput`).
          query_pooling: "mean" or "cls".

        Returns:
          An :class:`EncoderOutput` with T = N + 1 tokens.

        Raises:
          ValueError: not exactly one input or inconsistent shapes.
        """
        check_attention_args(attention, query_pooling)
        given = [name for name, value in (("pixel_values", pixel_values),
                                          ("inputs_embeds", inputs_embeds),
                                          ("embedding_output", embedding_output))
                 if value is not None]
        if len(given) != 1:
            raise ValueError(
                "pass exactly one of pixel_values, inputs_embeds, embedding_output; got "
                f"{given or 'none'}"
            )
        cfg = self.config
        tokens = cfg.num_patches + 1
        with jax.named_scope("embeddings"):
            if embedding_output is None:
                if inputs_embeds is None:
                    inputs_embeds = self.patchify(jnp.asarray(pixel_values))
                inputs_embeds = jnp.asarray(inputs_embeds)
                if inputs_embeds.ndim != 3 or inputs_embeds.shape[1:] != (
                        cfg.num_patches, cfg.hidden_size):
                    raise ValueError(
                        f"inputs_embeds must have shape (batch, {cfg.num_patches}, "
                        f"{cfg.hidden_size}), got {inputs_embeds.shape}"
                    )
                batch = inputs_embeds.shape[0]
                cls = jnp.broadcast_to(self.cls_token[...][None, None, :],
                                       (batch, 1, cfg.hidden_size))
                h = jnp.concatenate([cls, inputs_embeds], axis=1)  # (B, N+1, D)
                h = h + self.position_embeddings[...][None, :, :]
                embedding_output = dropout(h, rate=cfg.hidden_dropout,
                                           key=fold_key(dropout_rng, 0))
            else:
                embedding_output = jnp.asarray(embedding_output)
                if embedding_output.ndim != 3 or embedding_output.shape[1:] != (
                        tokens, cfg.hidden_size):
                    raise ValueError(
                        f"embedding_output must have shape (batch, {tokens}, "
                        f"{cfg.hidden_size}), got {embedding_output.shape}"
                    )
                inputs_embeds = embedding_output
        batch = embedding_output.shape[0]
        if attention_mask is None:
            mask = jnp.ones((batch, tokens), bool)
        else:
            mask = jnp.asarray(attention_mask).astype(bool)
            if mask.shape != (batch, tokens):
                raise ValueError(
                    f"attention_mask must have shape ({batch}, {tokens}) ([CLS] + patches), "
                    f"got {mask.shape}"
                )
        with jax.named_scope("layers"):
            stack = run_layers(
                self.layers, embedding_output, num_layers=cfg.num_layers, mask=mask,
                dropout_rng=dropout_rng, attention=attention, query_pooling=query_pooling,
            )
        last = self.final_norm(stack.hidden_states[-1])  # (B, N+1, D)
        return encoder_output(embedding_output, inputs_embeds, stack, last_hidden_state=last)
