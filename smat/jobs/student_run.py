"""A student run: a student learns to simulate a trained teacher, with or without explanations.

:func:`run_student` reads the teacher run (:func:`smat.store.run_record.load_run`), caches
what the fixed teacher contributes over the students' rows once per setting (its logits,
pooled attention or static explanations), writes each seed's record, trains the seeds
(one vmapped program with ``parallel_seeds``) and writes each seed's ``result.json`` last,
with a SMaT run's learned explainer; a finished seed is reused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from smat.data.protocol import ProtocolData
from smat.explainers import attention
from smat.jobs.teacher_run import start_model
from smat.json_files import read_json
from smat.models import functional
from smat.registry import FIXED_HEADS, LEARNED, NO_EXPLAINER
from smat.store import checkpoint, model_store
from smat.store.explainer_store import save_explainer
from smat.store.run_log import cached_arrays, settings_hash, write_json_atomic
from smat.store.run_record import (
    StudentRecord,
    check_record,
    load_run,
    read_record,
    write_record,
)
from smat.training.loop import seed_folders, with_loop
from smat.training.student import (
    StudentRows,
    StudentTrainConfig,
    cache_teacher,
    explainer_configs,
    train_student,
)


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
    teacher = settings_hash(read_record(teacher_dir).settings())
    # the teacher's weights as well as its settings: a teacher trained again in the same
    # folder (on another machine, say) can differ, and its students must not resume
    teacher_params = model_store.saved_params_fingerprint(teacher_dir / "model")
    records = [StudentRecord(str(teacher_dir), teacher, teacher_params, num_examples,
                             dataclasses.asdict(with_loop(config, seed=seed)))
               for seed in seeds]
    for folder, record in zip(folders, records, strict=True):
        check_record(folder, record, overwrite=overwrite)
    todo = [i for i, folder in enumerate(folders) if not (folder / "result.json").is_file()]
    if todo:
        todo_seeds = [seeds[i] for i in todo]
        inputs = _student_inputs(teacher_dir, config, num_examples,
                                 [folders[i] for i in todo], [records[i] for i in todo])
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


class _StudentInputs(NamedTuple):
    trained: model_store.TrainedModel
    rows: tuple[StudentRows, StudentRows, StudentRows]
    task: str
    new_student: Any  # seed -> a student initialised from the pretrained checkpoint
    # (its head from config.init_seed, or from the seed with config.per_seed_init)


def _student_inputs(teacher_dir: Path, config: StudentTrainConfig, num_examples: int,
                    folders: Sequence[Path],
                    records: Sequence[StudentRecord]) -> _StudentInputs:
    """The teacher's cached outputs over the student splits; once they are there,
    `config.json` per run folder (a bad input never leaves a run folder behind)."""
    trained, data, parts, source = load_run(teacher_dir, num_examples=num_examples,
                                            student_pool=config.student_pool,
                                            teacher_parts=False)
    rows = _cached_student_rows(teacher_dir, trained, parts, setting=config.explainer,
                                ig_steps=config.ig_steps, num_examples=num_examples,
                                student_pool=config.student_pool,
                                explanation_source=config.explanation_source)
    for folder, record in zip(folders, records, strict=True):
        write_record(folder, record)

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
    if inputs.task == "classification" and result.test_predictions is not None:
        # each test row: "1" where the student agreed with the teacher (the rows of a
        # bootstrap over test sentences, smat.evaluation.statistics.bootstrap_over_rows)
        teacher = np.argmax(inputs.rows[2].teacher_logits, axis=1)
        record["test_agreement"] = "".join(
            "1" if agreed else "0" for agreed in result.test_predictions == teacher)
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
