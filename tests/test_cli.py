"""The `smat` command end to end on a tiny BERT checkpoint and a local CSV (fixtures
tiny_teacher_args and tiny_teacher in conftest.py), and its process-wide effects: the
persistent compilation cache is scoped to one command, opt-out, and leaves JAX's global
configuration as it found it."""

import argparse
import dataclasses
import json
import typing
from pathlib import Path

import numpy as np
import pytest

from smat import cli
from smat.cli import main
from smat.store.explainer_store import load_explainer
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig


def _leaf_fields(cls):
    """Names of the non-config fields of a config, nested configs included."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        inner = cli._nested_config(hints[field.name])
        yield from (_leaf_fields(inner) if inner else [field.name])


def test_every_setting_flag_comes_from_a_config_with_its_meaning_and_default():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, command in commands.items():
        for action in command._actions:
            if action.option_strings and action.dest != "help":
                assert action.help and len(action.help) > 10, (name, action.option_strings)
    teacher_help = commands["train-teacher"].format_help()
    for field in _leaf_fields(TeacherTrainConfig):
        assert "--" + field.replace("_", "-") in teacher_help
    assert "(default: 3)" in teacher_help  # the teacher's own loop default, not LoopConfig's
    assert "the preset's" in commands["roar"].format_help()


def test_nested_loop_flags_build_the_embedded_config():
    parser = argparse.ArgumentParser()
    cli._add_dataclass_flags(parser, StudentTrainConfig)
    config = cli._build_config(StudentTrainConfig,
                               parser.parse_args(["--batch-size", "8", "--parallel-seeds"]))
    defaults = StudentTrainConfig().loop
    assert config.loop == dataclasses.replace(defaults, batch_size=8, parallel_seeds=True)
    assert config.loop != LoopConfig(batch_size=8, parallel_seeds=True)  # student defaults kept

    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        """No Attributes section."""

        size: int = 1

    with pytest.raises(TypeError, match="Undocumented.size has no description"):
        cli._add_dataclass_flags(argparse.ArgumentParser(), Undocumented)


def test_tests_do_not_use_the_real_home():
    home = Path.home()
    assert home.name.startswith("smat-tests-home-"), home


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
    with pytest.warns(UserWarning, match=r"skipped 1 blank line\(s\); the outputs follow "
                                         r"the 2 non-blank lines"):
        assert main(["explain", "--model", str(teacher / "model"), "--explainers", "gradient",
                     "attention_all", str(explainer_dir), "--output-dir", str(out),
                     str(texts)]) == 0
    capsys.readouterr()
    explained = json.loads((out / "explanations.json").read_text())
    assert [e["text"] for e in explained] == ["a great film", "boring and slow"]
    assert explained[0]["tokens"] == ["a", "great", "film"]
    assert set(explained[0]["scores"]) == {"gradient", "attention_all", str(explainer_dir)}
    assert "great" in (out / "explanations.html").read_text()
    texts.write_text("a great film\nboring and slow\n")
    # --precision reaches the model the command loads (explain_data checks they match)
    assert main(["explain", "--model", str(teacher / "model"), "--explainers",
                 str(explainer_dir), "--precision", "bfloat16", "--output-dir",
                 str(tmp_path / "half"), str(texts)]) == 0
    capsys.readouterr()
    half = json.loads((tmp_path / "half" / "explanations.json").read_text())[0]["scores"]
    full = explained[0]["scores"][str(explainer_dir)]
    np.testing.assert_allclose(half[str(explainer_dir)], full, rtol=0.1,
                               atol=0.02 * np.abs(full).max())

    assert main(["predict", "--model", str(teacher / "model"), str(texts)]) == 0
    predictions = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [p["label"] for p in predictions] == ["pos", "neg"]


def test_cli_reports_bad_input_cleanly(tmp_path, capsys):
    assert main(["train-student", "--teacher", str(tmp_path), "--explainer", "none",
                 "--num-examples", "10"]) == 2
    assert "is not a finished teacher run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train-student", "--teacher", str(tmp_path), "--explainer", "taylor",
              "--num-examples", "10"])
    # An empty input file is reported before the (missing) model is looked for.
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    for command in (["explain", "--explainers", "gradient"], ["predict"]):
        assert main([*command, "--model", str(tmp_path / "no-model"), str(blank)]) == 2
        assert "blank.txt holds no text" in capsys.readouterr().err


def test_students_of_parallel_seeds_match_separate_runs(tiny_teacher, tmp_path, capsys):
    common = ["--teacher", str(tiny_teacher), "--explainer", "smat", "--num-examples", "64",
              "--batch-size", "16", "--max-epochs", "1", "--no-progress"]
    assert main(["train-student", *common, "--seed", "1", "--output-dir",
                 str(tmp_path / "alone")]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["train-student", *common, "--seeds", "2", "--parallel-seeds", "--output-dir",
                 str(tmp_path / "together")]) == 0
    together = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in together] == [0, 1]
    assert together[1]["steps"] == alone["steps"] == 4
    assert together[1]["test"] == pytest.approx(alone["test"], abs=1 / 40)
    assert (tmp_path / "together" / "seed0" / "explainer").is_dir()
    # one initialisation, two data orders: the trained students (and explainers) differ
    assert together[0]["head_weights"] != together[1]["head_weights"]

    grid = tmp_path / "grid"
    assert main(["simulability", "--teacher", str(tiny_teacher), "--sizes", "64", "--seeds", "2",
                 "--explainers", "none", "smat", "--parallel-seeds", "--batch-size", "16",
                 "--max-epochs", "1", "--output-dir", str(grid), "--no-progress"]) == 0
    assert "| smat |" in capsys.readouterr().out
    records = json.loads((grid / "results.json").read_text())
    assert [(r["explainer"], r["seed"]) for r in records] == [("none", 0), ("none", 1),
                                                              ("smat", 0), ("smat", 1)]


def test_a_rerun_with_other_settings_is_refused_not_answered_with_the_old_model(
        tiny_teacher, tiny_teacher_args, csv_data, tmp_path, capsys):
    """A finished teacher folder answers a rerun with its own settings at once, refuses one
    with a changed rate or a changed data file (naming what changed), and is left as it was."""
    before = (tiny_teacher / "result.json").read_text()
    assert main(["train-teacher", *tiny_teacher_args, "--output-dir", str(tiny_teacher)]) == 0
    capsys.readouterr()
    changed = [*tiny_teacher_args, "--learning-rate", "3e-3"]
    assert main(["train-teacher", *changed, "--output-dir", str(tiny_teacher)]) == 2
    error = capsys.readouterr().err
    assert "train.learning_rate: 0.002 -> 0.003" in error and "--overwrite" in error
    edited = tmp_path / "edited.csv"
    edited.write_text(Path(csv_data).read_text().replace(",pos", ",neg", 1))
    moved = [str(edited) if arg == str(csv_data) else arg for arg in tiny_teacher_args]
    assert main(["train-teacher", *moved, "--output-dir", str(tiny_teacher)]) == 2
    error = capsys.readouterr().err
    assert "data.source" in error and "data_fingerprint.source" in error
    assert (tiny_teacher / "result.json").read_text() == before
    # a student folder is refused the same way
    student = ["train-student", "--teacher", str(tiny_teacher), "--explainer", "none",
               "--num-examples", "16", "--batch-size", "16", "--max-epochs", "1", "--no-progress",
               "--output-dir", str(tmp_path / "student")]
    assert main(student) == 0
    assert main([*student, "--inner-learning-rate", "0.1"]) == 2
    assert "student.inner_learning_rate: 0.005 -> 0.1" in capsys.readouterr().err
