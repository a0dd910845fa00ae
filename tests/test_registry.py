"""Every registry explainer through the same conformance checks, and name resolution."""

import numpy as np
import pytest

from smat import registry
from smat.models import functional
from tests.helpers import synthetic_encoded, tiny_classifier


@pytest.fixture(scope="module")
def model_and_batch():
    graphdef, params = functional.split(tiny_classifier(seed=3))
    data = synthetic_encoded(6, seq_len=16, seed=2)
    return graphdef, params, (data.input_ids, data.attention_mask, data.token_type_ids)


ENSEMBLE = "ensemble:integrated_gradients+random+attention"


@pytest.mark.parametrize("name", [*sorted(registry.STATIC), ENSEMBLE])
def test_conformance(name, model_and_batch):
    graphdef, params, inputs = model_and_batch
    first = np.asarray(registry.static_scores(graphdef, params, *inputs, name=name, ig_steps=4))
    compiled = registry.static_scores._cache_size()
    again = np.asarray(registry.static_scores(graphdef, params, *inputs, name=name, ig_steps=4))
    assert registry.static_scores._cache_size() == compiled, "retraced on the second call"
    mask = inputs[1] != 0
    assert first.shape == inputs[0].shape and first.dtype == np.float32
    assert np.all(first[~mask] == 0), "non-zero score at padding"
    assert np.all(np.isfinite(first)) and np.any(first[mask] != 0)
    np.testing.assert_array_equal(again, first)  # deterministic (random: under its fixed seed)
    spec = registry.spec(name)
    assert spec.kind in registry.SCORE_KINDS
    if spec.kind == "magnitude":
        assert np.all(first >= 0)


@pytest.mark.parametrize("name", [*sorted(n for n, s in registry.STATIC.items()
                                          if s.batch_independent), ENSEMBLE])
def test_batch_independent_scores_follow_the_row_not_the_batch(name, model_and_batch):
    graphdef, params, inputs = model_and_batch
    whole = np.asarray(registry.static_scores(graphdef, params, *inputs, name=name,
                                              row_ids=np.arange(6)))
    rows = np.array([4, 1])
    part = np.asarray(registry.static_scores(graphdef, params, *(a[rows] for a in inputs),
                                             name=name, row_ids=rows))
    np.testing.assert_allclose(part, whole[rows], rtol=1e-5, atol=1e-6)


def test_aliases_and_student_settings():
    assert registry.spec("attention") is registry.STATIC["attention_all"]
    assert registry.STUDENT_SETTINGS[0] == "none" and registry.STUDENT_SETTINGS[-1] == "smat"
    perturbation = ("deeplift", "deeplift_shap", "smoothgrad", "gradient_shap",
                    "feature_ablation", "lime", "kernel_shap", "occlusion")
    assert registry.DEFAULT_BETA == {"none": 0.0, "gradient": 0.2, "input_x_gradient": 0.2,
                                     "integrated_gradients": 0.2, "attention_all": 5.0,
                                     "attention_last": 5.0, "attention_heads": 5.0,
                                     "smat": 5.0, "label_leak": 5.0,
                                     **{name: 0.2 for name in perturbation}}


def test_unknown_names_list_the_registry(tmp_path):
    with pytest.raises(ValueError, match=r"unknown explainer 'taylor'; choose from gradient, "):
        registry.spec("taylor")
    with pytest.raises(ValueError, match=r"unknown explainers \['taylor'\]: not registry names"):
        registry.check_explainers(["gradient", "taylor"])
    with pytest.raises(ValueError, match="name at least one explainer"):
        registry.check_explainers([])
    registry.check_explainers(["attention", str(tmp_path)])  # an alias and a folder are fine


def test_an_ensemble_of_one_is_its_member_normalized(model_and_batch):
    graphdef, params, inputs = model_and_batch
    mask = inputs[1] != 0
    signed = np.asarray(registry.static_scores(graphdef, params, *inputs,
                                               name="input_x_gradient"))
    absolute = np.abs(signed) / np.abs(signed).sum(axis=1, keepdims=True)
    one = np.asarray(registry.static_scores(graphdef, params, *inputs,
                                            name="ensemble:input_x_gradient"))
    np.testing.assert_allclose(one, absolute, rtol=1e-5, atol=1e-7)
    shifted = np.where(mask, signed - np.where(mask, signed, np.inf).min(1, keepdims=True), 0)
    np.testing.assert_allclose(
        np.asarray(registry.static_scores(graphdef, params, *inputs,
                                          name="ensemble_shift:input_x_gradient")),
        shifted / shifted.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(one.sum(axis=1), 1.0, rtol=1e-5)


def test_ensemble_scores_by_hand():
    a = np.array([[1.0, -3.0, 0.0, 5.0]])
    b = np.array([[2.0, 2.0, 0.0, 9.0]])
    mask = np.array([[1, 1, 1, 0]])  # the last column is padding
    np.testing.assert_allclose(registry.ensemble_scores([a, b], mask),
                               [[(0.25 + 0.5) / 2, (0.75 + 0.5) / 2, 0.0, 0.0]])
    # shift: a - (-3) = [4, 0, 3] / 7; b - 0 = [2, 2, 0] / 4
    np.testing.assert_allclose(registry.ensemble_scores([a, b], mask, normalization="shift"),
                               [[(4 / 7 + 0.5) / 2, 0.25, 1.5 / 7, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(registry.ensemble_scores([np.zeros((1, 4))], mask), 0.0)
    with pytest.raises(ValueError, match="'abs' or 'shift', got 'rank'"):
        registry.ensemble_scores([a], mask, normalization="rank")


def test_ensemble_members_must_be_registry_names():
    with pytest.raises(ValueError, match=r"ensemble 'ensemble:gradient\+taylor'.*\['taylor'\]"):
        registry.check_explainers(["ensemble:gradient+taylor"])
    with pytest.raises(ValueError, match="none given"):
        registry.spec("ensemble:")
    with pytest.raises(ValueError, match=r"\['smat'\] are not"):
        registry.spec("ensemble:gradient+smat")  # a learned explainer is no member
    assert registry.is_static("ensemble:gradient+attention")
    assert registry.spec("ensemble:gradient+attention").needs_gradients


@pytest.mark.parametrize("name", ["gradient", "attention_all"])
def test_patch_tokens_are_explained_as_their_images(name):
    # a ViT's training rows (patch tokens) get the image's patch scores, 0 at [CLS]
    import jax
    from flax import nnx

    from smat.data import patch_tokens
    from smat.models import SequenceClassifier, ViTConfig

    graphdef, params = functional.split(SequenceClassifier(ViTConfig.tiny(), num_labels=2,
                                                           rngs=nnx.Rngs(0)))
    pixels = np.asarray(jax.random.normal(jax.random.key(0), (3, 3, 16, 16)))
    tokens, ones = patch_tokens(pixels, 4), np.ones((3, 17), np.int32)
    got = np.asarray(registry.static_scores(graphdef, params, tokens, ones, 0 * ones,
                                            name=name))
    want = np.asarray(registry.static_patch_scores(graphdef, params, pixels, name=name))
    assert got.shape == (3, 17) and not got[:, 0].any()
    np.testing.assert_allclose(got[:, 1:], want, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="explains tokens, not image patches"):
        registry.static_scores(graphdef, params, tokens, ones, 0 * ones, name="occlusion")


def test_label_leak_marks_the_token_of_the_class_and_the_probe_reads_it(model_and_batch):
    """The positive control: class c puts all its score on real token c + 1 (the last one
    if the row is shorter), the text aside; a probe of its mass reads the class,
    one of random scores does not (above 0.95 against 0.49 here)."""
    from smat.evaluation.leakage import explanation_features, probe_accuracy

    graphdef, params, (ids, mask, types) = model_and_batch
    target = np.arange(len(ids)) % 2
    scores = np.asarray(registry.static_scores(graphdef, params, ids, mask, types, target,
                                               name="label_leak"))
    lengths = (mask != 0).sum(1)
    marked = np.minimum(target + 1, lengths - 1)
    np.testing.assert_array_equal(scores.argmax(1), marked)
    assert np.all((scores > 0).sum(1) == 1) and np.all(scores.max(1) == registry.LEAK_SCORE)
    predicted = np.asarray(registry.static_scores(graphdef, params, ids, mask, types,
                                                  name="label_leak")).argmax(1)
    logits = registry.BatchInputs.of_batch(graphdef, params, ids, mask, types)
    np.testing.assert_array_equal(predicted, np.minimum(
        np.asarray(logits.f(logits.x, logits.mask)).argmax(1) + 1, lengths - 1))

    rng = np.random.default_rng(0)
    rows = 200
    mask = (np.arange(16)[None] < rng.integers(4, 16, rows)[:, None]).astype(np.int32)
    classes = rng.integers(0, 2, rows)
    leak = np.where(np.arange(16)[None] == classes[:, None] + 1, registry.LEAK_SCORE, 0.0)
    noise = rng.uniform(size=(rows, 16)) * mask
    read = {name: probe_accuracy(explanation_features(values, mask != 0, bins=8), classes,
                                 folds=5)["accuracy"] for name, values in
            (("leak", leak), ("random", noise))}
    assert read["leak"] > 0.95 and read["random"] < 0.65, read
