"""End to end through the `smat` command line on a tiny BERT checkpoint and a local CSV.

The fixtures tiny_teacher_args and tiny_teacher live in conftest.py."""

import json

import numpy as np
import pytest

from smat.cli import main
from smat.explainer_store import load_explainer


def test_teacher_student_explain_predict(tiny_teacher_args, tmp_path, capsys):
    teacher = tmp_path / "teacher"
    common = ["--no-progress"]
    assert main(["train-teacher", *tiny_teacher_args, "--max-epochs", "3", "--output-dir",
                 str(teacher)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["test"]["accuracy"] >= 0.75  # separable by vocabulary; chance is 0.5
    result = json.loads((teacher / "result.json").read_text())
    assert result["sizes"] == {"teacher_train": 180, "teacher_validation": 20, "test": 40}

    assert main(["train-student", "--teacher", str(teacher), "--explainer", "smat",
                 "--num-examples", "64", "--seed", "1", "--batch-size", "16",
                 "--max-epochs", "1", *common]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["steps"] == 4 and record["explainer"] == "smat"
    explainer_dir = teacher / "students" / "n64" / "smat" / "seed1" / "explainer"
    explainer = load_explainer(explainer_dir)
    assert explainer.head_weights().shape == (2, 4)
    np.testing.assert_allclose(explainer.head_weights().sum(), 1.0, rtol=1e-5)  # sparsemax

    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n\nboring and slow\n")
    out = tmp_path / "explain"
    assert main(["explain", "--model", str(teacher / "model"), "--explainer", "gradient",
                 "attention_all", str(explainer_dir), "--output-dir", str(out),
                 str(texts)]) == 0
    capsys.readouterr()
    explained = json.loads((out / "explanations.json").read_text())
    assert [e["text"] for e in explained] == ["a great film", "boring and slow"]
    assert explained[0]["tokens"] == ["a", "great", "film"]
    assert set(explained[0]["scores"]) == {"gradient", "attention_all", str(explainer_dir)}
    assert "great" in (out / "explanations.html").read_text()

    assert main(["predict", "--model", str(teacher / "model"), str(texts)]) == 0
    predictions = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["label"] for p in predictions] == ["pos", "neg"]


def test_cli_reports_bad_input_cleanly(tmp_path, capsys):
    assert main(["train-student", "--teacher", str(tmp_path), "--explainer", "none",
                 "--num-examples", "10"]) == 2
    assert "is not a finished teacher run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train-student", "--teacher", str(tmp_path), "--explainer", "lime",
              "--num-examples", "10"])


def test_students_of_parallel_seeds_match_separate_runs(tiny_teacher, tmp_path, capsys):
    common = ["--teacher", str(tiny_teacher), "--explainer", "smat", "--num-examples", "64",
              "--batch-size", "16", "--max-epochs", "1", "--no-progress"]
    assert main(["train-student", *common, "--seed", "1", "--output-dir",
                 str(tmp_path / "alone")]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["train-student", *common, "--parallel-seeds", "2", "--output-dir",
                 str(tmp_path / "together")]) == 0
    together = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in together] == [0, 1]
    assert together[1]["steps"] == alone["steps"] == 4
    assert together[1]["test"] == pytest.approx(alone["test"], abs=1 / 40)
    assert (tmp_path / "together" / "seed0" / "explainer").is_dir()

    grid = tmp_path / "grid"
    assert main(["simulability", "--teacher", str(tiny_teacher), "--sizes", "64", "--seeds", "2",
                 "--explainers", "none", "smat", "--parallel-seeds", "--batch-size", "16",
                 "--max-epochs", "1", "--output-dir", str(grid), "--no-progress"]) == 0
    assert "| smat |" in capsys.readouterr().out
    records = json.loads((grid / "results.json").read_text())
    assert [(r["explainer"], r["seed"]) for r in records] == [("none", 0), ("none", 1),
                                                              ("smat", 0), ("smat", 1)]
