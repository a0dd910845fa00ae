"""Image classification data: a folder of class sub-folders, an ``.npz`` file, or a Hugging
Face dataset with an image column, read into one array of images and their labels, and
preprocessed to a ViT's input (resized, scaled, normalised, channels last).

Every source gives an :class:`ImageDataset`; errors name the file (or row) and what is
wrong with it: an image that cannot be read, images of different sizes when no
``image_size`` asks for resizing, a missing label.

Training reads images as *patch tokens* (:class:`PatchLayout`): an :class:`Encoded` whose
``input_ids`` hold each row's patches' pixels, (N, 1 + patches, 3 * patch * patch) float32
with a zero [CLS] slot first, so the batching, seed stacking, teacher caching and SMaT
step that move token rows move images unchanged, and a ViT reads them back as pixels
(:func:`pixels_of_patch_tokens`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int

from smat.data.dataset import encode_labels
from smat.data.sources import load_hub
from smat.data.tokenization import Encoded

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
      student_rows: how many of the last rows come from a separate student source (the
        paper's layout: teacher on a train split, students tested on a test split).
    """

    images: Float[np.ndarray, "n height width 3"]
    labels: Int[np.ndarray, " n"]
    label_names: tuple[str, ...]
    source: str
    student_rows: int = 0

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
        return dataclasses.replace(self, images=self.images[rows], labels=self.labels[rows],
                                   student_rows=0)

    @property
    def num_labels(self) -> int:
        """How many classes the data set names."""
        return len(self.label_names)

    def followed_by(self, student: ImageDataset) -> ImageDataset:
        """These images, then `student`'s as the student source's rows (``student_rows``).

        Raises:
          ValueError: the two sources name other classes or hold images of other sizes.
        """
        if student.label_names != self.label_names:
            raise ValueError(f"the classes of {student.source} {list(student.label_names)} "
                             f"differ from those of {self.source} {list(self.label_names)}")
        if student.images.shape[1:] != self.images.shape[1:]:
            raise ValueError(f"{student.source} holds {student.images.shape[1]}x"
                             f"{student.images.shape[2]} images, {self.source} "
                             f"{self.images.shape[1]}x{self.images.shape[2]} ones")
        return ImageDataset(np.concatenate([self.images, student.images]),
                            np.concatenate([self.labels, student.labels]), self.label_names,
                            f"{self.source} (teacher) + {student.source} (students)",
                            student_rows=len(student))


def is_image_source(source: str | Path | Sequence[str]) -> bool:
    """Whether `source` is a local image source: an ``.npz`` file or a folder whose
    sub-folders hold images (not a saved Hugging Face dataset, which may hold texts)."""
    if not isinstance(source, (str, Path)):
        return False
    path = Path(source)
    if path.suffix == ".npz":
        return True
    return (path.is_dir() and not _is_saved_hf_dataset(path)
            and any(file.suffix.lower() in IMAGE_SUFFIXES
                    for child in path.iterdir() if child.is_dir() for file in child.iterdir()))


@dataclasses.dataclass(frozen=True)
class PatchLayout:
    """How a ViT reads images, and so how they become patch tokens.

    Attributes:
      image_size: the model's square input size (images are resized to it).
      patch_size: the side of one square patch.
      mean, std: the per-channel normalisation, ``(x - mean) / std``.
    """

    image_size: int
    patch_size: int
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD

    def pixels(self, images: Float[np.ndarray, "n h w 3"]) -> Float[np.ndarray, "n 3 s s"]:
        """(N, H, W, 3) images in [0, 1] as the ViT reads them: (N, 3, S, S), resized and
        normalised."""
        pixels = preprocess(images, image_size=self.image_size, mean=self.mean, std=self.std)
        return np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))

    def encode(self, dataset: ImageDataset) -> Encoded:
        """`dataset` as patch tokens: ``input_ids`` (N, 1 + P, 3 * p * p) float32, the
        [CLS] slot zero and each patch's pixels in (channel, row, column) order; every
        position real (mask 1), the [CLS] slot a special token, segment ids 0."""
        tokens = patch_tokens(self.pixels(dataset.images), self.patch_size)
        n, length = tokens.shape[:2]
        special = np.zeros((n, length), bool)
        special[:, 0] = True
        return Encoded(tokens, np.ones((n, length), np.int32), np.zeros((n, length), np.int32),
                       special, dataset.labels.astype(np.int32))


def patch_tokens(pixel_values: Float[np.ndarray, "n 3 s s"],
                 patch_size: int) -> Float[np.ndarray, "n tokens patch_pixels"]:
    """(N, C, S, S) images -> (N, 1 + (S/p)^2, C * p * p): a zero [CLS] slot, then the
    patches in row-major order, each flattened as (channel, row, column), the order of a
    ViT's patch kernel (C, p, p, D).

    Raises:
      ValueError: an image size that `patch_size` does not divide.
    """
    n, c, size = pixel_values.shape[0], pixel_values.shape[1], pixel_values.shape[2]
    if size % patch_size:
        raise ValueError(f"patch size {patch_size} does not divide the image size {size}")
    grid = size // patch_size
    patches = pixel_values.reshape(n, c, grid, patch_size, grid, patch_size)
    patches = patches.transpose(0, 2, 4, 1, 3, 5).reshape(n, grid * grid, -1)
    cls = np.zeros((n, 1, patches.shape[-1]), np.float32)
    return np.concatenate([cls, patches.astype(np.float32)], axis=1)


def pixels_of_patch_tokens(tokens, *, channels: int = 3):
    """The inverse of :func:`patch_tokens` (numpy or jax arrays): (N, 1 + P, C * p * p)
    -> (N, C, S, S) images, the [CLS] slot dropped. The patch and image sizes follow
    from the shape (square patches on a square grid)."""
    n, length, width = tokens.shape
    patch = round((width // channels) ** 0.5)
    grid = round((length - 1) ** 0.5)
    if grid * grid != length - 1 or channels * patch * patch != width:
        raise ValueError(f"patch tokens must be (N, 1 + grid^2, {channels} * patch^2); got "
                         f"{tuple(tokens.shape)}")
    patches = tokens[:, 1:].reshape(n, grid, grid, channels, patch, patch)
    return patches.transpose(0, 3, 1, 4, 2, 5).reshape(n, channels, grid * patch, grid * patch)


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
