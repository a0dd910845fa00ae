import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat.explainers import AttentionExplainerConfig, pool_attention, to_distribution
from smat.explainers.attention import AttentionExplainerParams
from smat.models import functional
from smat.store.explainer_store import load_explainer, save_explainer
from tests.helpers import synthetic_encoded, tiny_classifier


def test_round_trip_and_user_model_probability_path(tmp_path):
    config = AttentionExplainerConfig(num_layers=2, num_heads=4)
    phi = jnp.asarray(np.random.default_rng(0).normal(size=8), jnp.float32)
    explainer = load_explainer(save_explainer(tmp_path / "e", AttentionExplainerParams(phi),
                                              config))
    np.testing.assert_array_equal(explainer.params.phi, phi)
    assert explainer.config == config
    assert explainer.head_weights().shape == (2, 4)

    # A "user's own model" that only returns attention probabilities (like HF
    # output_attentions=True): the loaded explainer gives the same distribution as on logits.
    data = synthetic_encoded(4)
    graphdef, params = functional.split(tiny_classifier())
    out = functional.apply(graphdef, params, data.input_ids, attention_mask=data.attention_mask)
    mask = jnp.asarray(data.attention_mask) != 0
    logits = out.encoder.attention_logits  # (L, B, H, T, T)
    probs = jax.nn.softmax(jnp.where(mask[None, :, None, None, :], logits, -1e9), axis=-1)
    from_probs = explainer(pool_attention(probs, mask, kind="probs"), mask)
    from_logits = explainer(out.encoder.pooled_attention_logits, mask)
    np.testing.assert_allclose(to_distribution(from_probs), to_distribution(from_logits),
                               atol=1e-5)
    assert jax.jit(lambda p, m: explainer(p, m).scores)(
        out.encoder.pooled_attention_logits, mask).shape == (4, 16)


def test_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no saved explainer"):
        load_explainer(tmp_path)
