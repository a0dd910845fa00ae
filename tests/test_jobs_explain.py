"""Tests for smat.jobs.explain: explanations by name over a tokenized data set."""

import jax
import numpy as np
import pytest

from smat.jobs.explain import ExplainConfig, check_model_and_rows, explain_encoded
from smat.models import functional
from tests.helpers import synthetic_encoded, tiny_classifier


def test_scores_do_not_depend_on_the_batch_size():
    graphdef, params = functional.split(tiny_classifier(seed=4))
    data = synthetic_encoded(19, seed=5)
    names = ["random", "gradient", "attention_all"]
    by_size = [explain_encoded(graphdef, params, data, names, task="classification",
                               batch_size=size) for size in (4, 7, 32)]
    (scores, predictions, _), others = by_size[0], by_size[1:]
    for other_scores, other_predictions, _ in others:
        np.testing.assert_array_equal(other_predictions, predictions)
        np.testing.assert_array_equal(other_scores["random"], scores["random"])
        for name in ("gradient", "attention_all"):
            np.testing.assert_allclose(other_scores[name], scores[name], rtol=1e-5, atol=1e-7)
    real = data.attention_mask == 1
    assert np.all(scores["random"][~real] == 0) and len(np.unique(scores["random"][real])) > 100
    assert not np.array_equal(scores["random"][0], scores["random"][1])


def test_length_sorted_cut_batches_equal_one_uncut_call(monkeypatch):
    from smat import registry

    graphdef, params = functional.split(tiny_classifier(seed=6))
    # weights large enough that the model is far from linear in a coalition, so that Lime's
    # and KernelShap's coefficients follow their draws
    params = jax.tree.map(lambda p: 4 * p, params)
    data = synthetic_encoded(23, seq_len=40, seed=7)
    # Lime, KernelShap and GradientShap are seeded per row and draw nothing per column of
    # padding, so they too run on cut batches
    names = ["gradient", "integrated_gradients", "attention_all", "attention_rollout", "lime",
             "kernel_shap", "gradient_shap"]
    uncut = registry.static_scores
    widths = []

    def recording(*args, **kwargs):
        widths.append(args[2].shape[1])  # input_ids (B, T) as the explainer sees them
        return uncut(*args, **kwargs)

    monkeypatch.setattr(registry, "static_scores", recording)
    scores, predictions, _ = explain_encoded(graphdef, params, data, names,
                                             task="classification", ig_steps=8, batch_size=8,
                                             length_multiple=8)
    inputs = (data.input_ids, data.attention_mask, data.token_type_ids)
    for name in names:
        reference = np.asarray(uncut(graphdef, params, *inputs, name=name, ig_steps=8,
                                     row_ids=np.arange(23)))
        np.testing.assert_allclose(scores[name], reference, rtol=1e-5, atol=1e-6, err_msg=name)
    logits = functional.apply(graphdef, params, inputs[0], attention_mask=inputs[1],
                              token_type_ids=inputs[2], attention="none").logits
    np.testing.assert_array_equal(predictions, np.argmax(np.asarray(logits), axis=-1))
    assert all(width % 8 == 0 for width in widths) and min(widths) < max(widths) == 40


def test_explain_config_rejects_bad_settings():
    with pytest.raises(ValueError, match="ExplainConfig.precision must be one of"):
        ExplainConfig(explainers=("gradient",), precision="half")
    with pytest.raises(ValueError, match="ExplainConfig.length_multiple must be >= 1, got 0"):
        ExplainConfig(explainers=("gradient",), length_multiple=0)


def test_a_config_is_never_silently_ignored():
    """explain_data and the reports check the model's precision and the row count against
    the config they are given (check_model_and_rows) instead of ignoring either."""
    _, params = functional.split(tiny_classifier(seed=4))
    explain = ExplainConfig(explainers=("gradient",), num_examples=3)
    check_model_and_rows(params, 3, explain)
    with pytest.raises(ValueError, match="5 rows given but ExplainConfig.num_examples is 3: "
                                         "select the rows first"):
        check_model_and_rows(params, 5, explain)
    with pytest.raises(ValueError, match="the model is in bfloat16 but ExplainConfig.precision "
                                         "is 'float32'"):
        check_model_and_rows(functional.cast(params, "bfloat16"), 3, explain)


def test_a_learned_explainer_of_another_architecture_is_refused_before_any_work(tmp_path):
    """Its coefficients weigh another model's heads: the error names the explainer and
    both shapes; one learned for this model's 2 x 2 heads explains it."""
    from smat.explainers import AttentionExplainerConfig, init
    from smat.models import TextConfig
    from smat.store.explainer_store import save_explainer

    graphdef, params = functional.split(tiny_classifier(seed=4))
    tiny = TextConfig.tiny()
    data = synthetic_encoded(5, seed=5)
    for name, (layers, heads) in (("other", (6, 12)), ("own", (tiny.num_layers, tiny.num_heads))):
        config = AttentionExplainerConfig(num_layers=layers, num_heads=heads)
        save_explainer(tmp_path / name, init(None, config), config)
    with pytest.raises(ValueError, match=f"explainer {tmp_path / 'other'} weighs the attention "
                       f"heads of a model with 6 layers x 12 heads; this model has "
                       f"{tiny.num_layers} x {tiny.num_heads}"):
        explain_encoded(graphdef, params, data, ["gradient", str(tmp_path / "other")],
                        task="classification")
    scores, _, _ = explain_encoded(graphdef, params, data, [str(tmp_path / "own")],
                                   task="classification")
    assert scores[str(tmp_path / "own")].shape == data.input_ids.shape
