import jax
import numpy as np
import pytest
from transformers import AutoTokenizer

from smat.models import functional, minilm_path
from smat.store import model_store
from tests.helpers import tiny_classifier


def test_round_trip_is_exact(tmp_path):
    model = tiny_classifier(seed=3, pooling="cls")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    model_store.save(tmp_path / "m", model, tokenizer, max_len=16, label_names=["a", "b"])
    restored = model_store.load(tmp_path / "m")
    for a, b in zip(jax.tree.leaves(functional.split(model)[1]),
                    jax.tree.leaves(functional.split(restored.model)[1]), strict=True):
        np.testing.assert_array_equal(a, b)
    assert restored.info["pooling"] == "cls" and restored.info["label_names"] == ["a", "b"]
    assert restored.tokenizer("a film")["input_ids"] == tokenizer("a film")["input_ids"]


def test_saving_other_params_and_errors(tmp_path):
    model = tiny_classifier()
    graphdef, params = functional.split(model)
    zeros = jax.tree.map(np.zeros_like, params)
    model_store.save(tmp_path / "z", model, None, params=zeros)
    restored = model_store.load(tmp_path / "z")
    assert restored.tokenizer is None
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(
        functional.split(restored.model)[1]))
    with pytest.raises(FileNotFoundError, match="not a smat trained-model folder"):
        model_store.load(tmp_path / "missing")


def test_the_fingerprint_names_the_weights_not_the_settings(tmp_path):
    """Two models of one architecture and settings whose weights differ in one value get
    different fingerprints; a save and load keeps it; a model.json saved before it was
    recorded gets the same value computed from its stored parameters."""
    import json

    model = tiny_classifier(seed=3)
    params = functional.split(model)[1]
    leaves, treedef = jax.tree.flatten(params)
    nudged = jax.tree.unflatten(treedef, [leaves[0].at[(0,) * leaves[0].ndim].add(1e-6),
                                          *leaves[1:]])
    assert model_store.params_fingerprint(nudged) != model_store.params_fingerprint(params)
    assert model_store.params_fingerprint(
        functional.split(tiny_classifier(seed=3))[1]) == model_store.params_fingerprint(params)
    folder = model_store.save(tmp_path / "m", model, None)
    info = json.loads((folder / "model.json").read_text())
    assert info["params_fingerprint"] == model_store.params_fingerprint(params)
    assert model_store.params_fingerprint(
        functional.split(model_store.load(folder).model)[1]) == info["params_fingerprint"]
    del info["params_fingerprint"]
    (folder / "model.json").write_text(json.dumps(info))
    assert model_store.saved_params_fingerprint(folder) == model_store.params_fingerprint(params)


def test_encode_texts_tokenizes_at_max_len_and_names_the_job_in_errors():
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    text_model = model_store.TrainedModel(tiny_classifier(), tokenizer,
                                          {"encoder": "text", "max_len": 8})
    encoded = model_store.encode_texts(text_model, ["a film", "another film"], job="predict")
    assert encoded.input_ids.shape == (2, 8)
    assert encoded.input_ids[0].tolist() == tokenizer(
        "a film", padding="max_length", max_length=8)["input_ids"]
    with pytest.raises(ValueError, match="no texts to predict"):
        model_store.encode_texts(text_model, [], job="predict")
    vision_model = model_store.TrainedModel(tiny_classifier(), None, {"encoder": "vit"})
    with pytest.raises(ValueError, match=r"no tokenizer \(vit encoder\); explain takes text"):
        model_store.encode_texts(vision_model, ["a film"], job="explain")


def test_first_layers_checkpoint_keeps_the_first_blocks(tiny_checkpoint, tmp_path):
    from smat.models import from_pretrained

    cut = model_store.first_layers_checkpoint(tiny_checkpoint, 1, tmp_path / "cut")
    small, tokenizer = from_pretrained(cut, task="classification", num_labels=2)
    full, _ = from_pretrained(tiny_checkpoint, task="classification", num_labels=2)
    assert small.encoder.config.num_layers == 1 and tokenizer is not None
    np.testing.assert_array_equal(np.asarray(small.encoder.layers.attention.query_kernel[0]),
                                  np.asarray(full.encoder.layers.attention.query_kernel[0]))
    with pytest.raises(ValueError, match="has 2 layers, fewer than 3"):
        model_store.first_layers_checkpoint(tiny_checkpoint, 3, tmp_path / "c3")
