"""Building blocks shared by smat's encoders (text and vision).

Everything here is a pure function of its inputs and parameters: LayerNorm / Dense /
multi-head self-attention modules that also return the pre-softmax attention logits,
key-driven dropout, query pooling of attention logits, and the stacked-layer runner
(``jax.lax.scan`` over layers whose parameters carry a leading layer axis).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float

AttentionMode = Literal["full", "pooled", "none"]
QueryPooling = Literal["mean", "cls"]

ATTENTION_MODES = ("full", "pooled", "none")
QUERY_POOLINGS = ("mean", "cls")

#: Hugging Face ``hidden_act`` names -> JAX functions (numerically identical to HF).
ACTIVATIONS: Mapping[str, Callable[[jax.Array], jax.Array]] = {
    "gelu": functools.partial(jax.nn.gelu, approximate=False),  # exact erf GELU
    "gelu_new": functools.partial(jax.nn.gelu, approximate=True),
    "gelu_pytorch_tanh": functools.partial(jax.nn.gelu, approximate=True),
    "quick_gelu": lambda x: x * jax.nn.sigmoid(1.702 * x),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
}


_INIT_STDDEV = 0.02  # HF ``initializer_range`` default


class EncoderOutput(NamedTuple):
    """What one encoder forward returns (design §1).

    Attributes:
      last_hidden_state: (B, T, D) final token representations.
      hidden_states: tuple of L+1 arrays (B, T, D): the embedding output, then each layer.
      attention_logits: (L, B, H, T, T) float32 ``q.k / sqrt(d_head)`` before the padding
        bias, or None (``attention`` not "full").
      pooled_attention_logits: (L, B, H, T) query-pooled rows of the logits (mean over
        non-padded queries, or the row of query 0 for ``query_pooling="cls"``); keys are
        not masked. None when ``attention="none"``.
      inputs_embeds: (B, T, E) word embeddings (before position / type embeddings and
        LayerNorm); for ViT the patch embeddings (B, N, D).
      embedding_output: (B, T, D) output of the embedding block (first hidden state).
    """

    last_hidden_state: Float[Array, "batch seq hidden"]
    hidden_states: tuple[Float[Array, "batch seq hidden"], ...]
    attention_logits: Float[Array, "layers batch heads seq seq"] | None
    pooled_attention_logits: Float[Array, "layers batch heads seq"] | None
    inputs_embeds: Float[Array, "batch seq embed"]
    embedding_output: Float[Array, "batch seq hidden"]


def dropout(x: jax.Array, *, rate: float, key: jax.Array | None) -> jax.Array:
    """Inverted dropout driven only by ``key`` (identity when ``key`` is None or rate 0).

    Args:
      x: any array.
      rate: probability of zeroing an element, in [0, 1).
      key: a jax PRNG key, or None for evaluation mode.

    Returns:
      ``x * keep / (1 - rate)`` with ``keep ~ Bernoulli(1 - rate)``, same shape as ``x``.
    """
    if key is None or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def fold_key(key: jax.Array | None, site: int) -> jax.Array | None:
    """``jax.random.fold_in(key, site)``, or None in evaluation mode (``key`` None)."""
    return None if key is None else jax.random.fold_in(key, site)


def lead(x: jax.Array, ndim: int) -> jax.Array:
    """Prepends unit axes so ``x`` has rank ``ndim`` (explicit broadcasting)."""
    return x.reshape((1,) * (ndim - x.ndim) + x.shape)


def normal_param(rngs: nnx.Rngs, shape: tuple[int, ...]) -> nnx.Param:
    """A float32 ``nnx.Param`` drawn from N(0, 0.02^2) (HF ``initializer_range``)."""
    return nnx.Param(_INIT_STDDEV * jax.random.normal(rngs.params(), shape, jnp.float32))


class LayerNorm(nnx.Module):
    """LayerNorm over the last axis with PyTorch semantics (biased two-pass variance)."""

    def __init__(self, features: int, *, eps: float):
        self.scale = nnx.Param(jnp.ones((features,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((features,), jnp.float32))
        self.eps = eps

    def __call__(self, x: Float[Array, "... d"]) -> Float[Array, "... d"]:
        mean = jnp.mean(x, axis=-1, keepdims=True)
        centred = x - mean
        var = jnp.mean(jnp.square(centred), axis=-1, keepdims=True)
        scale, bias = lead(self.scale[...], x.ndim), lead(self.bias[...], x.ndim)
        return centred * jax.lax.rsqrt(var + self.eps) * scale + bias


def rows_matmul(x: Float[Array, "... i"], kernel: Float[Array, "i ..."]) -> Array:
    """``x @ kernel`` as one 2-D matmul over all leading axes of ``x`` (rows) and the
    trailing axes of ``kernel`` (columns); the equivalent einsum up to float rounding.

    Why 2-D: with batched (B, T, D) operands, XLA:CPU lays out the transposed matmuls of
    the backward pass and of the SMaT second-order pass with activation transposes
    (copies); flat (B*T, D) rows avoid most of them (``benchmarks/meta_step.py``).
    """
    rows = x.reshape(-1, x.shape[-1])
    out = jnp.dot(rows, kernel.reshape(kernel.shape[0], -1))
    return out.reshape(*x.shape[:-1], *kernel.shape[1:])


class Dense(nnx.Module):
    """Affine map ``x @ kernel + bias`` with kernel (in, out) (HF ``nn.Linear`` transposed)."""

    def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs):
        self.kernel = normal_param(rngs, (in_features, out_features))
        self.bias = nnx.Param(jnp.zeros((out_features,), jnp.float32))

    def __call__(self, x: Float[Array, "... i"]) -> Float[Array, "... o"]:
        return rows_matmul(x, self.kernel[...]) + lead(self.bias[...], x.ndim)


class SelfAttention(nnx.Module):
    """Multi-head self-attention that also returns its pre-softmax logits.

    .. math::
        A = \\frac{Q K^\\top}{\\sqrt{d_{head}}}, \\quad
        \\mathrm{out} = \\mathrm{softmax}(A + \\mathrm{bias}_{pad}) V W_o

    Kernels are kept per head: query/key/value (D, H, K), output (H, K, D).
    """

    def __init__(self, hidden_size: int, num_heads: int, *, dropout_rate: float,
                 rngs: nnx.Rngs):
        head_dim = hidden_size // num_heads
        self.query_kernel = normal_param(rngs, (hidden_size, num_heads, head_dim))
        self.query_bias = nnx.Param(jnp.zeros((num_heads, head_dim), jnp.float32))
        self.key_kernel = normal_param(rngs, (hidden_size, num_heads, head_dim))
        self.key_bias = nnx.Param(jnp.zeros((num_heads, head_dim), jnp.float32))
        self.value_kernel = normal_param(rngs, (hidden_size, num_heads, head_dim))
        self.value_bias = nnx.Param(jnp.zeros((num_heads, head_dim), jnp.float32))
        self.output_kernel = normal_param(rngs, (num_heads, head_dim, hidden_size))
        self.output_bias = nnx.Param(jnp.zeros((hidden_size,), jnp.float32))
        self.dropout_rate = dropout_rate

    def __call__(
        self,
        x: Float[Array, "batch seq hidden"],
        *,
        mask: Bool[Array, "batch seq"],
        dropout_rng: jax.Array | None,
    ) -> tuple[Float[Array, "batch seq hidden"], Float[Array, "batch heads seq seq"]]:
        head_dim = self.query_kernel[...].shape[-1]
        q = rows_matmul(x, self.query_kernel[...]) + self.query_bias[None, None]
        k = rows_matmul(x, self.key_kernel[...]) + self.key_bias[None, None]
        v = rows_matmul(x, self.value_kernel[...]) + self.value_bias[None, None]
        # (B, T, H, K) each
        logits = jnp.einsum("bqhk,bshk->bhqs", q, k) / math.sqrt(head_dim)  # (B, H, Tq, Tk)
        masked = jnp.where(mask[:, None, None, :], logits, jnp.finfo(logits.dtype).min)
        probs = jax.nn.softmax(masked, axis=-1)  # (B, H, Tq, Tk)
        probs = dropout(probs, rate=self.dropout_rate, key=dropout_rng)
        context = jnp.einsum("bhqs,bshk->bqhk", probs, v)  # (B, T, H, K)
        out = rows_matmul(context.reshape(*context.shape[:2], -1),
                          self.output_kernel[...].reshape(-1, x.shape[-1]))  # (B, T, D)
        return out + self.output_bias[None, None], logits


def pool_attention_logits(
    logits: Float[Array, "batch heads seq seq"],
    mask: Bool[Array, "batch seq"],
    *,
    query_pooling: QueryPooling,
) -> Float[Array, "batch heads seq"]:
    """Pools attention-logit rows over queries (keys are left unmasked).

    ``"mean"``: :math:`\\bar A_{h,k} = \\sum_q m_q A_{h,q,k} / \\sum_q m_q` over non-padded
    queries ``q``; ``"cls"``: the row of query 0.

    Args:
      logits: (B, H, Tq, Tk) pre-softmax attention logits.
      mask: (B, T) bool, True on real tokens.
      query_pooling: "mean" or "cls".

    Returns:
      (B, H, Tk) pooled logits.
    """
    if query_pooling == "cls":
        return logits[:, :, 0, :]
    weights = mask.astype(logits.dtype)  # (B, Tq)
    count = jnp.maximum(jnp.sum(weights, axis=1), 1.0)  # (B,)
    return jnp.einsum("bhqk,bq->bhk", logits, weights) / count[:, None, None]


def check_attention_args(attention: str, query_pooling: str) -> None:
    """Raises ValueError for an unknown ``attention`` mode or ``query_pooling``."""
    if attention not in ATTENTION_MODES:
        raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
    if query_pooling not in QUERY_POOLINGS:
        raise ValueError(
            f"query_pooling must be one of {QUERY_POOLINGS}, got {query_pooling!r}"
        )


def stack_layers(make_layer: Callable[[nnx.Rngs], nnx.Module], num_layers: int,
                 rngs: nnx.Rngs) -> nnx.Module:
    """Creates ``num_layers`` independently initialised layers stacked on a leading axis."""

    @nnx.split_rngs(splits=num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def make(layer_rngs: nnx.Rngs) -> nnx.Module:
        return make_layer(layer_rngs)

    return make(rngs)


class LayerStackOutput(NamedTuple):
    """Result of :func:`run_layers`: stacked per-layer outputs (L leading)."""

    hidden_states: Float[Array, "layers batch seq hidden"]
    attention_logits: Float[Array, "layers batch heads seq seq"] | None
    pooled_attention_logits: Float[Array, "layers batch heads seq"] | None


def run_layers(
    layers: nnx.Module,
    hidden: Float[Array, "batch seq hidden"],
    *,
    num_layers: int,
    mask: Bool[Array, "batch seq"],
    dropout_rng: jax.Array | None,
    attention: AttentionMode,
    query_pooling: QueryPooling,
) -> LayerStackOutput:
    """Runs stacked layers with ``jax.lax.scan``, collecting what ``attention`` asks for.

    On the CPU the scan is fully unrolled: XLA fuses across layers and the nested gradients
    of the SMaT step do not stack per-layer residuals in loop buffers, so the step runs
    about 9% faster (``benchmarks/meta_step.py``), for compile time that grows with the
    depth. On other backends it stays a loop, compiling one layer body: on an H200 the
    unrolled training steps took 17-50 s to compile (``docs/benchmarks.md``).

    Each layer is called as ``layer(h, mask=..., dropout_rng=...) -> (h, logits)``; layer
    ``l`` gets ``fold_in(dropout_rng, l + 1)`` (site 0 is left to the embeddings).
    """
    graphdef, state = nnx.split(layers)
    return _scan_layers(graphdef, state, hidden, mask, dropout_rng, num_layers=num_layers,
                        attention=attention, query_pooling=query_pooling,
                        unroll=jax.default_backend() == "cpu")


# A jitted function of the layers' structure: a model called outside jit (the Captum-like
# facades, tests) compiles its layer scan once per structure and shape, where a scan body
# closing over each call's arrays is traced and compiled again at every call. Inside an
# outer jit it is inlined.
@functools.partial(jax.jit, static_argnames=("graphdef", "num_layers", "attention",
                                             "query_pooling", "unroll"))
def _scan_layers(graphdef: nnx.GraphDef, state: nnx.State,
                 hidden: Float[Array, "batch seq hidden"], mask: Bool[Array, "batch seq"],
                 dropout_rng: jax.Array | None, *, num_layers: int,
                 attention: AttentionMode, query_pooling: QueryPooling,
                 unroll: bool) -> LayerStackOutput:
    if dropout_rng is None:
        keys = None
    else:
        keys = jax.vmap(lambda i: jax.random.fold_in(dropout_rng, i))(
            jnp.arange(1, num_layers + 1)
        )

    def body(h, xs):
        layer_state, key = xs
        h, logits = nnx.merge(graphdef, layer_state)(h, mask=mask, dropout_rng=key)
        full = logits if attention == "full" else None
        pooled = None if attention == "none" else pool_attention_logits(
            logits, mask, query_pooling=query_pooling
        )
        return h, (h, full, pooled)

    _, (hidden_states, full, pooled) = jax.lax.scan(body, hidden, (state, keys), unroll=unroll)
    return LayerStackOutput(hidden_states, full, pooled)


def encoder_output(
    embedding_output: jax.Array,
    inputs_embeds: jax.Array,
    stack: LayerStackOutput,
    *,
    last_hidden_state: jax.Array | None = None,
) -> EncoderOutput:
    """Assembles an :class:`EncoderOutput` from the embedding output and a layer stack."""
    per_layer = tuple(stack.hidden_states[i] for i in range(stack.hidden_states.shape[0]))
    return EncoderOutput(
        last_hidden_state=per_layer[-1] if last_hidden_state is None else last_hidden_state,
        hidden_states=(embedding_output, *per_layer),
        attention_logits=stack.attention_logits,
        pooled_attention_logits=stack.pooled_attention_logits,
        inputs_embeds=inputs_embeds,
        embedding_output=embedding_output,
    )

