"""`smat explain` on an image (ViT) model: one score per patch for each explainer, equal to
the registry's patch scores of the same images whatever the batching; an HTML page with one
overlay per image and explainer, a PNG grid, and clear errors for explainers that only
explain tokens."""

import json

import numpy as np
import pytest
from flax import nnx

from smat import registry
from smat.cli import main
from smat.jobs.explain import ExplainConfig
from smat.jobs.explain_images import explain_images, model_pixels
from smat.models import SequenceClassifier, TextConfig, ViTConfig, functional
from smat.store import model_store

EXPLAINERS = ["gradient", "integrated_gradients", "attention_all", "lime"]


@pytest.fixture(scope="module")
def vit_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vit") / "model"
    model = SequenceClassifier(ViTConfig.tiny(), num_labels=2, pooling="cls",
                               rngs=nnx.Rngs(0))
    model_store.save(folder, model, None, label_names=["cat", "dog"])
    return folder


@pytest.fixture(scope="module")
def images_npz(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("images") / "images.npz"
    # 5 images of another size than the model's 16 x 16: explain resizes them
    np.savez(path, images=rng.integers(0, 256, (5, 20, 20, 3), dtype=np.uint8),
             labels=np.array([0, 1, 1, 0, 1]), label_names=np.array(["cat", "dog"]))
    return path


def test_explain_command_writes_patch_scores_page_and_grid(vit_model, images_npz, tmp_path):
    out = tmp_path / "out"
    assert main(["explain", "--model", str(vit_model), "--explainers", *EXPLAINERS,
                 "--batch-size", "2", "--ig-steps", "8", "--no-progress",
                 "--output-dir", str(out), str(images_npz)]) == 0
    records = json.loads((out / "explanations.json").read_text())
    assert len(records) == 5 and [r["label"] for r in records] == ["cat", "dog", "dog",
                                                                     "cat", "dog"]
    assert all(r["prediction"] in ("cat", "dog") and 0.5 <= r["probability"] <= 1
               for r in records)
    num_patches = ViTConfig.tiny().num_patches
    for record in records:
        assert sorted(record["scores"]) == sorted(EXPLAINERS)
        assert all(len(v) == num_patches for v in record["scores"].values())
        assert all(np.any(np.asarray(v) != 0) for v in record["scores"].values())

    # the same scores as the registry's on the model's pixels in one batch of all five
    # (batch size 2 cut them into 3 calls, the last padded)
    trained = model_store.load(vit_model)
    from smat.data import load_images

    data = load_images(images_npz, image_size=16)
    pixels = model_pixels(trained, data.images)
    assert pixels.shape == (5, 3, 16, 16)
    graphdef, params = functional.split(trained.model)
    for name in EXPLAINERS:
        direct = registry.static_patch_scores(graphdef, params, pixels, name=name, ig_steps=8,
                                              row_ids=np.arange(5))
        written = np.array([r["scores"][name] for r in records])
        np.testing.assert_allclose(written, direct, rtol=1e-4, atol=1e-6, err_msg=name)

    page = (out / "explanations.html").read_text()
    # per image: the input and one overlay per explainer, each overlay one cell per patch
    assert page.count("<figure") == 5 * (1 + len(EXPLAINERS))
    assert page.count("class='patch'") == 5 * len(EXPLAINERS) * num_patches
    assert page.count("data:image/png;base64,") == 5 * (1 + len(EXPLAINERS))
    assert "label cat, prediction" in page
    assert (out / "explanations.png").read_bytes()[:4] == b"\x89PNG"


def test_token_only_explainers_and_text_models_are_refused(vit_model, images_npz, tmp_path,
                                                           capsys):
    code = main(["explain", "--model", str(vit_model), "--explainers", "occlusion",
                 "--output-dir", str(tmp_path / "x"), str(images_npz)])
    assert code != 0
    said = capsys.readouterr().err
    assert "occlusion explains tokens, not image patches" in said and "Traceback" not in said
    assert not (tmp_path / "x").exists()
    text = SequenceClassifier(TextConfig.tiny(), num_labels=2, rngs=nnx.Rngs(0))
    text_model = model_store.load(model_store.save(tmp_path / "text", text, None))
    with pytest.raises(ValueError, match="needs an image \\(ViT\\) model"):
        explain_images(text_model, np.zeros((1, 16, 16, 3)),
                       ExplainConfig(explainers=("gradient",)))
    # a learned explainer of a text model's 6 x 12 heads does not weigh this ViT's 2 x 4
    from smat.explainers import AttentionExplainerConfig, init
    from smat.store.explainer_store import save_explainer

    config = AttentionExplainerConfig(num_layers=6, num_heads=12)
    save_explainer(tmp_path / "minilm_explainer", init(None, config), config)
    assert main(["explain", "--model", str(vit_model), "--explainers",
                 str(tmp_path / "minilm_explainer"), "--output-dir", str(tmp_path / "y"),
                 str(images_npz)]) == 2
    assert "a model with 6 layers x 12 heads; this model has 2 x 4" in capsys.readouterr().err


def test_the_png_grid_shows_the_first_images_and_the_json_all(tmp_path):
    from PIL import Image

    from smat.data import ImageDataset
    from smat.jobs.explain_images import (
        PNG_GRID_IMAGES,
        ImageExplanations,
        write_image_explanations,
    )

    n = PNG_GRID_IMAGES + 4
    rng = np.random.default_rng(0)
    data = ImageDataset(rng.random((n, 16, 16, 3)).astype(np.float32),
                        np.zeros(n, np.int32), ("cat",), "memory")
    explanations = ImageExplanations({"gradient": rng.random((n, 16)).astype(np.float32)},
                                     np.zeros(n), np.full(n, 0.9))
    write_image_explanations(explanations, data, tmp_path, label_names=["cat"])
    assert len(json.loads((tmp_path / "explanations.json").read_text())) == n
    with Image.open(tmp_path / "explanations.png") as png:
        # one 2.1-inch row each and a 0.9-inch row of colour bars
        assert png.size[1] == round((2.1 * PNG_GRID_IMAGES + 0.9) * 100)
