"""The typed record of a run folder: one writer, one reader, the settings comparison."""

import dataclasses
import json

import pytest

from smat.store.run_record import (
    CODE_VERSION_KEY,
    FACTS,
    StudentRecord,
    TeacherRecord,
    check_record,
    read_record,
    write_record,
)


def test_a_teacher_runs_record_reads_back_as_it_was_written(tiny_teacher, tmp_path):
    record = read_record(tiny_teacher)
    assert isinstance(record, TeacherRecord)
    assert record.data.text_column == "sentence" and record.model.pooling == "scalar_mix"
    assert record.data_fingerprint == json.loads(
        (tiny_teacher / "model" / "model.json").read_text())["data_fingerprint"]
    written = json.loads((tiny_teacher / "config.json").read_text())
    assert {**record.settings(), CODE_VERSION_KEY: written[CODE_VERSION_KEY]} == written
    write_record(tmp_path, record)
    assert read_record(tmp_path) == record


def test_the_code_version_is_a_fact_never_a_difference(tiny_teacher, tmp_path):
    record = read_record(tiny_teacher)
    write_record(tmp_path, record)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), CODE_VERSION_KEY: "0.0.1"}))
    assert check_record(tmp_path, record)  # written by another smat: the same settings
    other = dataclasses.replace(record, train={**record.train, "learning_rate": 1.0})
    with pytest.raises(ValueError, match=r"train.learning_rate: 0.002 -> 1.0"):
        check_record(tmp_path, other)
    assert CODE_VERSION_KEY in FACTS and "data_fingerprint" in FACTS


def test_a_student_record_is_read_as_one(tmp_path):
    record = StudentRecord("runs/teacher", "abc", "0123", 16, {"explainer": "smat"})
    write_record(tmp_path, record)
    assert read_record(tmp_path) == record
    (tmp_path / "config.json").write_text(json.dumps({"student": {}}))
    with pytest.raises(ValueError, match="is not the config.json of a smat run"):
        read_record(tmp_path)


def test_a_student_folder_moved_with_its_teacher_is_the_same_run(tmp_path):
    record = StudentRecord("runs/demo/teacher", "abc", "0123", 16, {"explainer": "smat"})
    write_record(tmp_path, record)
    moved = dataclasses.replace(record, teacher_dir="elsewhere/demo/teacher")
    assert check_record(tmp_path, moved)
    assert read_record(tmp_path) == moved  # where the teacher is now
    with pytest.raises(ValueError, match="teacher_params: '0123' -> '4567'"):
        check_record(tmp_path, dataclasses.replace(moved, teacher_params="4567"))
