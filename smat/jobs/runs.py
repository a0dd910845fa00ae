"""End-to-end jobs behind the CLI: data -> SMaT protocol splits -> teacher -> students.

A job takes typed configs, writes everything under one run folder (resolved config,
metrics, checkpoints, the trained model) and can be rerun after an interruption: finished
work is reused, unfinished training resumes from its last checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from flax import nnx

from smat.data import (
    Encoded,
    ImageDataset,
    PatchLayout,
    ProtocolSplits,
    StudentSplits,
    TextDataset,
    is_image_source,
    load_corpus,
    load_dataset,
    load_images,
    smat_split,
    student_split,
    students_from_teacher_rows,
    take,
    teacher_split,
    tokenize_with_stats,
)
from smat.data.images import IMAGENET_MEAN, IMAGENET_STD
from smat.evaluation.cartography import (
    ambiguous_counts,
    cartography,
    group_counts,
    plot_data_map,
)
from smat.explainers import attention
from smat.json_files import read_json, recorded_dataclass
from smat.models import ModelSource, SequenceClassifier, ViTConfig, functional, keep_first_layers
from smat.registry import FIXED_HEADS, LEARNED, NO_EXPLAINER
from smat.store import checkpoint, model_store
from smat.store.explainer_store import save_explainer
from smat.store.run_log import (
    cached_arrays,
    check_run_settings,
    file_fingerprint,
    settings_hash,
    write_json_atomic,
)
from smat.training import dynamics
from smat.training.loop import seed_folders, with_loop
from smat.training.student import (
    StudentRows,
    StudentTrainConfig,
    cache_teacher,
    explainer_configs,
    train_student,
)
from smat.training.teacher import (
    TeacherResult,
    TeacherTrainConfig,
    evaluate,
    train_teacher,
)


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

    teacher_train: Encoded
    teacher_validation: Encoded
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
                  num_examples: int = 1, student_pool: str = "held_out") -> ProtocolData:
    """Tokenize and split a data set; the teacher parts do not depend on num_examples.

    Args:
      config: split sizes and max_len.
      dataset: the examples (from :func:`load_examples`).
      tokenizer: a transformers tokenizer, or for images the model's
        :class:`smat.data.PatchLayout` (:func:`model_input_layout`).
      num_examples: student training size (a prefix of the student pool).
      student_pool: "held_out" or "teacher_train" (``StudentTrainConfig.student_pool``).

    Raises:
      ValueError: num_examples larger than the student pool, empty or bad data (see
        smat.data).
    """
    if isinstance(dataset, ImageDataset):
        encoded = tokenizer.encode(dataset)
    else:
        encoded, _ = tokenize_with_stats(dataset, tokenizer, max_len=config.max_len)
    splits = protocol_splits(config, dataset, num_examples=num_examples,
                             student_pool=student_pool)
    return ProtocolData(take(encoded, splits.teacher_train),
                        take(encoded, splits.teacher_validation),
                        take(encoded, splits.student.train),
                        take(encoded, splits.student.validation),
                        take(encoded, splits.student.test), dataset)


def reused_teacher(teacher_dir: str | Path) -> dict[str, Any] | None:
    """The result record of a finished teacher run that a user chose to reuse (``--teacher
    DIR``), as it is, whatever its settings; None when the folder holds no finished run
    (the caller then trains one there)."""
    path = Path(teacher_dir) / "result.json"
    return read_json(path) if path.is_file() else None


def run_teacher(
    *,
    data: DataConfig,
    train: TeacherTrainConfig,
    output_dir: str | Path,
    seeds: Sequence[int] | None = None,
    model: ModelSource | None = None,
    progress: bool = True,
    overwrite: bool = False,
    keep_checkpoints: bool = False,
) -> list[dict[str, Any]]:
    """Train (or resume, or reuse) one teacher per seed and report their test metrics.

    The test split is the student test split: data the teacher never saw, on which student
    simulability is later measured. Each seed's run folder (`output_dir` for one seed,
    ``output_dir/seed{s}`` for several) receives `config.json`, `checkpoints/` (metrics and
    the resumable loop state), the trained model (`model/`), with
    ``train.training_dynamics`` the data map (:func:`write_cartography`), and `result.json`
    last; a finished seed is reused. ``train.loop.parallel_seeds`` trains the seeds in one program.
    A folder that holds a run with other settings (a changed data file included) is
    refused before any work (:func:`smat.store.run_log.check_run_settings`).

    Args:
      data: data source and splits (the same splits for every seed).
      train: teacher hyperparameters.
      output_dir: run folder.
      seeds: distinct seeds (default: ``(train.loop.seed,)``); each replaces the loop seed.
      model: the pretrained encoder every seed starts from, and its pooling (default:
        the offline all-MiniLM-L6-v2 with a scalar mix).
      progress: show progress bars.
      overwrite: delete what each seed folder holds and train afresh.
      keep_checkpoints: keep the resumable loop state of a finished run (by default it is
        deleted once the best weights are saved in ``model/``).

    Returns:
      One result record per seed (also written to its `result.json`): metrics, sizes,
      seconds.

    Raises:
      ValueError: a seed folder holds a run with other settings (the message names them).
    """
    seeds = (train.loop.seed,) if seeds is None else tuple(seeds)
    folders = seed_folders(output_dir, seeds)
    model = model if model is not None else ModelSource()
    settings = [{"data": data.settings(), "data_fingerprint": data_fingerprint(data),
                 "train": dataclasses.asdict(with_loop(train, seed=seed)),
                 **model.settings()} for seed in seeds]
    for folder, recorded in zip(folders, settings, strict=True):
        check_run_settings(folder, recorded, overwrite=overwrite)
    todo = [i for i, folder in enumerate(folders) if not (folder / "result.json").is_file()]
    if todo:
        parts, models, tokenizer, layout = _teacher_setup(data, model,
                                                  [seeds[i] for i in todo],
                                                  [folders[i] for i in todo],
                                                  [settings[i] for i in todo])
        results = train_teacher(models, parts.teacher_train, parts.teacher_validation,
                                task=data.task, config=train, seeds=[seeds[i] for i in todo],
                                output_dir=[folders[i] / "checkpoints" for i in todo],
                                progress=progress)
        for i, model, result in zip(todo, models, results, strict=True):
            if train.training_dynamics:
                write_cartography(folders[i], seed=seeds[i])
            _finish_teacher(folders[i], data, parts, model, tokenizer, result, layout,
                            length_multiple=train.loop.length_multiple)
        if not keep_checkpoints:
            for i in todo:
                checkpoint.remove_resume_states(folders[i])
    for i, folder in enumerate(folders):
        if i not in todo:  # reused: its weights must still be the ones it was tested with
            model_store.load(folder / "model")
    return [read_json(folder / "result.json") for folder in folders]


def write_cartography(run_dir: str | Path, *, seed: int | None = None) -> dict[str, Any]:
    """The data map of a teacher run trained with ``training_dynamics``: per training
    instance (the run's teacher-train rows, in order) its confidence, variability,
    closeness, correctness count and group, to ``cartography.json``, and the plot to
    ``data_map.png``. ``smat agreement --groups RUN_DIR`` reads the file."""
    run_dir = Path(run_dir)
    stats = cartography(*dynamics.load(run_dir / "checkpoints"))
    payload = {"split": "teacher_train", "num_epochs": stats.num_epochs,
               "ambiguous_counts": ambiguous_counts(stats.num_epochs),
               "counts": group_counts(stats.group), "group": stats.group.tolist(),
               **{name: np.round(getattr(stats, name), 6).tolist()
                  for name in ("confidence", "variability", "closeness")},
               "correctness": stats.correctness.tolist()}
    write_json_atomic(run_dir / "cartography.json", payload)
    title = "teacher data map" + (f" (seed {seed})" if seed is not None else "")
    plot_data_map(stats, run_dir / "data_map.png", title=title)
    return payload


def _teacher_setup(data: DataConfig, model: ModelSource, seeds: Sequence[int],
                   folders: Sequence[Path], settings: Sequence[dict[str, Any]]):
    """Load the data and one pretrained model per seed; once they load, write each run's
    `config.json` (a bad input never leaves a run folder behind). Also returns what turns
    the examples into model inputs (:func:`model_input_layout`)."""
    dataset = load_examples(data)
    num_labels = dataset.num_labels if data.task == "classification" else 1
    loaded = [start_model(model, task=data.task, num_labels=num_labels, seed=seed)
              for seed in seeds]
    tokenizer = loaded[0][1]
    if data.is_image != isinstance(loaded[0][0].encoder.config, ViTConfig):
        raise ValueError(f"--source {data.source} holds {'images' if data.is_image else 'texts'}"
                         f" but --encoder {model.path} is "
                         f"{'a text encoder' if data.is_image else 'a ViT'}")
    layout = model_input_layout(loaded[0][0], tokenizer,
                                _image_normalisation(Path(model.path)))
    parts = protocol_data(data, dataset, layout)
    for folder, recorded in zip(folders, settings, strict=True):
        write_json_atomic(folder / "config.json", recorded)
    return parts, [m for m, _ in loaded], tokenizer, layout


def model_input_layout(model: Any, tokenizer: Any,
                       normalisation: dict[str, Any]) -> Any:
    """What turns a model's examples into its inputs: the tokenizer of a text model, or a
    ViT's :class:`smat.data.PatchLayout` (its image and patch sizes, and `normalisation`'s
    ``image_mean`` / ``image_std``, ImageNet's where it has none)."""
    config = model.encoder.config
    if not isinstance(config, ViTConfig):
        return tokenizer
    return PatchLayout(config.image_size, config.patch_size,
                       tuple(normalisation.get("image_mean", IMAGENET_MEAN)),
                       tuple(normalisation.get("image_std", IMAGENET_STD)))


def _image_normalisation(folder: Path) -> dict[str, Any]:
    """An image encoder's mean and deviation: a smat model's (its ``model.json``) or a
    Hugging Face checkpoint's (its ``preprocessor_config.json``); empty when it has none."""
    for name in ("model.json", "preprocessor_config.json"):
        if (folder / name).is_file():
            recorded = read_json(folder / name)
            return {key: recorded[key] for key in ("image_mean", "image_std")
                    if key in recorded}
    return {}


def start_model(source: ModelSource, *, task: str, num_labels: int,
                seed: int) -> tuple[Any, Any]:
    """``(model, tokenizer)`` a run starts from: ``source.load`` (a Hugging Face checkpoint,
    or its architecture alone with ``from_scratch``), or, when ``source.encoder`` is a
    model smat trained (a folder with ``model.json``, e.g. an encoder pretrained on another
    task), that model's encoder under a fresh head drawn from `seed`.

    Raises:
      ValueError: as ``ModelSource.load``, or ``from_scratch`` with a smat model.
    """
    folder = Path(source.path)
    if not (folder / "model.json").is_file():
        return source.load(task=task, num_labels=num_labels, seed=seed)
    if source.from_scratch:
        raise ValueError(f"--from-scratch draws new weights; --encoder {folder} is a trained "
                         "smat model, whose weights would be thrown away")
    trained = model_store.load(folder)
    model = SequenceClassifier(trained.model.encoder.config, num_labels=num_labels, task=task,
                               pooling=source.pooling, rngs=nnx.Rngs(seed))
    model.encoder = trained.model.encoder
    if source.num_layers is not None:
        model = keep_first_layers(model, source.num_layers, seed=seed)
    return model, trained.tokenizer


def data_fingerprint(config: DataConfig) -> dict[str, str] | None:
    """The content fingerprint (:func:`smat.store.run_log.file_fingerprint`) of each local
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


def _finish_teacher(output_dir: Path, data: DataConfig, parts: ProtocolData, model: Any,
                    tokenizer: Any, result: TeacherResult, layout: Any, *,
                    length_multiple: int) -> dict[str, Any]:
    """Test a trained teacher (batches cut as in its training), save its model (with an
    image model's normalisation, from its `layout`) and write `result.json` last."""
    test = evaluate(functional.split(model)[0], result.params, parts.student_test,
                    task=data.task, length_multiple=length_multiple)
    record = {
        "test": test, "validation": result.best_validation, "best_step": result.best_step,
        "steps": result.steps, "train_seconds": round(result.seconds, 1),
        "sizes": {"teacher_train": int(len(parts.teacher_train.labels)),
                  "teacher_validation": int(len(parts.teacher_validation.labels)),
                  "test": int(len(parts.student_test.labels))},
        "label_names": list(parts.dataset.label_names or []),
        "label_balance_test": _label_balance(parts.student_test.labels, data.task),
    }
    # the model reads its images as it trained on them
    normalisation = ({"image_mean": list(layout.mean), "image_std": list(layout.std)}
                     if isinstance(layout, PatchLayout) else {})
    model_store.save(output_dir / "model", model, tokenizer, params=result.params,
                     max_len=data.max_len, label_names=record["label_names"],
                     data=dataclasses.asdict(data), data_fingerprint=data_fingerprint(data),
                     data_locations=data_locations(data, output_dir / "model"),
                     **normalisation)
    write_json_atomic(output_dir / "result.json", record)
    return record


def _label_balance(labels: np.ndarray, task: str) -> dict[str, float] | None:
    if task != "classification":
        return None
    values, counts = np.unique(labels, return_counts=True)
    return {str(int(v)): round(float(c) / len(labels), 4) for v, c in zip(values, counts,
                                                                         strict=True)}


def _cached_student_rows(teacher_dir: Path, trained: model_store.TrainedModel,
                         parts: ProtocolData, *, setting: str, ig_steps: int,
                         num_examples: int, explanation_source: str = "text",
                         student_pool: str = "held_out",
                         ) -> tuple[StudentRows, StudentRows, StudentRows]:
    """Teacher outputs over the student splits, computed once per (setting, size,
    explanation source, student pool) on disk."""
    # fixed head coefficients are applied to SMaT's cached attention when a student trains
    setting = LEARNED if setting == FIXED_HEADS else setting
    source = "" if explanation_source == "text" else f"-{explanation_source}"
    pool = "" if student_pool == "held_out" else f"-{student_pool}"
    path = (teacher_dir / "cache"
            / f"{setting}-n{num_examples}-ig{ig_steps}{source}{pool}.npz")
    names = ("train", "validation", "test")

    def compute() -> dict[str, np.ndarray]:
        graphdef, params = functional.split(trained.model)
        # Static explanations only enter the explanation loss of training rows; validation
        # and test rows need the teacher's logits (and SMaT's validation rows its features).
        held_out = setting if setting == LEARNED else NO_EXPLAINER
        parts_rows = [cache_teacher(graphdef, params, data, setting=kind, ig_steps=ig_steps,
                                    explanation_source=explanation_source)
                      for data, kind in ((parts.student_train, setting),
                                         (parts.student_validation, held_out),
                                         (parts.student_test, held_out))]
        return {f"{name}.{field}": value for name, rows in zip(names, parts_rows, strict=True)
                for field, value in zip(StudentRows._fields, rows, strict=True)}

    stored = cached_arrays(path, compute)
    return tuple(StudentRows(*(stored[f"{name}.{field}"] for field in StudentRows._fields))
                 for name in names)


def run_student(
    teacher_dir: str | Path,
    *,
    config: StudentTrainConfig,
    num_examples: int,
    output_dir: str | Path | Sequence[str | Path],
    seeds: Sequence[int] | None = None,
    progress: bool = True,
    overwrite: bool = False,
    keep_checkpoints: bool = False,
    keep_students: bool = False,
) -> list[dict[str, Any]]:
    """Train one student per seed of a trained teacher and report their simulability.

    Students are initialised from the teacher's *pretrained* checkpoint (not its fine-tuned
    weights), every seed from the same parameters (a head drawn once with
    ``config.init_seed``, as the authors' code does, unless ``config.per_seed_init``), and
    trained on the first `num_examples` rows of the student pool of the
    teacher's data split. Each seed's run folder receives `config.json`, `checkpoints/`
    (resumable; the loop state is deleted once the seed has finished), `result.json` last,
    for SMaT the learned teacher explainer under ``explainer/`` (load it with
    :func:`smat.load_explainer`), and with `keep_students` the student itself under
    ``model/`` (a trained-model folder, like a teacher's); a finished seed is reused,
    and a folder that holds a student of other settings (or of another teacher) is refused
    before any work. ``config.loop.parallel_seeds`` trains the seeds in one program.

    Args:
      teacher_dir: a folder written by :func:`run_teacher` / `smat train-teacher`.
      config: explainer setting and hyperparameters.
      num_examples: student training size.
      output_dir: run folder (itself for one seed, ``seed{s}`` inside for several), or one
        folder per seed.
      seeds: distinct seeds (default: ``(config.loop.seed,)``); each replaces the loop seed.
      progress: show progress bars.
      overwrite: delete what each seed folder holds and train afresh.
      keep_checkpoints: keep each finished seed's resumable loop state.
      keep_students: save each student's best parameters as a model folder.

    Returns:
      One result record per seed: test and validation simulability, steps, seconds, and
      for SMaT the learned head weights.

    Raises:
      FileNotFoundError: `teacher_dir` is not a finished teacher run.
      ValueError: `num_examples` larger than the student pool, a folder count that
        differs from the seed count, or a seed folder that holds a run with other settings.
    """
    seeds = (config.loop.seed,) if seeds is None else tuple(seeds)
    folders = seed_folders(output_dir, seeds)
    teacher_dir = Path(teacher_dir)
    if not (teacher_dir / "result.json").is_file():
        raise FileNotFoundError(f"{teacher_dir} is not a finished teacher run (no result.json); "
                                "train one with `smat train-teacher --output-dir DIR`")
    teacher_config = read_json(teacher_dir / "config.json")
    # the teacher's weights as well as its settings: a teacher trained again in the same
    # folder (on another machine, say) can differ, and its students must not resume
    teacher_params = model_store.saved_params_fingerprint(teacher_dir / "model")
    settings = [{"teacher_dir": str(teacher_dir), "teacher": settings_hash(teacher_config),
                 "teacher_params": teacher_params,
                 "num_examples": num_examples,
                 "student": dataclasses.asdict(with_loop(config, seed=seed))} for seed in seeds]
    for folder, recorded in zip(folders, settings, strict=True):
        check_run_settings(folder, recorded, overwrite=overwrite)
    todo = [i for i, folder in enumerate(folders) if not (folder / "result.json").is_file()]
    if todo:
        todo_seeds = [seeds[i] for i in todo]
        inputs = _student_inputs(teacher_dir, config, num_examples,
                                 [folders[i] for i in todo], [settings[i] for i in todo])
        results = train_student([inputs.new_student(seed) for seed in todo_seeds],
                                *inputs.rows, task=inputs.task, config=config,
                                seeds=todo_seeds,
                                output_dir=[folders[i] / "checkpoints" for i in todo],
                                progress=progress)
        for i, seed, result in zip(todo, todo_seeds, results, strict=True):
            if keep_students:
                student = inputs.new_student(seed)
                model_store.save(folders[i] / "model", student, inputs.trained.tokenizer,
                                 params=result.student_params, **_student_info(inputs))
            _finish_student(folders[i], inputs, with_loop(config, seed=seed),
                            num_examples, result, teacher_params=teacher_params)
        if not keep_checkpoints:
            for i in todo:
                checkpoint.remove_resume_states(folders[i])
    return [read_json(folder / "result.json") for folder in folders]


def _student_info(inputs: _StudentInputs) -> dict[str, Any]:
    """What a saved student's model.json records beside its architecture: its teacher's
    data (so the student explains and evaluates on the same rows) and label names."""
    info = inputs.trained.info
    return {key: info[key] for key in ("max_len", "label_names", "data", "data_fingerprint",
                                       "image_mean", "image_std") if key in info}


def _model_and_run_folders(source: str | Path) -> tuple[Path, Path | None]:
    """A saved teacher's model folder and its run folder (None for a model folder given
    alone): `source` is either."""
    folder = Path(source)
    if (folder / "model" / "model.json").is_file():
        return folder / "model", folder
    return folder, None


# Where a loaded model's facts came from, as messages name it.
_LOADED_MODEL_JSON = "the model's model.json"


def _saved_model_info(source: model_store.TrainedModel | str | Path
                      ) -> tuple[dict[str, Any], str, Path | None]:
    """A saved teacher's ``model.json`` facts, where they were read (for messages) and its
    run folder (None for a loaded model or a model folder given alone)."""
    if isinstance(source, model_store.TrainedModel):
        return source.info, _LOADED_MODEL_JSON, None
    model_dir, run_dir = _model_and_run_folders(source)
    if not (model_dir / "model.json").is_file():
        raise FileNotFoundError(f"{source} holds no trained model (no model.json)")
    return read_json(model_dir / "model.json"), str(model_dir / "model.json"), run_dir


def saved_data_config(source: model_store.TrainedModel | str | Path) -> DataConfig:
    """The data settings a teacher trained on, from the one copy kept with its model
    (``model.json``'s "data"): `source` is a loaded model, a trained-model folder or a
    teacher run folder (whose model is ``model/``).

    Raises:
      ValueError: a model saved without its data settings (not by ``smat train-teacher``).
      FileNotFoundError: a folder without a saved model.
    """
    return _recorded_data_config(*_saved_model_info(source)[:2])


def _recorded_data_config(info: dict[str, Any], where: str) -> DataConfig:
    if "data" not in info:
        raise ValueError("this model was saved without its data settings (model.json has no "
                         "'data'); use a model trained by `smat train-teacher`")
    return recorded_dataclass(DataConfig, info["data"], source=f"{where} ('data')")


def teacher_examples(source: model_store.TrainedModel | str | Path
                     ) -> tuple[DataConfig, TextDataset | ImageDataset]:
    """The data settings a teacher trained on (:func:`saved_data_config`) and its examples,
    read again from the files they name. Every job that rebuilds a teacher's splits reads
    them here, so its students never split other rows than the teacher held out: a data
    file whose content changed since the teacher trained is refused (the content
    fingerprint recorded in ``model.json``, or for a model saved before it was recorded
    there, in the run folder's ``config.json``).

    Args:
      source: as :func:`saved_data_config`.

    Raises:
      FileNotFoundError: a recorded data file is not there (a relative path is read from
        the current folder), or as :func:`saved_data_config`.
      ValueError: a data file changed since the teacher trained, or as
        :func:`saved_data_config` and :func:`load_examples`.
    """
    return _recorded_examples(*_saved_model_info(source))


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


def _located(data: DataConfig, info: dict[str, Any], where: str) -> DataConfig:
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


def _recorded_examples(info: dict[str, Any], where: str, run_dir: Path | None
                       ) -> tuple[DataConfig, TextDataset | ImageDataset]:
    """:func:`teacher_examples` from `model.json` facts already read from `where`."""
    data = _located(_recorded_data_config(info, where), info, where)
    recorded = info.get("data_fingerprint")
    if recorded is None and run_dir is not None and (run_dir / "config.json").is_file():
        recorded = read_json(run_dir / "config.json").get("data_fingerprint")
    try:
        dataset = load_examples(data)
    except FileNotFoundError as error:
        raise FileNotFoundError(f"{error}; {where} records it as the teacher's data, and it is "
                                "neither where it was named nor where it was relative to the "
                                "model folder: put the file back") from None
    now = data_fingerprint(data) or {}
    for role, fingerprint in (recorded or {}).items():
        if now.get(role) != fingerprint:
            raise ValueError(f"the teacher's {role} {getattr(data, role)!r} changed since it "
                             f"was trained (content fingerprint {fingerprint}, now "
                             f"{now.get(role)}; {where}): its students would not split the "
                             "rows it held out; restore the file(s) or train a new teacher")
    return data, dataset


class TeacherRun(NamedTuple):
    """A trained teacher as the jobs that build on it read it.

    Attributes:
      trained: its model, tokenizer and saved facts (``model.json``).
      data: the data settings it trained on (:func:`saved_data_config`).
      parts: those data tokenized and split by the SMaT protocol.
      source: the pretrained start its run recorded, which students start from; None for
        a model folder outside a teacher run.
    """

    trained: model_store.TrainedModel
    data: DataConfig
    parts: ProtocolData
    source: ModelSource | None


def load_run(run: model_store.TrainedModel | str | Path, *, num_examples: int = 1,
             student_pool: str = "held_out") -> TeacherRun:
    """A teacher run's model, data settings, protocol data and pretrained start, each read
    from its one saved copy.

    Args:
      run: a teacher run folder (``smat train-teacher --output-dir``), its ``model/``
        folder, or a model already loaded from one.
      num_examples: the student training size of ``parts`` (a prefix of the student pool).
      student_pool: where the students' pool comes from (``StudentTrainConfig.student_pool``).

    Raises:
      FileNotFoundError: a folder without a saved model, or as :func:`teacher_examples`.
      ValueError: as :func:`teacher_examples` and :func:`protocol_data`.
    """
    if isinstance(run, model_store.TrainedModel):
        trained, run_dir, where = run, None, _LOADED_MODEL_JSON
    else:
        model_dir, run_dir = _model_and_run_folders(run)
        trained, where = model_store.load(model_dir), str(model_dir / "model.json")
    data, dataset = _recorded_examples(trained.info, where, run_dir)
    parts = protocol_data(data, dataset,
                          model_input_layout(trained.model, trained.tokenizer, trained.info),
                          num_examples=num_examples, student_pool=student_pool)
    recorded = run_dir / "config.json" if run_dir is not None else None
    source = (ModelSource.from_settings(read_json(recorded))
              if recorded is not None and recorded.is_file() else None)
    return TeacherRun(trained, data, parts, source)


def student_pool_size(teacher_dir: str | Path, student_pool: str = "held_out") -> int:
    """How many rows a student of this teacher can train on at most (its data's student
    pool), so a grid of sizes is checked before any student trains."""
    data, dataset = teacher_examples(teacher_dir)
    return len(protocol_splits(data, dataset,
                               student_pool=student_pool).student.pool)


class _StudentInputs(NamedTuple):
    trained: model_store.TrainedModel
    rows: tuple[StudentRows, StudentRows, StudentRows]
    task: str
    new_student: Any  # seed -> a student initialised from the pretrained checkpoint
    # (its head from config.init_seed, or from the seed with config.per_seed_init)


def _student_inputs(teacher_dir: Path, config: StudentTrainConfig, num_examples: int,
                    folders: Sequence[Path],
                    settings: Sequence[dict[str, Any]]) -> _StudentInputs:
    """The teacher's cached outputs over the student splits; once they are there,
    `config.json` per run folder (a bad input never leaves a run folder behind)."""
    trained, data, parts, source = load_run(teacher_dir, num_examples=num_examples,
                                            student_pool=config.student_pool)
    rows = _cached_student_rows(teacher_dir, trained, parts, setting=config.explainer,
                                ig_steps=config.ig_steps, num_examples=num_examples,
                                student_pool=config.student_pool,
                                explanation_source=config.explanation_source)
    for folder, recorded in zip(folders, settings, strict=True):
        write_json_atomic(folder / "config.json", recorded)

    student_source = (source if config.student_layers is None
                      else dataclasses.replace(source, num_layers=config.student_layers))

    def new_student(seed: int):
        head_seed = seed if config.per_seed_init else config.init_seed
        return start_model(student_source, task=data.task,
                           num_labels=trained.info["num_labels"], seed=head_seed)[0]

    return _StudentInputs(trained, rows, data.task, new_student)


def _finish_student(output_dir: Path, inputs: _StudentInputs, config: StudentTrainConfig,
                    num_examples: int, result: Any, *, teacher_params: str) -> dict[str, Any]:
    """Write a trained student's `result.json` (and a SMaT run's learned explainer); the
    record names its teacher's weights (`teacher_params`), so students of two teachers are
    never paired as if they shared one."""
    record = {"explainer": config.explainer, "seed": config.loop.seed, "num_examples": num_examples,
              "test": result.test, "validation": result.validation,
              "best_step": result.best_step, "steps": result.steps,
              "train_seconds": round(result.seconds, 1), "teacher_params": teacher_params}
    if result.teacher_explainer_params is not None:
        encoder = inputs.trained.model.encoder.config
        teacher_cfg, _ = explainer_configs(
            config.explainer, num_layers=encoder.num_layers, num_heads=encoder.num_heads,
            normalizer=config.normalizer)
        save_explainer(output_dir / "explainer", result.teacher_explainer_params, teacher_cfg)
        record["head_weights"] = np.asarray(attention.head_weights(
            result.teacher_explainer_params, config=teacher_cfg)).tolist()
    write_json_atomic(output_dir / "result.json", record)
    return record
