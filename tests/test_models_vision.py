"""Tests for smat.models.vision (ViTConfig, ViTEncoder) incl. parity with HF ViT."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from smat.models import SequenceClassifier, ViTConfig, ViTEncoder, from_pretrained, functional


@functools.partial(jax.jit, static_argnames=("graphdef", "attention", "query_pooling"))
def _apply(graphdef, params, **kwargs):
    return functional.apply(graphdef, params, **kwargs)


def run(model, **kwargs):
    return _apply(*functional.split(model), **kwargs)


@pytest.fixture(scope="module")
def encoder():
    return ViTEncoder(ViTConfig.tiny(), rngs=nnx.Rngs(0))


def images(batch: int = 2) -> jax.Array:
    return jax.random.normal(jax.random.key(3), (batch, 3, 16, 16))


def test_config_validation():
    with pytest.raises(ValueError, match=r"patch_size \(5\) must divide image_size \(16\)"):
        ViTConfig.tiny(patch_size=5)
    with pytest.raises(ValueError, match="hidden_act must be one of"):
        ViTConfig.tiny(hidden_act="mish")
    with pytest.raises(ValueError, match="unsupported model_type 'bert' for ViTConfig"):
        ViTConfig.from_hf({"model_type": "bert"})
    assert ViTConfig.tiny().num_patches == 16
    assert ViTConfig.vit_base_patch16_224().num_patches == 196


def test_output_shapes(encoder):
    out = run(encoder, pixel_values=images())
    assert out.last_hidden_state.shape == (2, 17, 32)
    assert len(out.hidden_states) == 3
    assert out.attention_logits.shape == (2, 2, 4, 17, 17)
    assert out.pooled_attention_logits.shape == (2, 2, 4, 17)
    assert out.inputs_embeds.shape == (2, 16, 32)  # patch embeddings, no [CLS]
    assert out.embedding_output.shape == (2, 17, 32)
    # last_hidden_state is the final LayerNorm of the last hidden state
    final = np.asarray(out.hidden_states[-1])
    normed = (final - final.mean(-1, keepdims=True)) / np.sqrt(final.var(-1, keepdims=True)
                                                               + 1e-12)
    np.testing.assert_allclose(out.last_hidden_state, normed, atol=1e-4)


def test_patchify_is_row_major_conv(encoder):
    """Patch (i, j) embeds pixels [4i:4i+4, 4j:4j+4] (HF conv + flatten order)."""
    pixels = images(1)
    patches = np.asarray(encoder.patchify(pixels))  # (1, 16, 32)
    kernel, bias = np.asarray(encoder.patch_kernel[...]), np.asarray(encoder.patch_bias[...])
    block = np.asarray(pixels)[0, :, 8:12, 4:8]  # patch row 2, column 1 -> index 9
    np.testing.assert_allclose(patches[0, 9], np.einsum("cpq,cpqd->d", block, kernel) + bias,
                               atol=1e-5)


def test_input_paths_agree(encoder):
    ref = run(encoder, pixel_values=images())
    via_embeds = run(encoder, inputs_embeds=ref.inputs_embeds)
    np.testing.assert_allclose(via_embeds.last_hidden_state, ref.last_hidden_state, atol=1e-6)
    via_output = run(encoder, embedding_output=ref.embedding_output)
    np.testing.assert_allclose(via_output.last_hidden_state, ref.last_hidden_state, atol=1e-6)
    ones = run(encoder, pixel_values=images(), attention_mask=jnp.ones((2, 17), bool))
    np.testing.assert_allclose(ones.last_hidden_state, ref.last_hidden_state, atol=1e-6)


def test_bad_inputs(encoder):
    with pytest.raises(ValueError, match=r"pixel_values must have shape \(batch, 3, 16, 16\)"):
        encoder(jnp.zeros((1, 3, 8, 8)))
    with pytest.raises(ValueError, match="exactly one of pixel_values"):
        encoder(images(), inputs_embeds=jnp.zeros((2, 16, 32)))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(2, 17\)"):
        encoder(images(), attention_mask=jnp.ones((2, 16)))


def test_dropout_only_with_key():
    enc = ViTEncoder(ViTConfig.tiny(hidden_dropout=0.2, attention_dropout=0.2),
                     rngs=nnx.Rngs(0))
    a = run(enc, pixel_values=images(), dropout_rng=jax.random.key(0)).last_hidden_state
    b = run(enc, pixel_values=images(), dropout_rng=jax.random.key(0)).last_hidden_state
    c = run(enc, pixel_values=images(), dropout_rng=jax.random.key(1)).last_hidden_state
    d = run(enc, pixel_values=images()).last_hidden_state
    np.testing.assert_array_equal(a, b)
    assert np.abs(np.asarray(a - c)).max() > 1e-2 and np.abs(np.asarray(a - d)).max() > 1e-2


@pytest.mark.parity
def test_tiny_vit_image_classifier_matches_hf(tmp_path):
    """HF ViTForImageClassification (linear head on the final-LayerNorm [CLS]) equals
    smat's SequenceClassifier(pooling="cls") once the HF head weights are copied in."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=37, num_labels=3,
                                    attn_implementation="eager")
    hf = transformers.ViTForImageClassification(config).eval()
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in hf.named_parameters():
            scale = 1.0 if "layernorm" in name and name.endswith("weight") else 0.0
            param.copy_(scale + 0.1 * torch.randn_like(param))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    model, processor = from_pretrained(tmp_path, task="classification", num_labels=3,
                                       pooling="cls")
    assert processor is None and isinstance(model, SequenceClassifier)
    model.classifier.kernel[...] = jnp.asarray(hf.classifier.weight.detach().numpy().T)
    model.classifier.bias[...] = jnp.asarray(hf.classifier.bias.detach().numpy())
    pixels = np.asarray(images(3))
    ours = run(model, pixel_values=pixels)
    with torch.no_grad():
        ref = hf(pixel_values=torch.tensor(pixels), output_hidden_states=True,
                 output_attentions=True)
    assert np.abs(np.asarray(ours.logits) - ref.logits.numpy()).max() <= 1e-4
    for a, b in zip(ours.encoder.hidden_states, ref.hidden_states, strict=True):
        assert np.abs(np.asarray(a) - b.numpy()).max() <= 1e-4
    probs = np.asarray(jax.nn.softmax(ours.encoder.attention_logits, axis=-1))
    for layer, b in enumerate(ref.attentions):
        assert np.abs(probs[layer] - b.numpy()).max() <= 1e-4
