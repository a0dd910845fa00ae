"""Tests for smat.jobs.study and `smat study score`."""

import json

import pytest

from smat.cli import main
from smat.jobs.study import read_answers
from tests.test_evaluation_human_study import _study


def _write(folder, tasks, answers, *, answer_column="answer"):
    (folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    lines = [f"worker,task_id,{answer_column},seconds"] + [
        f"{a['worker']},{a['task_id']},{a['answer']},3" for a in answers]
    (folder / "answers.csv").write_text("\n".join(lines) + "\n")


def test_study_score_command(tmp_path, capsys):
    tasks, answers = _study()
    _write(tmp_path, tasks, answers)
    with pytest.warns(UserWarning, match=r"ignoring columns \['seconds'\]"):
        assert main(["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
                     str(tmp_path / "answers.csv"), "--output-dir", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "study.json").read_text())
    assert report["score"]["ig"] == pytest.approx(2.5 / 6 + 2.5 / 4)
    out = capsys.readouterr().out
    assert "| ig | 100 | 100 | 104.2 |" in out and "| random | 1 | 1 |" in out


def test_missing_columns_and_bad_answers_are_reported(tmp_path, capsys):
    tasks, answers = _study()
    _write(tmp_path, tasks, answers, answer_column="label")
    with pytest.raises(ValueError, match=r"no column\(s\) \['answer'\]; its columns are"):
        read_answers(tmp_path / "answers.csv")
    with pytest.warns(UserWarning, match="seconds"):
        assert len(read_answers(tmp_path / "answers.csv", answer="label")) == len(answers)
    _write(tmp_path, tasks, answers + [{"worker": "x", "task_id": "zz", "answer": "pos"}])
    args = ["study", "score", "--tasks", str(tmp_path / "tasks.jsonl"), "--answers",
            str(tmp_path / "answers.csv"), "--output-dir", str(tmp_path / "out")]
    with pytest.warns(UserWarning):
        assert main(args) == 2
    assert "1 answers for unknown task ids" in capsys.readouterr().err
    with pytest.warns(UserWarning) as caught:
        assert main([*args, "--lenient"]) == 0
    assert any("dropped 1 answers for unknown task ids" in str(w.message) for w in caught)
