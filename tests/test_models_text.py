"""Tests for smat.models.text (TextConfig, TextEncoder) incl. all-MiniLM-L6-v2 parity."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from smat.models import TextConfig, TextEncoder, from_pretrained, functional, minilm_path

ARCHS = ("bert", "electra", "roberta")


@functools.partial(jax.jit, static_argnames=("graphdef", "attention", "query_pooling"))
def _apply(graphdef, params, **kwargs):
    return functional.apply(graphdef, params, **kwargs)


def run(model, **kwargs):
    """Jitted forward (eager op-by-op dispatch is slow on CPU)."""
    return _apply(*functional.split(model), **kwargs)


def _batch(config: TextConfig, seed: int = 0):
    """A padded (3, 7) batch: lengths 7, 4, 2; pads carry pad_token_id."""
    rng = np.random.default_rng(seed)
    lengths = np.array([7, 4, 2])
    mask = np.arange(7)[None, :] < lengths[:, None]
    ids = rng.integers(3, config.vocab_size, size=(3, 7))
    ids = np.where(mask, ids, config.pad_token_id).astype(np.int32)
    types = np.where(np.arange(7)[None, :] >= 3, 1, 0) * (config.type_vocab_size > 1) * mask
    return jnp.asarray(ids), jnp.asarray(mask.astype(np.int32)), jnp.asarray(types, jnp.int32)


@pytest.fixture(params=ARCHS, scope="module")
def encoder(request):
    return TextEncoder(TextConfig.tiny(architecture=request.param), rngs=nnx.Rngs(0))


# ----------------------------------------------------------------------------- config


def test_config_validation_names_field_and_value():
    with pytest.raises(ValueError, match="architecture must be one of .* got 'gpt2'"):
        TextConfig.tiny(architecture="gpt2")
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be divisible by num_heads"):
        TextConfig.tiny(hidden_size=30, embedding_size=30)
    with pytest.raises(ValueError, match="hidden_act must be one of .* got 'mish'"):
        TextConfig.tiny(hidden_act="mish")
    with pytest.raises(ValueError, match="hidden_dropout must be in \\[0, 1\\), got 1.5"):
        TextConfig.tiny(hidden_dropout=1.5)
    with pytest.raises(ValueError, match="position_offset must be 2 .*roberta.*got 0"):
        TextConfig.tiny(architecture="roberta", position_offset=0)
    with pytest.raises(ValueError, match="embedding_size .* only for architecture='electra'"):
        TextConfig.tiny(architecture="bert", embedding_size=16)
    with pytest.raises(ValueError, match="num_layers must be a positive integer, got 0"):
        TextConfig.tiny(num_layers=0)


def test_config_is_frozen_and_hashable():
    config = TextConfig.all_minilm_l6_v2()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 3  # type: ignore[misc]
    assert hash(config) == hash(TextConfig.all_minilm_l6_v2())
    assert config.head_dim == 32 and config.embedding_size == 384


def test_from_hf_matches_minilm_preset_and_maps_architectures():
    import json

    hf = json.loads((minilm_path() / "config.json").read_text())
    assert TextConfig.from_hf(hf) == TextConfig.all_minilm_l6_v2()
    roberta = TextConfig.from_hf({**hf, "model_type": "xlm-roberta", "pad_token_id": 1,
                                  "max_position_embeddings": 514, "type_vocab_size": 1})
    assert roberta.architecture == "roberta" and roberta.position_offset == 2
    assert roberta.max_length == 512
    electra = TextConfig.from_hf({**hf, "model_type": "electra", "embedding_size": 128})
    assert electra.embedding_size == 128 and electra.hidden_size == 384


@pytest.mark.parametrize("bad, match", [
    ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]},
     "unsupported model_type 'gpt2' .*GPT2LMHeadModel.*supports"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'"),
    ({"is_decoder": True}, "is_decoder=True is not supported"),
])
def test_from_hf_rejects_unsupported(bad, match):
    base = {"model_type": "bert", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16}
    with pytest.raises(ValueError, match=match):
        TextConfig.from_hf({**base, **bad})


def test_from_hf_names_missing_fields():
    with pytest.raises(ValueError, match=r"lacks required fields \['hidden_size'"):
        TextConfig.from_hf({"model_type": "bert", "vocab_size": 10})


# ----------------------------------------------------------------------------- forward


def test_output_shapes_and_modes(encoder):
    cfg = encoder.config
    ids, mask, types = _batch(cfg)
    full = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types)
    b, t, d, h, n = 3, 7, cfg.hidden_size, cfg.num_heads, cfg.num_layers
    assert full.last_hidden_state.shape == (b, t, d)
    assert len(full.hidden_states) == n + 1
    np.testing.assert_array_equal(full.hidden_states[0], full.embedding_output)
    np.testing.assert_array_equal(full.hidden_states[-1], full.last_hidden_state)
    assert full.attention_logits.shape == (n, b, h, t, t)
    assert full.attention_logits.dtype == jnp.float32
    assert full.pooled_attention_logits.shape == (n, b, h, t)
    assert full.inputs_embeds.shape == (b, t, cfg.embedding_size)
    pooled = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types,
                 attention="pooled")
    assert pooled.attention_logits is None
    np.testing.assert_allclose(pooled.pooled_attention_logits, full.pooled_attention_logits,
                               atol=1e-6)
    none = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types, attention="none")
    assert none.attention_logits is None and none.pooled_attention_logits is None
    np.testing.assert_allclose(none.last_hidden_state, full.last_hidden_state, atol=1e-6)


def test_pooled_logits_are_mean_over_real_queries_and_cls_row(encoder):
    ids, mask, types = _batch(encoder.config)
    out = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types)
    full = np.asarray(out.attention_logits)  # (L, B, H, T, T)
    m = np.asarray(mask).astype(bool)
    expected = np.stack([full[:, b][:, :, m[b]].mean(axis=2) for b in range(3)], axis=1)
    np.testing.assert_allclose(out.pooled_attention_logits, expected, rtol=1e-5, atol=1e-5)
    cls = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types,
              query_pooling="cls")
    np.testing.assert_array_equal(cls.pooled_attention_logits, full[:, :, :, 0, :])


def test_attention_logits_are_before_padding_bias(encoder):
    """Logits at padded keys are finite q.k scores, not the -inf-like padding bias."""
    ids, mask, types = _batch(encoder.config)
    out = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types)
    logits = np.asarray(out.attention_logits)
    padded_keys = logits[:, 2, :, :, 2:]  # row 2 has 2 real tokens
    assert np.all(np.isfinite(padded_keys)) and np.abs(padded_keys).max() < 1e3


def test_inputs_embeds_and_embedding_output_paths_equal_ids_path(encoder):
    ids, mask, types = _batch(encoder.config)
    ref = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types)
    words = jnp.take(encoder.word_embeddings[...], ids, axis=0)
    via_embeds = run(encoder, inputs_embeds=words, attention_mask=mask, token_type_ids=types)
    np.testing.assert_array_equal(via_embeds.inputs_embeds, ref.inputs_embeds)
    np.testing.assert_allclose(via_embeds.last_hidden_state, ref.last_hidden_state, atol=1e-6)
    via_output = run(encoder, embedding_output=ref.embedding_output, attention_mask=mask)
    np.testing.assert_allclose(via_output.last_hidden_state, ref.last_hidden_state, atol=1e-6)
    np.testing.assert_allclose(via_output.attention_logits, ref.attention_logits, atol=1e-6)


def test_padding_does_not_change_real_tokens(encoder):
    """Extra padding leaves the outputs at real tokens unchanged (keys are masked)."""
    ids, mask, types = _batch(encoder.config)
    pad = encoder.config.pad_token_id
    longer = jnp.concatenate([ids, jnp.full((3, 3), pad, ids.dtype)], axis=1)
    longer_mask = jnp.concatenate([mask, jnp.zeros((3, 3), mask.dtype)], axis=1)
    longer_types = jnp.concatenate([types, jnp.zeros((3, 3), types.dtype)], axis=1)
    a = run(encoder, input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    b = run(encoder, input_ids=longer, attention_mask=longer_mask, token_type_ids=longer_types)
    m = np.asarray(mask).astype(bool)
    np.testing.assert_allclose(np.asarray(b.last_hidden_state)[:, :7][m], np.asarray(a)[m],
                               atol=1e-5)


def test_roberta_positions_start_after_pad_id():
    cfg = TextConfig.tiny(architecture="roberta")
    enc = TextEncoder(cfg, rngs=nnx.Rngs(0))
    mask = jnp.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    np.testing.assert_array_equal(enc._position_ids(mask), [[2, 3, 4, 1], [2, 3, 1, 1]])
    bert = TextEncoder(TextConfig.tiny(architecture="bert"), rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(bert._position_ids(mask), [[0, 1, 2, 3], [0, 1, 2, 3]])


def test_electra_projects_embeddings():
    enc = TextEncoder(TextConfig.tiny(architecture="electra"), rngs=nnx.Rngs(0))
    assert enc.embeddings_project is not None
    assert enc.embeddings_project.kernel[...].shape == (16, 32)
    ids, mask, types = _batch(enc.config)
    out = run(enc, input_ids=ids, attention_mask=mask, token_type_ids=types)
    assert out.inputs_embeds.shape[-1] == 16 and out.embedding_output.shape[-1] == 32


def test_dropout_only_with_key():
    cfg = TextConfig.tiny(architecture="electra", hidden_dropout=0.3, attention_dropout=0.3)
    enc = TextEncoder(cfg, rngs=nnx.Rngs(0))
    ids, mask, types = _batch(cfg)

    def hidden(key):
        return np.asarray(run(enc, input_ids=ids, attention_mask=mask, token_type_ids=types,
                              dropout_rng=key).last_hidden_state)

    np.testing.assert_array_equal(hidden(None), hidden(None))
    a, b = hidden(jax.random.key(1)), hidden(jax.random.key(2))
    np.testing.assert_array_equal(a, hidden(jax.random.key(1)))
    assert np.abs(a - b).max() > 1e-2
    assert np.abs(a - hidden(None)).max() > 1e-2


def test_nnx_jit_matches_eager():
    encoder = TextEncoder(TextConfig.tiny(architecture="roberta"), rngs=nnx.Rngs(0))
    ids, mask, types = _batch(encoder.config)

    @nnx.jit
    def forward(model, ids, mask, types):
        return model(ids, attention_mask=mask, token_type_ids=types, attention="pooled")

    jitted = forward(encoder, ids, mask, types)
    eager = encoder(ids, attention_mask=mask, token_type_ids=types, attention="pooled")
    np.testing.assert_allclose(jitted.last_hidden_state, eager.last_hidden_state, atol=1e-5)
    np.testing.assert_allclose(jitted.pooled_attention_logits, eager.pooled_attention_logits,
                               atol=1e-5)


def test_bad_inputs_raise_clear_errors():
    enc = TextEncoder(TextConfig.tiny(), rngs=nnx.Rngs(0))
    ids, mask, _ = _batch(enc.config)
    with pytest.raises(ValueError, match="exactly one of input_ids, inputs_embeds"):
        enc(ids, attention_mask=mask, inputs_embeds=jnp.zeros((3, 7, 32)))
    with pytest.raises(ValueError, match="exactly one of .* got none"):
        enc(attention_mask=mask)
    with pytest.raises(ValueError, match=r"inputs_embeds must have shape \(3, 7, 32\)"):
        enc(inputs_embeds=jnp.zeros((3, 7, 31)), attention_mask=mask)
    with pytest.raises(ValueError, match=r"input_ids must have shape \(3, 6\)"):
        enc(ids, attention_mask=mask[:, :6])
    with pytest.raises(ValueError, match="sequence length 65 exceeds the position table"):
        enc(jnp.ones((1, 65), jnp.int32), attention_mask=jnp.ones((1, 65), jnp.int32))
    with pytest.raises(ValueError, match="attention must be one of"):
        enc(ids, attention_mask=mask, attention="sparse")
    with pytest.raises(ValueError, match="query_pooling must be one of"):
        enc(ids, attention_mask=mask, query_pooling="max")


# ----------------------------------------------------------------------------- parity

SENTENCES = [
    "The movie was great.",
    "I hated every minute of this film; it was boring, predictable and far too long.",
    "Okay.",
    "A beautiful, moving story with wonderful performances by the whole cast.",
    "Not bad at all, although the ending felt a little rushed.",
    "The plot made no sense whatsoever, but the music was lovely and the photography superb.",
    "Would I watch it again? Probably not.",
]


@pytest.mark.parity
def test_all_minilm_l6_v2_matches_hf_bert_model():
    """Real all-MiniLM-L6-v2 weights vs HF PyTorch BertModel (eager attention), float32.

    Hidden states are compared at real tokens against HF float32 (<= 1e-4) and at *every*
    position, padding included, against HF run in float64: at padded positions HF's own
    float32 result drifts ~2e-4 from float64 by layer 5 (rounding amplified through the
    layers), while ours stays within 1e-4 of it. Softmax(attention_logits + padding bias)
    is compared with HF attentions at every position.
    """
    torch = pytest.importorskip("torch")
    from transformers import BertModel

    model, tokenizer = from_pretrained(minilm_path(), task="classification", num_labels=2)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="np")
    mask = batch["attention_mask"].astype(bool)
    assert (~mask).sum() > 20  # really padded, lengths differ
    out = run(model.encoder, input_ids=batch["input_ids"],
              attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"])
    hf = BertModel.from_pretrained(str(minilm_path()), attn_implementation="eager").eval()
    inputs = {k: torch.tensor(v) for k, v in batch.items()}
    with torch.no_grad():
        ref = hf(**inputs, output_hidden_states=True, output_attentions=True)
        ref64 = hf.double()(**inputs, output_hidden_states=True)
    assert len(out.hidden_states) == len(ref.hidden_states) == 7
    for ours, theirs, theirs64 in zip(out.hidden_states, ref.hidden_states,
                                      ref64.hidden_states, strict=True):
        ours = np.asarray(ours)
        assert np.abs(ours[mask] - theirs.numpy()[mask]).max() <= 1e-4
        assert np.abs(ours - theirs64.numpy()).max() <= 1e-4
    biased = jnp.where(mask[None, :, None, None, :], out.attention_logits, -jnp.inf)
    probs = np.asarray(jax.nn.softmax(biased, axis=-1))
    for layer, theirs in enumerate(ref.attentions):
        assert np.abs(probs[layer] - theirs.numpy()).max() <= 1e-4


def test_the_layer_loop_is_unrolled_on_the_cpu_only_with_equal_results(monkeypatch):
    """Off the CPU the layer scan stays a loop (one layer body to compile); outputs and
    gradients, with dropout, equal the unrolled CPU program's."""
    import re

    cfg = TextConfig.tiny(architecture="bert", hidden_dropout=0.3, attention_dropout=0.3)
    graphdef, params = functional.split(TextEncoder(cfg, rngs=nnx.Rngs(0)))
    ids, mask, types = _batch(cfg)

    def traced():
        # a new function each time: the backend is read when tracing, and JAX keeps the
        # traces of a function it has seen
        def loss(params):
            out = functional.apply(graphdef, params, input_ids=ids, attention_mask=mask,
                                   token_type_ids=types, dropout_rng=jax.random.key(3),
                                   attention="pooled")
            return (jnp.sum(out.last_hidden_state ** 2)
                    + jnp.sum(jnp.where(jnp.isfinite(out.pooled_attention_logits),
                                        out.pooled_attention_logits, 0.0) ** 2))

        unrolls = set(re.findall(r"unroll=(\d+)", str(jax.make_jaxpr(loss)(params))))
        return unrolls, jax.value_and_grad(loss)(params)

    cpu_unrolls, (cpu_value, cpu_grads) = traced()
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    gpu_unrolls, (gpu_value, gpu_grads) = traced()
    assert cpu_unrolls == {str(cfg.num_layers)} and gpu_unrolls == {"1"}
    np.testing.assert_allclose(gpu_value, cpu_value, rtol=1e-5)
    # the loop and the unrolled program sum in other orders: a small gradient entry can
    # move by 0.5% (seen on an AVX-512 FP16 Xeon), so entries are compared at 1% of their
    # leaf's largest; other dropout masks or a missed layer move them by far more
    for a, b in zip(jax.tree.leaves(gpu_grads), jax.tree.leaves(cpu_grads), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-2 * np.abs(b).max())
