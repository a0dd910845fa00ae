"""Patch-level explanations of a ViT (baselines.patch_attribution_inputs): the gradient
explainers attribute at the patch embeddings, so every explainer gives one score per patch;
checked against a gradient taken directly through the pixels' patch projection, and masked
patches score exactly zero."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import baselines
from smat.models import SequenceClassifier, ViTConfig, functional


@pytest.fixture(scope="module")
def vit():
    model = SequenceClassifier(ViTConfig.tiny(), num_labels=3, pooling="cls",
                               rngs=nnx.Rngs(0))
    pixels = jax.random.normal(jax.random.key(1), (2, 3, 16, 16))
    return (*functional.split(model), pixels)


def test_one_score_per_patch_equal_to_the_gradient_through_the_patch_projection(vit):
    graphdef, params, pixels = vit
    f, x, mask = baselines.patch_attribution_inputs(graphdef, params, pixel_values=pixels)
    num_patches = ViTConfig.tiny().num_patches
    assert x.shape == (2, num_patches, 32) and mask.shape == (2, num_patches)
    scores = baselines.saliency(f, x, mask, target=jnp.array([0, 2])).saliency.scores
    assert scores.shape == (2, num_patches)

    # x is the model's own patch projection of the pixels ...
    model = nnx.merge(graphdef, params)
    np.testing.assert_allclose(x, model.encoder.patchify(pixels), rtol=1e-6, atol=1e-6)

    # ... and the scores the L2 norm of the target logit's gradient with respect to it
    def logit(embeds, row, target):
        out = functional.apply(graphdef, params, inputs_embeds=embeds[None])
        return out.logits[0, target]

    direct = np.stack([np.linalg.norm(jax.grad(logit)(x[row], row, target), axis=-1)
                       for row, target in ((0, 0), (1, 2))])
    np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-7)
    # and f is the model: the same logits as the pixels give
    np.testing.assert_allclose(f(x, mask), functional.apply(graphdef, params,
                                                            pixel_values=pixels).logits,
                               rtol=1e-5, atol=1e-6)


def test_hidden_patches_score_zero_and_change_the_prediction(vit):
    graphdef, params, pixels = vit
    hidden = np.ones((2, 16), bool)
    hidden[:, :5] = False
    f, x, mask = baselines.patch_attribution_inputs(graphdef, params, pixel_values=pixels,
                                                   patch_mask=hidden)
    for explain in (baselines.saliency, baselines.input_x_gradient,
                    baselines.integrated_gradients):
        scores = np.asarray(explain(f, x, mask).saliency.scores)
        assert np.all(scores[:, :5] == 0) and np.any(scores[:, 5:] != 0), explain.__name__
    assert not np.allclose(f(x, mask), f(x, jnp.ones_like(mask)))  # the mask reaches the model
    with pytest.raises(ValueError, match="patch_mask must have shape"):
        baselines.patch_attribution_inputs(graphdef, params, pixel_values=pixels,
                                           patch_mask=np.ones((2, 17), bool))


def test_attention_explainers_score_patches_without_the_cls_key(vit):
    graphdef, params, pixels = vit
    pooled, mask = baselines.patch_attention_inputs(graphdef, params, pixel_values=pixels)
    num_patches = ViTConfig.tiny().num_patches
    assert pooled.shape == (2, 2, 4, num_patches) and mask.shape == (2, num_patches)
    scores = baselines.all_layers_attention(pooled, mask).scores
    assert scores.shape == (2, num_patches)
    # the patches' columns of the model's own pooled attention rows, averaged over heads
    full = functional.apply(graphdef, params, pixel_values=pixels, attention="pooled")
    rows = np.asarray(full.encoder.pooled_attention_logits)  # (L, B, H, 1 + patches)
    np.testing.assert_allclose(scores, rows[..., 1:].mean(axis=(0, 2)), rtol=1e-5, atol=1e-7)
    last = baselines.last_layer_attention(pooled, mask).scores
    np.testing.assert_allclose(last, rows[-1, :, :, 1:].mean(axis=1), rtol=1e-5, atol=1e-7)
