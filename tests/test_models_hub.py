"""Tests for smat.models.hub: HF checkpoint loading, parity of tiny random models, errors."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from smat.models import SequenceClassifier, TextConfig, from_pretrained, functional, minilm_path

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NO_TOKENIZER = "no tokenizer files"
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=64, hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, attn_implementation="eager")


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _apply(graphdef, params, **kwargs):
    return functional.apply(graphdef, params, **kwargs)


def run(model, **kwargs):
    return _apply(*functional.split(model), **kwargs)


def randomize(model) -> None:
    """Non-trivial weights everywhere (biases and LayerNorms too), so layouts are tested."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
            else:
                param.copy_(0.1 * torch.randn_like(param))


def save(model, folder) -> None:
    model.eval()
    model.save_pretrained(folder, safe_serialization=True)


def load(folder, **kwargs):
    with pytest.warns(UserWarning, match=NO_TOKENIZER):
        model, tokenizer = from_pretrained(folder, **kwargs)
    assert tokenizer is None
    return model


def padded_ids(pad: int, vocab: int = 99):
    rng = np.random.default_rng(0)
    mask = np.arange(9)[None, :] < np.array([9, 5, 2, 7])[:, None]
    ids = np.where(mask, rng.integers(3, vocab, size=(4, 9)), pad)
    return ids.astype(np.int64), mask.astype(np.int64)


def compare_encoder(ours, ref, mask) -> None:
    """Hidden states and softmax(logits + padding bias) vs HF, <= 1e-4 max abs."""
    assert len(ours.hidden_states) == len(ref.hidden_states)
    for a, b in zip(ours.hidden_states, ref.hidden_states, strict=True):
        assert np.abs(np.asarray(a) - b.numpy()).max() <= 1e-4
    keep = jnp.asarray(mask, bool)[None, :, None, None, :]
    probs = np.asarray(jax.nn.softmax(jnp.where(keep, ours.attention_logits, -jnp.inf), -1))
    for layer, b in enumerate(ref.attentions):
        assert np.abs(probs[layer] - b.numpy()).max() <= 1e-4


def hf_outputs(module, ids, mask, **kwargs):
    with torch.no_grad():
        return module(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                      output_hidden_states=True, output_attentions=True, **kwargs)


# ----------------------------------------------------------------------------- parity


@pytest.mark.parity
def test_tiny_electra_classifier_checkpoint_matches_hf(tmp_path):
    """ELECTRA with embedding_size != hidden_size (projection), *ForSequenceClassification
    checkpoint (prefixed keys, its classifier allowlisted). Its head (dense-gelu-dense on
    CLS) differs from smat's, so the encoder outputs are compared."""
    config = transformers.ElectraConfig(**TINY, embedding_size=16, num_labels=3)
    hf = transformers.ElectraForSequenceClassification(config)
    randomize(hf)
    save(hf, tmp_path)
    model = load(tmp_path, task="classification", num_labels=3)
    assert model.encoder.config.embedding_size == 16
    ids, mask = padded_ids(config.pad_token_id)
    types = (np.arange(9)[None, :] >= 4) * mask
    ours = run(model, input_ids=ids, attention_mask=mask, token_type_ids=types)
    compare_encoder(ours.encoder, hf_outputs(hf.electra, ids, mask,
                                             token_type_ids=torch.tensor(types)), mask)


@pytest.mark.parity
@pytest.mark.parametrize("kind", ["roberta", "xlm-roberta"])
def test_tiny_roberta_and_xlmr_checkpoints_match_hf(tmp_path, kind):
    """Position ids past the padding index: RoBERTa (*ForSequenceClassification) and XLM-R
    (bare model, unprefixed keys)."""
    extra = dict(pad_token_id=1, max_position_embeddings=64 + 2, type_vocab_size=1)
    if kind == "roberta":
        config = transformers.RobertaConfig(**{**TINY, **extra}, num_labels=2)
        hf = transformers.RobertaForSequenceClassification(config)
        encoder = hf.roberta
    else:
        config = transformers.XLMRobertaConfig(**{**TINY, **extra})
        hf = encoder = transformers.XLMRobertaModel(config)
    randomize(hf)
    save(hf, tmp_path)
    model = load(tmp_path, task="classification", num_labels=2)
    assert model.encoder.config.architecture == "roberta"
    assert model.encoder.config.position_offset == 2
    ids, mask = padded_ids(pad=1)
    ours = run(model, input_ids=ids, attention_mask=mask)
    compare_encoder(ours.encoder, hf_outputs(encoder, ids, mask), mask)


@pytest.mark.parity
def test_tiny_bert_classifier_checkpoint_matches_hf(tmp_path):
    config = transformers.BertConfig(**TINY, num_labels=2)
    hf = transformers.BertForSequenceClassification(config)
    randomize(hf)
    save(hf, tmp_path)
    model = load(tmp_path, task="classification", num_labels=2, pooling="cls")
    ids, mask = padded_ids(pad=0)
    ours = run(model, input_ids=ids, attention_mask=mask)
    compare_encoder(ours.encoder, hf_outputs(hf.bert, ids, mask), mask)


# ----------------------------------------------------------------------------- loading


def test_minilm_path_and_tokenizer():
    folder = minilm_path()
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    model, tokenizer = from_pretrained(folder, task="regression", num_labels=1, pooling="mean")
    assert model.encoder.config == TextConfig.all_minilm_l6_v2()
    assert tokenizer("hello world")["input_ids"][0] == tokenizer.cls_token_id
    weights = load_file(str(folder / "model.safetensors"))
    np.testing.assert_array_equal(
        model.encoder.layers.attention.query_kernel[...][3],
        weights["encoder.layer.3.attention.self.query.weight"].T.reshape(384, 12, 32),
    )


def test_head_is_fresh_and_seeded(tmp_path):
    hf = transformers.BertModel(transformers.BertConfig(**TINY))
    save(hf, tmp_path)
    a = load(tmp_path, task="classification", num_labels=2, seed=0)
    b = load(tmp_path, task="classification", num_labels=2, seed=0)
    c = load(tmp_path, task="classification", num_labels=2, seed=1)
    np.testing.assert_array_equal(a.classifier.kernel[...], b.classifier.kernel[...])
    assert np.abs(np.asarray(a.classifier.kernel[...] - c.classifier.kernel[...])).max() > 0
    np.testing.assert_array_equal(a.scalar_mix.coefficients[...], np.zeros(3))
    np.testing.assert_array_equal(a.encoder.word_embeddings[...],
                                  c.encoder.word_embeddings[...])


# ----------------------------------------------------------------------------- errors


def test_folder_without_safetensors(tmp_path):
    hf = transformers.BertModel(transformers.BertConfig(**TINY))
    hf.config.to_json_file(str(tmp_path / "config.json"))
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(ValueError, match=r"no \*\.safetensors file .*pytorch_model\.bin.*"
                                         r"safe_serialization=True"):
        from_pretrained(tmp_path, task="classification", num_labels=2)


def test_unsupported_architecture(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(ValueError, match=r"unsupported architecture .*'gpt2'.*GPT2LMHeadModel"
                                         r".*supports model_type \['bert'"):
        from_pretrained(tmp_path, task="classification", num_labels=2)


def test_missing_config_and_bad_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        from_pretrained(tmp_path, task="classification", num_labels=2)
    with pytest.raises(FileNotFoundError, match="neither a checkpoint folder nor"):
        from_pretrained(str(tmp_path / "a" / "b" / "c"), task="classification", num_labels=2)


def test_hub_id_offline_gives_clear_error():
    """An id that cannot be fetched (offline here; nonexistent online) -> one OSError."""
    with pytest.raises(OSError, match="could not download 'smat-tests/no-such-model'"):
        from_pretrained("smat-tests/no-such-model", task="classification", num_labels=2)


def test_missing_and_unmapped_keys_are_all_listed(tmp_path):
    hf = transformers.BertModel(transformers.BertConfig(**TINY))
    save(hf, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    del tensors["encoder.layer.1.intermediate.dense.weight"]
    del tensors["embeddings.LayerNorm.bias"]
    tensors["encoder.layer.0.attention.self.rotary.weight"] = np.zeros((4,), np.float32)
    tensors["decoder.weight"] = np.zeros((2, 2), np.float32)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError) as err:
        from_pretrained(tmp_path, task="classification", num_labels=2)
    message = str(err.value)
    assert "unmapped checkpoint keys (2)" in message
    assert "encoder.layer.0.attention.self.rotary.weight (4,)" in message
    assert "decoder.weight (2, 2)" in message
    assert "model parameters missing from the checkpoint (2)" in message
    assert "encoder.embeddings_norm.bias (32,)" in message
    assert "encoder.layers.intermediate.kernel layers [1]" in message
    assert "pooler" not in message  # allowlisted keys are not reported


def test_shape_mismatch_names_key_and_both_shapes(tmp_path):
    hf = transformers.BertModel(transformers.BertConfig(**TINY))
    save(hf, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 40}))
    with pytest.raises(ValueError, match="shape mismatches") as err:
        from_pretrained(tmp_path, task="classification", num_labels=2)
    message = str(err.value)
    assert ("encoder.layer.0.intermediate.dense.weight: checkpoint shape (37, 32) but model "
            "parameter encoder.layers.intermediate.kernel (32, 40) needs (40, 32)") in message
    assert "encoder.layer.1.output.dense.weight" in message


def test_duplicate_keys_are_reported(tmp_path):
    hf = transformers.BertModel(transformers.BertConfig(**TINY))
    save(hf, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["embeddings.LayerNorm.gamma"] = tensors["embeddings.LayerNorm.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"duplicated keys \(1\):\n.*embeddings\.LayerNorm\."
                                         r"(weight|gamma) and .* both fill "
                                         r"encoder\.embeddings_norm\.scale"):
        from_pretrained(tmp_path, task="classification", num_labels=2)


def test_bad_task_arguments(tmp_path):
    with pytest.raises(ValueError, match="regression needs num_labels == 1, got 2"):
        from_pretrained(minilm_path(), task="regression", num_labels=2)
    assert isinstance(
        from_pretrained(minilm_path(), task="classification", num_labels=4)[0],
        SequenceClassifier,
    )
