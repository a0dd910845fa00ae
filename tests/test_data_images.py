"""Tests for smat.data.images: each image source read from small fixtures made here (class
folders of PNG files, an .npz file, a Hugging Face dataset saved to disk), the errors for
unreadable files, mixed sizes and missing labels, and the ViT preprocessing."""

import numpy as np
import pytest
from PIL import Image

from smat.data.images import (
    ImageDataset,
    PatchLayout,
    is_image_source,
    load_images,
    patch_tokens,
    pixels_of_patch_tokens,
    preprocess,
)


def _png(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _pixels(seed, size=(6, 5), channels=3):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(*size, channels), dtype=np.uint8).squeeze()


@pytest.fixture
def class_folders(tmp_path):
    root = tmp_path / "images"
    for i, name in enumerate(["cat", "cat", "dog"]):
        _png(root / name / f"{i}.png", _pixels(i))
    return root


def test_class_folders_give_their_names_as_labels(class_folders):
    data = load_images(class_folders)
    assert data.label_names == ("cat", "dog") and data.labels.tolist() == [0, 0, 1]
    assert data.images.shape == (3, 6, 5, 3) and data.images.dtype == np.float32
    np.testing.assert_allclose(data.images[2], _pixels(2) / 255.0, rtol=1e-6)
    assert data.select([2, 0]).labels.tolist() == [1, 0]


def test_npz_with_grey_images_and_label_names(tmp_path):
    path = tmp_path / "digits.npz"
    grey = np.stack([_pixels(i, channels=1) for i in range(4)])  # (4, 6, 5) uint8
    np.savez(path, images=grey, labels=np.array([1, 0, 1, 1]),
             label_names=np.array(["zero", "one"]))
    data = load_images(path)
    assert data.label_names == ("zero", "one") and data.labels.tolist() == [1, 0, 1, 1]
    assert data.images.shape == (4, 6, 5, 3)
    np.testing.assert_allclose(data.images[0, ..., 1], grey[0] / 255.0, rtol=1e-6)


def test_saved_hugging_face_dataset_with_an_image_column(tmp_path):
    import datasets

    rows = {"img": [Image.fromarray(_pixels(i)) for i in range(3)], "label": [2, 0, 1]}
    features = datasets.Features({"img": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["a", "b", "c"])})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(tmp_path / "hf")
    data = load_images(tmp_path / "hf", image_column="img")
    assert data.labels.tolist() == [2, 0, 1] and data.label_names == ("a", "b", "c")
    np.testing.assert_allclose(data.images[1], _pixels(1) / 255.0, rtol=1e-6)
    with pytest.raises(ValueError, match=r"no column\(s\) \['image'\]"):
        load_images(tmp_path / "hf")


def test_clear_errors_for_unreadable_mixed_and_unlabelled_images(class_folders, tmp_path):
    bad = class_folders / "dog" / "broken.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png cannot be read as an image"):
        load_images(class_folders)
    bad.unlink()
    _png(class_folders / "dog" / "big.png", _pixels(9, size=(8, 8)))
    with pytest.raises(ValueError, match=r"different sizes .*0.png is 6x5, .*big.png is 8x8"):
        load_images(class_folders)
    resized = load_images(class_folders, image_size=4)
    assert resized.images.shape == (4, 4, 4, 3)
    _png(class_folders / "loose.png", _pixels(3))
    with pytest.raises(ValueError, match="loose.png has no label"):
        load_images(class_folders, image_size=4)
    np.savez(tmp_path / "nolabels.npz", images=np.zeros((2, 4, 4), np.uint8))
    with pytest.raises(ValueError, match=r"lacks the array\(s\) \['labels'\]"):
        load_images(tmp_path / "nolabels.npz")


def test_preprocess_resizes_and_normalises_per_channel():
    images = np.full((2, 8, 8, 3), 0.5, np.float32)
    out = preprocess(images, image_size=16, mean=(0.5, 0.25, 0.0), std=(0.5, 0.25, 1.0))
    assert out.shape == (2, 16, 16, 3)
    np.testing.assert_allclose(out[0, 3, 3], [0.0, 1.0, 0.5], atol=1e-6)
    ramp = np.linspace(0, 1, 8, dtype=np.float32)[None, :, None, None] * np.ones(
        (1, 8, 8, 3), np.float32)
    small = preprocess(ramp, image_size=4, mean=(0, 0, 0), std=(1, 1, 1))
    assert np.all(np.diff(small[0, :, 0, 0]) > 0)  # bilinear keeps the ramp's order


def test_patch_tokens_hold_each_patch_in_kernel_order_and_invert():
    pixels = np.random.default_rng(0).normal(size=(2, 3, 8, 8)).astype(np.float32)
    tokens = patch_tokens(pixels, 4)
    assert tokens.shape == (2, 1 + 4, 3 * 4 * 4) and not tokens[:, 0].any()
    # patch 1 of the 2 x 2 grid is the top-right one, flattened (channel, row, column)
    np.testing.assert_array_equal(tokens[:, 2], pixels[:, :, 0:4, 4:8].reshape(2, -1))
    np.testing.assert_array_equal(tokens[:, 3], pixels[:, :, 4:8, 0:4].reshape(2, -1))
    np.testing.assert_array_equal(pixels_of_patch_tokens(tokens), pixels)
    with pytest.raises(ValueError, match="does not divide"):
        patch_tokens(pixels, 3)
    with pytest.raises(ValueError, match="patch tokens must be"):
        pixels_of_patch_tokens(tokens[:, :4])


def test_patch_layout_encodes_a_data_set_as_token_rows():
    images = np.random.default_rng(1).uniform(size=(3, 6, 6, 3)).astype(np.float32)
    data = ImageDataset(images, np.array([0, 1, 1], np.int32), ("a", "b"), "fixture")
    encoded = PatchLayout(image_size=8, patch_size=4).encode(data)
    want = preprocess(images, image_size=8).transpose(0, 3, 1, 2)  # resized, normalised
    np.testing.assert_allclose(pixels_of_patch_tokens(encoded.input_ids), want, atol=1e-6)
    assert encoded.attention_mask.tolist() == [[1] * 5] * 3
    assert encoded.special_tokens_mask[:, 0].all() and not encoded.special_tokens_mask[:, 1:].any()
    assert not encoded.token_type_ids.any() and encoded.labels.tolist() == [0, 1, 1]


def test_image_sources_are_told_from_text_sources(class_folders, tmp_path):
    np.savez(tmp_path / "x.npz", images=np.zeros((1, 2, 2)), labels=np.zeros(1))
    (tmp_path / "texts.csv").write_text("text,label\na,0\n")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "dataset_dict.json").write_text("{}")
    (tmp_path / "saved" / "train").mkdir()
    assert is_image_source(class_folders) and is_image_source(tmp_path / "x.npz")
    assert not is_image_source(tmp_path / "texts.csv")
    assert not is_image_source(tmp_path / "saved")  # a saved Hugging Face dataset
    (tmp_path / "texts" / "cache").mkdir(parents=True)
    (tmp_path / "texts" / "cache" / "rows.jsonl").write_text("{}")
    assert not is_image_source(tmp_path / "texts")  # sub-folders without images
    assert not is_image_source(("a.csv", "b.csv")) and not is_image_source("movie-snippets")
