"""A teacher run: fine-tune a pretrained encoder on a data set's teacher part, resumably.

:func:`run_teacher` writes the run's record (:mod:`smat.store.run_record`), trains one
teacher per seed, tests it on the students' test rows, saves its model (with its data
settings, their content fingerprint and where the files are relative to the model) and
writes ``result.json`` last; a finished seed is reused. :func:`start_model` is where every
run starts: a checkpoint, an architecture drawn from scratch, or the encoder of a model
smat trained.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

from smat.data import DataShards, PatchLayout, split_size
from smat.data.protocol import (
    DataConfig,
    ProtocolData,
    data_fingerprint,
    data_locations,
    load_examples,
    protocol_data,
)
from smat.evaluation.cartography import (
    ambiguous_counts,
    cartography,
    group_counts,
    plot_data_map,
)
from smat.json_files import read_json
from smat.models import ModelSource, SequenceClassifier, ViTConfig, functional, keep_first_layers
from smat.store import checkpoint, model_store
from smat.store.run_log import write_json_atomic
from smat.store.run_record import (
    TeacherRecord,
    _image_normalisation,
    check_record,
    model_input_layout,
    write_record,
)
from smat.training import dynamics
from smat.training.loop import seed_folders, with_loop
from smat.training.teacher import (
    TeacherResult,
    TeacherTrainConfig,
    evaluate,
    train_teacher,
)


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
    refused before any work (:func:`smat.store.run_record.check_record`).

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
    records = [TeacherRecord(data, data_fingerprint(data),
                             dataclasses.asdict(with_loop(train, seed=seed)), model)
               for seed in seeds]
    for folder, record in zip(folders, records, strict=True):
        check_record(folder, record, overwrite=overwrite)
    todo = [i for i, folder in enumerate(folders) if not (folder / "result.json").is_file()]
    if todo:
        parts, models, tokenizer, layout = _teacher_setup(data, model,
                                                  [seeds[i] for i in todo],
                                                  [folders[i] for i in todo],
                                                  [records[i] for i in todo],
                                                  data_shards=train.data_shards)
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
                   folders: Sequence[Path], records: Sequence[TeacherRecord], *,
                   data_shards: int):
    """Load the data and one pretrained model per seed; once they load, write each run's
    `config.json` (a bad input never leaves a run folder behind). Also returns what turns
    the examples into model inputs (:func:`model_input_layout`). With `data_shards` > 1
    this process tokenizes only its shards of the training rows, and says which."""
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
    parts = protocol_data(data, dataset, layout, data_shards=data_shards,
                          process=jax.process_index(), num_processes=jax.process_count())
    if isinstance(parts.teacher_train, DataShards):
        held = sum(len(shard.labels) for shard in parts.teacher_train.shards)
        print(f"teacher: process {jax.process_index()} holds data shards "
              f"{list(parts.teacher_train.shard_ids)} of {data_shards}: {held} of "
              f"{split_size(parts.teacher_train)} training rows", file=sys.stderr)
    for folder, record in zip(folders, records, strict=True):
        write_record(folder, record)
    return parts, [m for m, _ in loaded], tokenizer, layout


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
                               pooling=source.pooling, head=source.head,
                               rngs=nnx.Rngs(seed))
    model.encoder = trained.model.encoder
    if source.num_layers is not None:
        model = keep_first_layers(model, source.num_layers, seed=seed)
    return model, trained.tokenizer


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
        "sizes": {"teacher_train": split_size(parts.teacher_train),
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
