"""Tests for smat.models.heads: ScalarMix, pooling, SequenceClassifier (text and ViT)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import smat.models
from smat.data import patch_tokens
from smat.models import (
    ScalarMix,
    SequenceClassifier,
    TextConfig,
    ViTConfig,
    cls_pool,
    functional,
    masked_mean,
)


@functools.partial(jax.jit, static_argnames=("graphdef", "attention"))
def _apply(graphdef, params, **kwargs):
    return functional.apply(graphdef, params, **kwargs)


def run(model, **kwargs):
    return _apply(*functional.split(model), **kwargs)


IDS = jnp.array([[2, 5, 9, 7, 3], [2, 8, 3, 0, 0]], jnp.int32)
MASK = (IDS != 0).astype(jnp.int32)


def test_public_names_have_docstrings():
    for name in smat.models.__all__:
        assert getattr(smat.models, name).__doc__, name


def test_masked_mean_and_cls_pool():
    hidden = jax.random.normal(jax.random.key(0), (2, 5, 3))
    mask = MASK.astype(bool)
    np.testing.assert_allclose(masked_mean(hidden, mask)[1], hidden[1, :3].mean(0), atol=1e-6)
    np.testing.assert_array_equal(cls_pool(hidden), hidden[:, 0])
    assert np.all(np.asarray(masked_mean(hidden, jnp.zeros((2, 5), bool))) == 0)


def test_scalar_mix_init_and_formula():
    mix = ScalarMix(3)
    np.testing.assert_array_equal(mix.coefficients[...], np.zeros(3))
    assert float(mix.gamma[...]) == 1.0
    states = [jax.random.normal(jax.random.key(i), (2, 5, 4)) for i in range(3)]
    mask = MASK.astype(bool)
    means = np.stack([np.asarray(masked_mean(h, mask)) for h in states])  # (3, B, D)
    np.testing.assert_allclose(mix(states, mask), means.mean(0), atol=1e-6)
    mix.coefficients[...] = jnp.array([0.5, -1.0, 2.0])
    mix.gamma[...] = jnp.array(1.7)
    weights = np.exp([0.5, -1.0, 2.0]) / np.exp([0.5, -1.0, 2.0]).sum()
    np.testing.assert_allclose(mix(states, mask), 1.7 * np.einsum("s,sbd->bd", weights, means),
                               atol=1e-5)
    with pytest.raises(ValueError, match="built for 3 hidden states, got 2"):
        mix(states[:2], mask)


@pytest.mark.parametrize("pooling", ["scalar_mix", "cls", "mean"])
def test_head_is_pooling_then_linear(pooling):
    model = SequenceClassifier(TextConfig.tiny(), num_labels=3, pooling=pooling,
                               rngs=nnx.Rngs(0))
    out = run(model, input_ids=IDS, attention_mask=MASK)
    assert out.logits.shape == (2, 3)
    enc, mask = out.encoder, MASK.astype(bool)
    pooled = {
        "scalar_mix": lambda: np.mean([masked_mean(h, mask) for h in enc.hidden_states], 0),
        "cls": lambda: cls_pool(enc.last_hidden_state),
        "mean": lambda: masked_mean(enc.last_hidden_state, mask),
    }[pooling]()
    expected = np.asarray(pooled) @ np.asarray(model.classifier.kernel[...]) + np.asarray(
        model.classifier.bias[...])
    np.testing.assert_allclose(out.logits, expected, atol=1e-5)


def test_regression_and_validation():
    model = SequenceClassifier(TextConfig.tiny(), num_labels=1, task="regression",
                               rngs=nnx.Rngs(0))
    assert run(model, input_ids=IDS, attention_mask=MASK).logits.shape == (2, 1)
    cfg = TextConfig.tiny()
    with pytest.raises(ValueError, match="regression needs num_labels == 1, got 2"):
        SequenceClassifier(cfg, num_labels=2, task="regression", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="classification needs num_labels >= 2, got 1"):
        SequenceClassifier(cfg, num_labels=1, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="pooling must be one of .* got 'max'"):
        SequenceClassifier(cfg, num_labels=2, pooling="max", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="task must be one of"):
        SequenceClassifier(cfg, num_labels=2, task="ranking", rngs=nnx.Rngs(0))
    with pytest.raises(TypeError, match="encoder_config must be one of"):
        SequenceClassifier({"hidden_size": 3}, num_labels=2, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="attention_mask .* is required"):
        model(IDS)
    with pytest.raises(ValueError, match="pixel_values given to a text model"):
        model(IDS, attention_mask=MASK, pixel_values=jnp.zeros((2, 3, 16, 16)))


def test_vit_classifier():
    model = SequenceClassifier(ViTConfig.tiny(), num_labels=4, rngs=nnx.Rngs(0))
    pixels = jax.random.normal(jax.random.key(0), (2, 3, 16, 16))
    out = run(model, pixel_values=pixels)
    assert out.logits.shape == (2, 4) and out.encoder.last_hidden_state.shape == (2, 17, 32)
    mean = np.mean([masked_mean(h, jnp.ones((2, 17), bool)) for h in out.encoder.hidden_states],
                   0)
    np.testing.assert_allclose(
        out.logits, mean @ np.asarray(model.classifier.kernel[...]), atol=1e-5)
    with pytest.raises(ValueError, match="patch tokens"):
        model(IDS, pixel_values=pixels)
    with pytest.raises(ValueError, match="token_type_ids given to a vision model"):
        model(pixel_values=pixels, token_type_ids=jnp.zeros((2, 17), jnp.int32))


def test_vit_reads_patch_tokens_as_its_pixels():
    # the training path's rows (smat.data.PatchLayout): logits equal those of the pixels,
    # on random weights where a patch in the wrong place (position embeddings) would show
    model = SequenceClassifier(ViTConfig.tiny(), num_labels=3, rngs=nnx.Rngs(0))
    pixels = np.asarray(jax.random.normal(jax.random.key(1), (2, 3, 16, 16)))
    tokens = patch_tokens(pixels, 4)
    want = run(model, pixel_values=pixels)
    got = run(model, input_ids=tokens, attention_mask=np.ones((2, 17), np.int32),
              token_type_ids=np.zeros((2, 17), np.int32))
    np.testing.assert_allclose(got.logits, want.logits, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.encoder.last_hidden_state,
                               want.encoder.last_hidden_state, rtol=1e-5, atol=1e-6)
    moved = tokens.copy()
    moved[:, [1, 2]] = tokens[:, [2, 1]]  # two patches swapped
    assert not np.allclose(run(model, input_ids=moved).encoder.last_hidden_state,
                           want.encoder.last_hidden_state, atol=1e-2)


def test_head_dropout_uses_its_own_key():
    cfg = dataclasses.replace(TextConfig.tiny(), hidden_dropout=0.5, attention_dropout=0.0)
    model = SequenceClassifier(cfg, num_labels=2, rngs=nnx.Rngs(0))
    a = run(model, input_ids=IDS, attention_mask=MASK, dropout_rng=jax.random.key(0))
    b = run(model, input_ids=IDS, attention_mask=MASK, dropout_rng=jax.random.key(0))
    c = run(model, input_ids=IDS, attention_mask=MASK, dropout_rng=jax.random.key(1))
    np.testing.assert_array_equal(a.logits, b.logits)
    assert np.abs(np.asarray(a.logits - c.logits)).max() > 1e-4
    # the encoder sees fold_in(key, 0)
    enc = run(model.encoder, input_ids=IDS, attention_mask=MASK,
              dropout_rng=jax.random.fold_in(jax.random.key(0), 0))
    np.testing.assert_array_equal(enc.last_hidden_state, a.encoder.last_hidden_state)


@pytest.mark.parametrize("head", ["electra", "roberta"])
def test_reference_heads_equal_hugging_faces_pytorch_heads(head):
    """The SMaT reference's heads: Hugging Face's ELECTRA head (dense, exact GELU, dense) and
    RoBERTa head (the same with tanh), in evaluation mode, with the same weights."""
    torch = pytest.importorskip("torch")
    import transformers

    model = SequenceClassifier(TextConfig.tiny(), num_labels=3, head=head, rngs=nnx.Rngs(0))
    hidden = TextConfig.tiny().hidden_size
    config_type, module = {
        "electra": (transformers.ElectraConfig, transformers.models.electra.modeling_electra
                    .ElectraClassificationHead),
        "roberta": (transformers.RobertaConfig, transformers.models.roberta.modeling_roberta
                    .RobertaClassificationHead)}[head]
    reference = module(config_type(hidden_size=hidden, num_labels=3)).eval()
    with torch.no_grad():
        for name, dense in (("dense", model.head_hidden), ("out_proj", model.classifier)):
            getattr(reference, name).weight.copy_(torch.tensor(np.asarray(dense.kernel[...]).T))
            getattr(reference, name).bias.copy_(torch.tensor(np.asarray(dense.bias[...])))
    # weights that matter: pooled vectors large enough for GELU and tanh to bend
    pooled = 3.0 * jax.random.normal(jax.random.key(1), (5, hidden))
    with torch.no_grad():
        expected = reference(torch.tensor(np.asarray(pooled))[:, None, :]).numpy()
    np.testing.assert_allclose(model.classify(pooled), expected, atol=1e-5)
    out = run(model, input_ids=IDS, attention_mask=MASK)
    enc, mask = out.encoder, MASK.astype(bool)
    mixed = np.mean([masked_mean(h, mask) for h in enc.hidden_states], 0)
    np.testing.assert_allclose(out.logits, model.classify(jnp.asarray(mixed)), atol=1e-5)
    with pytest.raises(ValueError, match="head must be one of .* got 'mlp'"):
        SequenceClassifier(TextConfig.tiny(), num_labels=2, head="mlp", rngs=nnx.Rngs(0))


def test_a_reference_head_is_saved_and_loaded_and_randomized(tmp_path):
    from smat.models.randomize import randomized_family
    from smat.store import model_store

    model = SequenceClassifier(TextConfig.tiny(), num_labels=2, head="electra",
                               rngs=nnx.Rngs(0))
    model_store.save(tmp_path / "model", model, None, max_len=8, label_names=["a", "b"])
    loaded = model_store.load(tmp_path / "model")
    assert loaded.model.head == "electra" and loaded.info["head"] == "electra"
    np.testing.assert_array_equal(run(loaded.model, input_ids=IDS, attention_mask=MASK).logits,
                                  run(model, input_ids=IDS, attention_mask=MASK).logits)
    # the default head is not recorded: folders written before the field read as they were
    plain = SequenceClassifier(TextConfig.tiny(), num_labels=2, rngs=nnx.Rngs(0))
    assert "head" not in model_store.describe(plain)
    # a run records the head only when it is not the default, and replays it
    from smat.models.source import ModelSource

    assert "head" not in ModelSource().settings()
    chosen = ModelSource(head="roberta")
    replayed = ModelSource.from_settings(chosen.settings())
    assert replayed.head == "roberta" and replayed.settings() == chosen.settings()
    with pytest.raises(ValueError, match="ModelSource.head must be one of"):
        ModelSource(head="mlp")
    # re-initialising the head re-draws its hidden layer too
    family = randomized_family(model, mode="full", head=True, seed=3)
    hidden = np.asarray(family.params["head_hidden"]["kernel"])
    assert not np.allclose(hidden[0], hidden[1])
