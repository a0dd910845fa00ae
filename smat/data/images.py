"""Image classification data: a folder of class sub-folders, an ``.npz`` file, or a Hugging
Face dataset with an image column, read into one array of images and their labels, and
preprocessed to a ViT's input (resized, scaled, normalised, channels last).

Every source gives an :class:`ImageDataset`; errors name the file (or row) and what is
wrong with it: an image that cannot be read, images of different sizes when no
``image_size`` asks for resizing, a missing label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int

from smat.data.dataset import encode_labels
from smat.data.sources import load_hub

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
# ImageNet's channel mean and deviation, the normalisation of ViT checkpoints (HF's
# ViTImageProcessor uses 0.5 / 0.5 for google/vit-*: pass those for such checkpoints)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclasses.dataclass(frozen=True)
class ImageDataset:
    """Labelled images, channels last, values in [0, 1].

    Attributes:
      images: (N, H, W, 3) float32.
      labels: (N,) int32 class ids.
      label_names: the class names, by id.
      source: where the images came from (for messages and run records).
    """

    images: Float[np.ndarray, "n height width 3"]
    labels: Int[np.ndarray, " n"]
    label_names: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        if self.images.ndim != 4 or self.images.shape[-1] != 3:
            raise ValueError(f"{self.source}: images must be (N, H, W, 3), got "
                             f"{self.images.shape}")
        if len(self.labels) != len(self.images):
            raise ValueError(f"{self.source}: {len(self.images)} images but "
                             f"{len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)

    def select(self, indices: Sequence[int] | np.ndarray) -> ImageDataset:
        """The rows at `indices`, in that order."""
        rows = np.asarray(indices, dtype=np.int64)
        return dataclasses.replace(self, images=self.images[rows], labels=self.labels[rows])


def load_images(source: str | Path, *, image_size: int | None = None, split: str = "train",
                image_column: str = "image", label_column: str = "label") -> ImageDataset:
    """Read labelled images.

    Args:
      source: a folder holding one sub-folder of images per class (the sub-folder names
        are the classes, sorted), an ``.npz`` file with ``images`` ((N, H, W) or
        (N, H, W, C), uint8 0-255 or floats 0-1) and ``labels`` (class ids or names; an
        optional ``label_names``), or a Hugging Face dataset (a folder saved with
        ``save_to_disk``, or a Hub id) with an image column and a label column.
      image_size: resize every image to this square size (bilinear); without it the
        images must all have one size.
      split: the split of a Hugging Face source.
      image_column / label_column: the columns of a Hugging Face source.

    Raises:
      FileNotFoundError: no such folder or file.
      ConnectionError: a Hub id could not be reached (e.g. offline).
      ValueError: an unknown Hub id, an unreadable image (its file or row), images of
        different sizes without `image_size`, a missing label, or an empty source.
    """
    path = Path(source)
    if path.is_dir() and not _is_saved_hf_dataset(path):
        images, names, labels, label_names = _read_class_folders(path)
    elif path.suffix == ".npz":
        images, names, labels, label_names = _read_npz(path)
    else:
        images, names, labels, label_names = _read_hf(str(source), split, image_column,
                                                      label_column)
    if not images:
        raise ValueError(f"{source} holds no images")
    array = _stack(images, names, image_size, source)
    ids, vocabulary = encode_labels(labels, task="classification", label_names=label_names,
                                    column=label_column)
    return ImageDataset(array, ids, tuple(vocabulary or ()), str(source))


def preprocess(images: Float[np.ndarray, "n h w 3"], *, image_size: int,
               mean: Sequence[float] = IMAGENET_MEAN,
               std: Sequence[float] = IMAGENET_STD) -> Float[np.ndarray, "n s s 3"]:
    """Images in [0, 1] as a ViT reads them: resized to `image_size` squared (bilinear),
    then normalised per channel, ``(x - mean) / std``."""
    resized = _resize(images, image_size)
    return ((resized - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
            ).astype(np.float32)


def _is_saved_hf_dataset(path: Path) -> bool:
    return (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()


def _read_class_folders(root: Path):
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{root} has no class sub-folders: put each class's images in a "
                         "sub-folder named after the class")
    loose = sorted(p.name for p in root.iterdir() if p.is_file()
                   and p.suffix.lower() in IMAGE_SUFFIXES)
    if loose:
        raise ValueError(f"{root}/{loose[0]} has no label: images must sit in a class "
                         f"sub-folder ({len(loose)} image(s) at the top level)")
    images, names, labels = [], [], []
    for name in classes:
        for file in sorted((root / name).iterdir()):
            if file.suffix.lower() in IMAGE_SUFFIXES:
                images.append(_open_image(file))
                names.append(str(file))
                labels.append(name)
    return images, names, labels, classes


def _open_image(file: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            return np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(f"{file} cannot be read as an image ({error})") from None


def _read_npz(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    with np.load(path, allow_pickle=False) as stored:
        missing = [key for key in ("images", "labels") if key not in stored]
        if missing:
            raise ValueError(f"{path} lacks the array(s) {missing}; it holds "
                             f"{sorted(stored.files)} (needed: images, labels)")
        images, labels = stored["images"], stored["labels"]
        label_names = ([str(n) for n in stored["label_names"]]
                       if "label_names" in stored else None)
    if len(images) != len(labels):
        raise ValueError(f"{path}: {len(images)} images but {len(labels)} labels")
    scale = 255.0 if np.issubdtype(images.dtype, np.integer) else 1.0
    array = images.astype(np.float32) / scale
    if array.ndim == 3:
        array = array[..., None]
    rows = [_as_rgb(image, f"{path} row {i}") for i, image in enumerate(array)]
    values = [v.item() for v in labels]
    if label_names is not None and all(isinstance(v, int) for v in values):
        values = [label_names[v] if 0 <= v < len(label_names) else v for v in values]
    return rows, [f"{path} row {i}" for i in range(len(rows))], values, label_names


def _as_rgb(image: np.ndarray, name: str) -> np.ndarray:
    """(H, W, C) with C = 1 (grey), 3 (RGB) or 4 (RGBA, alpha dropped) as (H, W, 3)."""
    if image.ndim != 3 or image.shape[-1] not in (1, 3, 4):
        raise ValueError(f"{name}: an image must be (H, W), (H, W, 1), (H, W, 3) or "
                         f"(H, W, 4); got {image.shape}")
    if image.shape[-1] == 1:
        return np.repeat(image, 3, axis=-1)
    return image[..., :3]


def _read_hf(source: str, split: str, image_column: str, label_column: str):
    import datasets

    data = (datasets.load_from_disk(source) if Path(source).is_dir()
            else load_hub(source, name=None, split=split, cache_dir=None))
    if isinstance(data, datasets.DatasetDict):
        if split not in data:
            raise ValueError(f"{source} has no split {split!r}; it has {sorted(data)}")
        data = data[split]
    missing = [c for c in (image_column, label_column) if c not in data.column_names]
    if missing:
        raise ValueError(f"{source} has no column(s) {missing}; its columns are "
                         f"{data.column_names}")
    feature = data.features[label_column]
    label_names = list(feature.names) if hasattr(feature, "names") else None
    images, labels = [], []
    for i, row in enumerate(data):
        image = row[image_column]
        if row[label_column] is None:
            raise ValueError(f"{source} row {i} has no {label_column!r}")
        array = (np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
                 if hasattr(image, "convert") else np.asarray(image, dtype=np.float32))
        if array.ndim == 2:
            array = array[..., None]
        images.append(_as_rgb(array, f"{source} row {i}"))
        value = row[label_column]
        labels.append(label_names[value] if label_names is not None else value)
    return images, [f"{source} row {i}" for i in range(len(images))], labels, label_names


def _stack(images: list[np.ndarray], names: list[str], image_size: int | None,
           source: str | Path) -> np.ndarray:
    if image_size is not None:
        if image_size < 1:
            raise ValueError(f"image_size must be >= 1, got {image_size}")
        return np.stack([_resize(image[None], image_size)[0] for image in images])
    sizes = {image.shape[:2] for image in images}
    if len(sizes) > 1:
        first = images[0].shape[:2]
        other = next(i for i, image in enumerate(images) if image.shape[:2] != first)
        raise ValueError(f"{source}: images have different sizes ({names[0]} is "
                         f"{first[0]}x{first[1]}, {names[other]} is "
                         f"{images[other].shape[0]}x{images[other].shape[1]}); pass "
                         "image_size to resize them all")
    return np.stack(images).astype(np.float32)


def _resize(images: np.ndarray, size: int) -> np.ndarray:
    """(N, H, W, C) -> (N, size, size, C), bilinear (antialiased when shrinking)."""
    import jax

    if images.shape[1:3] == (size, size):
        return images.astype(np.float32)
    shape = (images.shape[0], size, size, images.shape[-1])
    return np.asarray(jax.image.resize(images.astype(np.float32), shape, method="bilinear"))
