"""The record of a run folder, and the one reader of a trained teacher.

Every run smat trains keeps its settings in the folder's ``config.json``, written when the
run starts and compared on every rerun (a rerun with other settings is refused, naming
each difference). :class:`TeacherRecord` and :class:`StudentRecord` type that file:
:func:`write_record` is its one writer, :func:`read_record` its one reader, and
:func:`check_record` the comparison; each record says which of its entries are facts about
the run (its data's content fingerprint, its teacher's weights, the smat version that
wrote it) rather than settings a command's flags set, so ``--config FILE`` replays only
the settings. A finished teacher keeps its data settings once, in its model's
``model.json``; :func:`load_run` reads a teacher run back (model, data settings, protocol
data, pretrained start) for every job that builds on one, without any training code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from smat.data import Encoded, PatchLayout, TextDataset
from smat.data.images import IMAGENET_MEAN, IMAGENET_STD, ImageDataset
from smat.data.protocol import (
    DataConfig,
    ProtocolData,
    data_fingerprint,
    load_examples,
    located,
    protocol_data,
    protocol_splits,
)
from smat.json_files import read_json, recorded_dataclass
from smat.models import ModelSource, ViTConfig
from smat.store import model_store
from smat.store.run_log import (
    cached_arrays,
    check_run_settings,
    settings_hash,
    write_json_atomic,
)

CODE_VERSION_KEY = "smat_version"


def code_version() -> str:
    """The installed smat's version ("unknown" in a source tree that is not installed)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("smat")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclasses.dataclass(frozen=True)
class TeacherRecord:
    """What a teacher run's ``config.json`` holds.

    Attributes:
      data: the data set and its splits.
      data_fingerprint: the content fingerprint of each local data file, by role (a fact).
      train: the teacher's training settings, as ``TeacherTrainConfig`` records them.
      model: the pretrained encoder it starts from.
    """

    data: DataConfig
    data_fingerprint: dict[str, str] | None
    train: dict[str, Any]
    model: ModelSource

    FACTS: ClassVar[tuple[str, ...]] = ("data_fingerprint",)
    UNCOMPARED: ClassVar[tuple[str, ...]] = ()

    def settings(self) -> dict[str, Any]:
        """The JSON of ``config.json`` (less the code version)."""
        return {"data": self.data.settings(), "data_fingerprint": self.data_fingerprint,
                "train": self.train, **self.model.settings()}

    @classmethod
    def from_settings(cls, recorded: Mapping[str, Any], *, where: str) -> TeacherRecord:
        return cls(recorded_dataclass(DataConfig, recorded["data"], source=f"{where} ('data')"),
                   recorded.get("data_fingerprint"), dict(recorded["train"]),
                   ModelSource.from_settings(recorded))


@dataclasses.dataclass(frozen=True)
class StudentRecord:
    """What a student run's ``config.json`` holds.

    Attributes:
      teacher_dir: the teacher run it learns from.
      teacher: the hash of that teacher's settings (a fact).
      teacher_params: the fingerprint of that teacher's weights (a fact: a teacher trained
        again elsewhere can differ, and its students must not resume).
      num_examples: the student's training size.
      student: the student's settings, as ``StudentTrainConfig`` records them.
    """

    teacher_dir: str
    teacher: str
    teacher_params: str
    num_examples: int
    student: dict[str, Any]

    FACTS: ClassVar[tuple[str, ...]] = ("teacher", "teacher_params")
    # where the teacher is: a moved run folder (its teacher inside) is the same run; the
    # teacher's settings hash and weights say whether it is the same teacher
    UNCOMPARED: ClassVar[tuple[str, ...]] = ("teacher_dir",)

    def settings(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_settings(cls, recorded: Mapping[str, Any], *, where: str) -> StudentRecord:
        return cls(**{field.name: recorded[field.name] for field in dataclasses.fields(cls)})


RunRecord = TeacherRecord | StudentRecord
FACTS = (*TeacherRecord.FACTS, *StudentRecord.FACTS, CODE_VERSION_KEY)
"""The entries of any ``config.json`` that are facts about a run, not settings to replay."""


def write_record(folder: str | Path, record: RunRecord) -> Path:
    """Write `record` as the folder's ``config.json``, with the smat version that wrote it."""
    path = Path(folder) / "config.json"
    write_json_atomic(path, {**record.settings(), CODE_VERSION_KEY: code_version()})
    return path


def read_record(folder: str | Path) -> RunRecord:
    """The record of a run folder: a teacher's or a student's, by what it holds.

    Raises:
      FileNotFoundError: the folder holds no ``config.json``.
      ValueError: a file that is neither record (naming it).
    """
    path = Path(folder) / "config.json"
    recorded = read_json(path)
    kind = StudentRecord if "student" in recorded else TeacherRecord
    try:
        return kind.from_settings(recorded, where=str(path))
    except KeyError as missing:
        raise ValueError(f"{path} is not the config.json of a smat run (no {missing})") from None


def check_record(folder: str | Path, record: RunRecord, *, overwrite: bool = False) -> bool:
    """:func:`smat.store.run_log.check_run_settings` for a record: whether the folder holds
    a run of the same settings; another one is refused, naming each difference. Neither the
    code version that wrote it nor where a student's teacher now is (``UNCOMPARED``: a run
    folder moved with its teacher) is a difference; the latter is brought up to date."""
    uncompared = record.UNCOMPARED
    same = check_run_settings(folder, {k: v for k, v in record.settings().items()
                                       if k not in uncompared},
                              overwrite=overwrite, ignored=(CODE_VERSION_KEY, *uncompared))
    path = Path(folder) / "config.json"
    if same and uncompared:
        written = read_json(path)
        if any(written.get(key) != record.settings()[key] for key in uncompared):
            write_json_atomic(path, {**written, **{key: record.settings()[key]
                                                   for key in uncompared}})
    return same


def settings_of(folder: str | Path) -> dict[str, Any]:
    """A run's ``config.json`` as its record reads it: the settings it was trained with."""
    return read_record(folder).settings()


def reused_teacher(teacher_dir: str | Path) -> dict[str, Any] | None:
    """The result record of a finished teacher run that a user chose to reuse (``--teacher
    DIR``), as it is, whatever its settings; None when the folder holds no finished run
    (the caller then trains one there)."""
    path = Path(teacher_dir) / "result.json"
    return read_json(path) if path.is_file() else None


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


def _recorded_examples(info: dict[str, Any], where: str, run_dir: Path | None
                       ) -> tuple[DataConfig, TextDataset | ImageDataset]:
    """:func:`teacher_examples` from `model.json` facts already read from `where`."""
    data = located(_recorded_data_config(info, where), info, where)
    recorded = info.get("data_fingerprint")
    if recorded is None and run_dir is not None and (run_dir / "config.json").is_file():
        recorded = read_record(run_dir).data_fingerprint
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
             student_pool: str = "held_out", teacher_parts: bool = True) -> TeacherRun:
    """A teacher run's model, data settings, protocol data and pretrained start, each read
    from its one saved copy (the teacher's own rows tokenized only with `teacher_parts`).

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
                          num_examples=num_examples, student_pool=student_pool,
                          teacher_parts=teacher_parts)
    source = (read_record(run_dir).model
              if run_dir is not None and (run_dir / "config.json").is_file() else None)
    return TeacherRun(trained, data, parts, source)


HELD_OUT_SPLITS = ("test", "teacher_train")


def held_out_rows(trained: model_store.TrainedModel, *, split: str = "test",
                  folder: str | Path | None = None) -> Encoded:
    """A trained teacher's protocol rows, tokenized: its held-out test rows (the student
    test part), or the rows it trained on (``split="teacher_train"``).

    With `folder` (the model's folder, or its teacher run's) they are computed once and
    cached there, keyed by the model's ``model.json`` facts and the content fingerprint of
    its data files as they are now: a later evaluation reads a small array file instead of
    loading, tokenizing and splitting the whole data set; a changed data file misses the
    cache and is refused as :func:`load_run` refuses it. A folder that cannot be written to
    is read without a cache.

    Raises:
      ValueError: an unknown split; as :func:`load_run`.
    """
    if split not in HELD_OUT_SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {HELD_OUT_SPLITS}")

    def rows() -> Encoded:
        parts = load_run(trained, teacher_parts=split != "test").parts
        return parts.student_test if split == "test" else parts.teacher_train

    if folder is None:
        return rows()
    data = located(saved_data_config(trained), trained.info, _LOADED_MODEL_JSON)
    facts = {k: v for k, v in trained.info.items() if k != "loaded_from"}  # movable
    key = settings_hash({"model": facts, "files": data_fingerprint(data), "split": split})
    path = _model_and_run_folders(folder)[0] / f"held_out_{split}_{key}.npz"
    try:
        return Encoded(**cached_arrays(path, lambda: rows()._asdict()))
    except PermissionError:
        return rows()


def student_pool_size(teacher_dir: str | Path, student_pool: str = "held_out") -> int:
    """How many rows a student of this teacher can train on at most (its data's student
    pool), so a grid of sizes is checked before any student trains."""
    data, dataset = teacher_examples(teacher_dir)
    return len(protocol_splits(data, dataset,
                               student_pool=student_pool).student.pool)
