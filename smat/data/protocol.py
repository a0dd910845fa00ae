"""A data set under the SMaT protocol: where its examples come from and how they split.

:class:`DataConfig` names the source (a built-in corpus, local files, a Hugging Face id,
images) and the split sizes (design §7); :func:`load_examples` reads the examples,
:func:`protocol_splits` gives the row indices of the teacher's and the students' parts and
:func:`protocol_data` tokenizes and splits them. :func:`data_fingerprint` is the content
hash of the local files a config reads, which a run records beside its settings, and
:func:`data_locations` / :func:`located` find those files again relative to a model folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from smat.data.batching import DataShards, owned_shards, shard_positions, take
from smat.data.corpus import load_corpus
from smat.data.dataset import TextDataset
from smat.data.images import ImageDataset, is_image_source, load_images
from smat.data.sources import load_dataset
from smat.data.splits import (
    ProtocolSplits,
    StudentSplits,
    smat_split,
    student_split,
    students_from_teacher_rows,
    teacher_split,
)
from smat.data.tokenization import Encoded, tokenize_with_stats


def file_fingerprint(paths: Sequence[str | Path]) -> str:
    """First 16 hex digits of the SHA-256 of the files' bytes, in order: a data file's
    content recorded beside a run's settings, so an edited file is never mistaken for the
    one a run was trained on."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the examples come from and how they are split (SMaT protocol, design §7).

    Attributes:
      source: a built-in corpus name ("movie-snippets"), local data file(s) or a Hub id;
        for images an ``.npz`` file, a folder of class sub-folders or a Hub id.
      modality: "text", "image" (labelled images for a ViT, read as patch tokens), or
        "auto": images when `source` is an ``.npz`` file or a folder whose sub-folders
        hold images.
      student_source: local data file(s) or a Hub id of a second split that the students'
        pool, validation and test parts are carved from (the paper's IMDB layout: teacher
        on `train`, students from `test`); the teacher then learns from `teacher_fraction`
        of `source`. Default: one source for both, split by `teacher_fraction`.
      task: "classification" or "regression".
      text_column: the column holding the text in a file or Hub source.
      image_column: the column holding the image in a Hub source of images.
      text_pair_column: the column of the second text of a pair (premise / hypothesis,
        source / translation), if any.
      label_column: the column holding the gold label (class name or number).
      split: the split of a Hub source to read.
      max_len: fixed token length (longer texts are truncated with one warning).
      split_seed: seed of the protocol permutation (teacher and student parts).
      teacher_fraction: share of the rows the teacher trains (and early-stops) on.
      student_validation_size: rows of the student's validation part (early stopping).
      student_test_size: rows of the student's test part (simulability; also the teacher's
        test split).
      html_line_breaks_as_spaces: replace "<br /><br />" by a space in every text, as the
        SMaT authors' IMDB loader does (IMDB reviews keep HTML line breaks).
    """

    source: str = "movie-snippets"
    modality: str = dataclasses.field(default="auto", metadata={
        "choices": ("auto", "text", "image")})
    student_source: tuple[str, ...] | None = None
    task: str = "classification"
    text_column: str = "text"
    image_column: str = "image"
    text_pair_column: str | None = None
    label_column: str = "label"
    split: str = "train"
    max_len: int = 64
    split_seed: int = 0
    teacher_fraction: float = 0.5
    student_validation_size: int = 500
    student_test_size: int = 1000
    html_line_breaks_as_spaces: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.student_source, (str, list)):  # one file, or a saved config's list
            object.__setattr__(self, "student_source", tuple(
                [self.student_source] if isinstance(self.student_source, str)
                else self.student_source))
        if self.modality not in ("auto", "text", "image"):
            raise ValueError(f"DataConfig.modality must be 'auto', 'text' or 'image', got "
                             f"{self.modality!r}")
        if self.is_image and self.student_source is not None and len(self.student_source) > 1:
            raise ValueError(f"DataConfig.student_source: images come from one source, got "
                             f"{list(self.student_source)}")
        if self.max_len < 2:
            raise ValueError(f"DataConfig.max_len must be >= 2, got {self.max_len}")
        if self.student_validation_size < 1 or self.student_test_size < 1:
            raise ValueError("DataConfig.student_validation_size and student_test_size must be "
                             f">= 1, got {self.student_validation_size} and "
                             f"{self.student_test_size}")

    def settings(self) -> dict[str, Any]:
        """What a run folder records of these settings: every field, less a text run's
        `modality` and `image_column` at their defaults, so its record (and the hash its
        students keep of it) reads as it did before smat read images."""
        recorded = dataclasses.asdict(self)
        for name in () if self.is_image else ("modality", "image_column"):
            if recorded[name] == DataConfig.__dataclass_fields__[name].default:
                del recorded[name]
        return recorded

    @property
    def is_image(self) -> bool:
        """Whether the examples are images (`modality`, or detected from `source`)."""
        return self.modality == "image" or (self.modality == "auto"
                                            and is_image_source(self.source))

class ProtocolData(NamedTuple):
    """Tokenized parts of one data set under the SMaT protocol (images as patch tokens)."""

    teacher_train: Encoded | DataShards | None  # this process's data shards of it, with
    # data shards; None (and teacher_validation too) when only the student parts are asked
    teacher_validation: Encoded | None
    student_train: Encoded
    student_validation: Encoded
    student_test: Encoded
    dataset: TextDataset | ImageDataset

def load_examples(config: DataConfig) -> TextDataset | ImageDataset:
    """The raw examples of `config.source` (a built-in corpus, local files or a Hub id),
    followed by those of `config.student_source` when it is given (``dataset.student_rows``
    counts them).

    Raises:
      ValueError: the two sources' label vocabularies differ (and see
        :func:`smat.data.load_dataset`, and :func:`smat.data.load_images` for images).
    """
    if config.is_image:
        if config.task != "classification":
            raise ValueError(f"images are classified; task {config.task!r} needs texts")

        def read(source: str) -> ImageDataset:
            return load_images(source, split=config.split, image_column=config.image_column,
                               label_column=config.label_column)

        dataset = read(config.source)
        if config.student_source is not None:
            dataset = dataset.followed_by(read(config.student_source[0]))
        return dataset
    dataset = _load_source(config, config.source)
    if config.student_source is not None:
        student = _load_source(config, config.student_source)
        if student.label_names != dataset.label_names:
            raise ValueError(f"the labels of student_source {config.student_source!r} "
                             f"{student.label_names} differ from those of source "
                             f"{config.source!r} {dataset.label_names}")
        pairs = (None if dataset.text_pairs is None
                 else dataset.text_pairs + student.text_pairs)
        dataset = dataclasses.replace(
            dataset, texts=dataset.texts + student.texts, text_pairs=pairs,
            labels=np.concatenate([dataset.labels, student.labels]),
            num_dropped=dataset.num_dropped + student.num_dropped,
            source=f"{dataset.source} (teacher) + {student.source} (students)",
            student_rows=len(student))
    if config.html_line_breaks_as_spaces:
        dataset = dataclasses.replace(dataset, texts=tuple(
            text.replace("<br /><br />", " ") for text in dataset.texts))
    return dataset

def _load_source(config: DataConfig, source: str | Sequence[str]) -> TextDataset:
    if source == "movie-snippets":
        return load_corpus(source, task=config.task)
    files = list(source) if isinstance(source, (tuple, list)) else source
    return load_dataset(files, split=config.split, text_column=config.text_column,
                        text_pair_column=config.text_pair_column,
                        label_column=config.label_column, task=config.task)

def protocol_splits(config: DataConfig, dataset: TextDataset, *, num_examples: int = 1,
                    student_pool: str = "held_out") -> ProtocolSplits:
    """The row indices of every part of the SMaT protocol split of `dataset` (from
    :func:`load_examples`): ``smat.data.smat_split`` with `config`'s seed and sizes, or,
    with a student source, the teacher's parts from the first rows (``smat_split``'s
    teacher rule) and the student's from the last ``dataset.student_rows``
    (``smat.data.student_split``). With ``student_pool="teacher_train"`` the students'
    training rows are drawn from the teacher's instead
    (``smat.data.students_from_teacher_rows``)."""
    from_teacher = student_pool == "teacher_train"
    sizes = {"num_examples": 1 if from_teacher else num_examples,
             "student_validation_size": config.student_validation_size,
             "student_test_size": config.student_test_size}
    if not dataset.student_rows:
        splits = smat_split(len(dataset), seed=config.split_seed,
                            teacher_fraction=config.teacher_fraction, **sizes)
    else:
        num_teacher_rows = len(dataset) - dataset.student_rows
        teacher = teacher_split(num_teacher_rows, seed=config.split_seed,
                                teacher_fraction=config.teacher_fraction)
        student = student_split(dataset.student_rows, seed=config.split_seed, **sizes)
        splits = ProtocolSplits(
            teacher_train=teacher.train, teacher_validation=teacher.validation,
            student=StudentSplits(*(part + num_teacher_rows for part in student)))
    if from_teacher:
        return students_from_teacher_rows(splits, seed=config.split_seed,
                                          num_examples=num_examples)
    return splits

def protocol_data(config: DataConfig, dataset: TextDataset | ImageDataset, tokenizer: Any, *,
                  num_examples: int = 1, student_pool: str = "held_out",
                  data_shards: int = 1, process: int = 0,
                  num_processes: int = 1, teacher_parts: bool = True) -> ProtocolData:
    """Tokenize and split a data set; the teacher parts do not depend on num_examples.

    Args:
      config: split sizes and max_len.
      dataset: the examples (from :func:`load_examples`).
      tokenizer: a transformers tokenizer, or for images the model's
        :class:`smat.data.PatchLayout` (:func:`model_input_layout`).
      num_examples: student training size (a prefix of the student pool).
      student_pool: "held_out" or "teacher_train" (``StudentTrainConfig.student_pool``).
      data_shards: more than 1: the teacher's training rows are dealt out over this many
        data shards and only the shards of `process` (of `num_processes`;
        :func:`smat.data.owned_shards`) are tokenized, as :class:`smat.data.DataShards`;
        the other parts are tokenized alone.
      teacher_parts: False leaves the teacher's training and validation rows untokenized
        (None): a student or an evaluation reads only the student parts, which are a
        small share of the rows.

    Raises:
      ValueError: num_examples larger than the student pool, empty or bad data (see
        smat.data), or data shards that do not divide over the processes.
    """
    splits = protocol_splits(config, dataset, num_examples=num_examples,
                             student_pool=student_pool)
    parts = (splits.teacher_validation, splits.student.train, splits.student.validation,
             splits.student.test)
    if not teacher_parts:
        return ProtocolData(None, None, *(_encode(config, dataset.select(rows), tokenizer)
                                          for rows in parts[1:]), dataset)
    if data_shards == 1:
        encoded = _encode(config, dataset, tokenizer)
        return ProtocolData(take(encoded, splits.teacher_train),
                            *(take(encoded, rows) for rows in parts), dataset)
    owned = owned_shards(data_shards, process, num_processes)
    size = len(splits.teacher_train)
    shards = tuple(_encode(config, dataset.select(
        splits.teacher_train[shard_positions(size, shard, data_shards)]), tokenizer)
        for shard in owned)
    return ProtocolData(DataShards(shards, owned, data_shards, size),
                        *(_encode(config, dataset.select(rows), tokenizer) for rows in parts),
                        dataset)


def _encode(config: DataConfig, dataset: TextDataset | ImageDataset, tokenizer: Any) -> Encoded:
    """Every row of `dataset` as model inputs (texts tokenized at ``config.max_len``)."""
    if isinstance(dataset, ImageDataset):
        return tokenizer.encode(dataset)
    return tokenize_with_stats(dataset, tokenizer, max_len=config.max_len)[0]

def data_fingerprint(config: DataConfig) -> dict[str, str] | None:
    """The content fingerprint (:func:`file_fingerprint`) of each local
    data file a config reads, by role ("source", "student_source"); None when it reads only
    the built-in corpus or Hub data sets (whose content is fixed by name and version)."""
    fingerprints = {}
    for role, value in (("source", config.source), ("student_source", config.student_source)):
        files = [value] if isinstance(value, str) else list(value or ())
        if files and all(Path(f).is_file() for f in files):
            fingerprints[role] = file_fingerprint(files)
        elif config.is_image and role == "source" and Path(value).is_dir():
            fingerprints[role] = file_fingerprint(sorted(
                str(f) for f in Path(value).rglob("*") if f.is_file()))
    return fingerprints or None

def data_locations(data: DataConfig, model_dir: Path) -> dict[str, list[str]]:
    """Each local data file of `data`, as a path relative to the model folder that records
    it: its students find the file from there wherever they run (a data file given as a
    relative path is otherwise read from the current folder)."""
    locations = {}
    for role in ("source", "student_source"):
        given = getattr(data, role)
        paths = [given] if isinstance(given, str) else list(given or ())
        if paths and all(Path(p).exists() for p in paths):
            locations[role] = [os.path.relpath(Path(p).resolve(), model_dir.resolve())
                               for p in paths]
    return locations

def located(data: DataConfig, info: dict[str, Any], where: str) -> DataConfig:
    """`data` with each data file that is not where it was named found again relative to
    the model folder (``model.json``'s "data_locations"), if it is there."""
    folder = Path(info.get("loaded_from") or Path(where).parent)
    changes = {}
    for role, relative in info.get("data_locations", {}).items():
        given = getattr(data, role)
        paths = [given] if isinstance(given, str) else list(given)
        found = [p if Path(p).exists() or not (folder / r).exists() else str(folder / r)
                 for p, r in zip(paths, relative, strict=True)]
        if found != paths:
            changes[role] = found[0] if isinstance(given, str) else tuple(found)
    return dataclasses.replace(data, **changes)
