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
from smat.cli import main, parse_command
from smat.cli.flags import add_config_flags, build_config, in_flags, nested_config
from smat.store.explainer_store import load_explainer
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig


def _leaf_fields(cls):
    """Names of the non-config fields of a config, nested configs included."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        inner = nested_config(hints[field.name])
        yield from (_leaf_fields(inner) if inner else [field.name])


def _commands(parser, path=()):
    """(command words, parser) of every command, nested ones (study build ...) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def test_every_setting_flag_comes_from_a_config_with_its_meaning_and_default():
    parser = cli.build_parser()
    commands = dict(_commands(parser))
    for name, command in commands.items():
        for action in command._actions:
            if action.option_strings and action.dest != "help":
                assert action.help and len(action.help) > 10, (name, action.option_strings)
        # defaults print as a user types them, e.g. "(default: 0.01 0.05)", not a tuple
        text = command.format_help()
        assert "(default: (" not in text and "(default: [" not in text, name
    commands = {words[0]: sub for words, sub in commands.items() if len(words) == 1}
    assert "(default: 0.01 0.05 0.1 0.2 0.5)" in commands["faithfulness"].format_help()
    teacher_help = commands["train-teacher"].format_help()
    for field in _leaf_fields(TeacherTrainConfig):
        assert "--" + field.replace("_", "-") in teacher_help
    assert "(default: 3)" in teacher_help  # the teacher's own loop default, not LoopConfig's
    assert "the preset's" in commands["roar"].format_help()


def test_nested_loop_flags_build_the_embedded_config():
    parser = argparse.ArgumentParser()
    add_config_flags(parser, StudentTrainConfig)
    config = build_config(StudentTrainConfig,
                          parser.parse_args(["--batch-size", "8", "--parallel-seeds"]))
    defaults = StudentTrainConfig().loop
    assert config.loop == dataclasses.replace(defaults, batch_size=8, parallel_seeds=True)
    assert config.loop != LoopConfig(batch_size=8, parallel_seeds=True)  # student defaults kept

    @dataclasses.dataclass(frozen=True)
    class Undocumented:
        """No Attributes section."""

        size: int = 1

    with pytest.raises(TypeError, match="Undocumented.size has no description"):
        add_config_flags(argparse.ArgumentParser(), Undocumented)


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

    assert main(["train-student", "--teacher", str(teacher), "--explainers", "smat",
                 "--size", "64", "--seed", "1", "--batch-size", "16",
                 "--max-epochs", "1", *common]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["steps"] == 4 and record["explainer"] == "smat"
    # --config replays the run's settings: the same run, found finished; a flag beside it wins
    recorded = teacher / "students" / "n64" / "smat" / "seed1" / "config.json"
    assert main(["train-student", "--config", str(recorded), *common]) == 0
    assert json.loads(capsys.readouterr().out) == record
    assert main(["train-student", f"--config={recorded}", "--batch-size", "8", *common]) == 2
    assert "batch_size" in capsys.readouterr().err
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
    page = (out / "explanations.html").read_text()
    assert "great" in page
    # each explainer is drawn as its kind says: attention (static and learned) as a share of
    # the mass in purple, never blue; the legend names the scale of each
    legend = page.split("class='legend'>")[1].split("</div><div class='example'")[0]
    assert f"<b>attention_all, {explainer_dir}</b>: attention distribution" in legend
    assert "<b>gradient</b>: importance" in legend
    assert "rgba(40, 90, 200" not in page.split("class='example'", 1)[1]
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
    assert main(["train-student", "--teacher", str(tmp_path), "--explainers", "none",
                 "--size", "10"]) == 2
    assert "is not a finished teacher run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train-student", "--teacher", str(tmp_path), "--explainers", "taylor",
              "--size", "10"])
    # An empty input file is reported before the (missing) model is looked for.
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n")
    for command in (["explain", "--explainers", "gradient"], ["predict"]):
        assert main([*command, "--model", str(tmp_path / "no-model"), str(blank)]) == 2
        assert "blank.txt holds no text" in capsys.readouterr().err


def test_students_of_parallel_seeds_match_separate_runs(tiny_teacher, tmp_path, capsys):
    common = ["--teacher", str(tiny_teacher), "--explainers", "smat", "--size", "64",
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
    learned = [load_explainer(tmp_path / "together" / f"seed{seed}" / "explainer").head_weights()
               for seed in (0, 1)]
    assert not np.array_equal(*learned)

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
    student = ["train-student", "--teacher", str(tiny_teacher), "--explainers", "none",
               "--size", "16", "--batch-size", "16", "--max-epochs", "1", "--no-progress",
               "--output-dir", str(tmp_path / "student")]
    assert main(student) == 0
    assert main([*student, "--inner-learning-rate", "0.1"]) == 2
    assert "student.inner_learning_rate: 0.005 -> 0.1" in capsys.readouterr().err


def _bad_input(case, tmp_path, tiny_teacher, tiny_teacher_args):
    """(argv, the error's expected words) of one row of the bad-input table."""
    import shutil

    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n")
    if case == "empty csv":
        (tmp_path / "empty.csv").write_text("")
        return (["train-teacher", "--source", str(tmp_path / "empty.csv"), "--output-dir",
                 str(tmp_path / "run")], "empty.csv' is empty")
    if case == "csv not utf-8":
        (tmp_path / "latin.csv").write_bytes(b"sentence,label\ngood,1\n\xe9t\xe9,0\n")
        return (["train-teacher", "--source", str(tmp_path / "latin.csv"), "--output-dir",
                 str(tmp_path / "run")], "latin.csv' is not UTF-8 text: line 3")
    if case == "texts not utf-8":
        texts.write_bytes(b"good\n\xe9t\xe9\n")
        return (["predict", "--model", str(tiny_teacher / "model"), str(texts)],
                "texts.txt is not UTF-8 text: line 2")
    if case == "output dir is a file":
        (tmp_path / "taken").write_text("")
        return (["explain", "--model", str(tiny_teacher / "model"), "--explainers", "gradient",
                 "--output-dir", str(tmp_path / "taken"), str(texts)],
                "--output-dir " + str(tmp_path / "taken") + " is a file")
    if case == "truncated parameters":
        model = tmp_path / "model"
        shutil.copytree(tiny_teacher / "model", model)
        largest = max((p for p in (model / "params").rglob("*") if p.is_file()),
                      key=lambda p: p.stat().st_size)
        largest.write_bytes(largest.read_bytes()[:100])
        return (["predict", "--model", str(model), str(texts)],
                f"the checkpoint {model / 'params'} cannot be read")
    if case in ("damaged finished teacher", "weights not the recorded ones",
                "moved without its data"):
        teacher = tmp_path / "teacher"
        shutil.copytree(tiny_teacher, teacher)
        model_json = teacher / "model" / "model.json"
        info = json.loads(model_json.read_text())
        if case == "damaged finished teacher":  # a rerun must not print the old result
            largest = max((p for p in (teacher / "model" / "params").rglob("*")
                           if p.is_file()), key=lambda p: p.stat().st_size)
            largest.write_bytes(largest.read_bytes()[:100])
            return (["train-teacher", *tiny_teacher_args, "--output-dir", str(teacher)],
                    f"the checkpoint {teacher / 'model' / 'params'} cannot be read")
        if case == "weights not the recorded ones":
            info["params_fingerprint"] = "0123456789abcdef"
            model_json.write_text(json.dumps(info))
            return (["train-student", "--teacher", str(teacher), "--explainers", "none",
                     "--size", "8", "--output-dir", str(tmp_path / "run")],
                    "are not the ones its model.json records")
        gone = tmp_path / "elsewhere" / "reviews.csv"  # the data stayed on another machine
        info["data"]["source"] = str(gone)
        info["data_locations"] = {"source": ["../../elsewhere/reviews.csv"]}
        info.pop("data_fingerprint")
        model_json.write_text(json.dumps(info))
        return (["train-student", "--teacher", str(teacher), "--explainers", "none",
                 "--size", "8", "--output-dir", str(tmp_path / "run")],
                "neither where it was named nor where it was relative to the model folder")
    assert case == "size beyond the pool"
    return (["simulability", "--teacher", str(tiny_teacher), "--sizes", "8", "100000",
             "--explainers", "none", "--output-dir", str(tmp_path / "run")],
            "student sizes [100000] are outside 1..")


@pytest.mark.parametrize("case", [
    "empty csv", "csv not utf-8", "texts not utf-8", "output dir is a file",
    "truncated parameters", "damaged finished teacher", "weights not the recorded ones",
    "moved without its data", "size beyond the pool"])
def test_bad_input_is_one_line_naming_it_and_leaves_no_run_folder(
        case, tmp_path, tiny_teacher, tiny_teacher_args, capsys):
    argv, expected = _bad_input(case, tmp_path, tiny_teacher, tiny_teacher_args)
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert expected in error and len(error.splitlines()) == 1, error
    assert not (tmp_path / "run").exists()  # checked before any work: nothing half-made


def test_ctrl_c_ends_with_one_line_and_the_same_command_resumes(tiny_teacher_args, tmp_path):
    """SIGINT while training (sent once the first checkpoint is written): a line at once, one
    when the running step is checkpointed, exit 130, no traceback; the rerun says where it
    resumes."""
    import os
    import select
    import signal
    import subprocess
    import sys
    import time

    folder = tmp_path / "teacher"
    argv = [sys.executable, "-m", "smat.cli", "train-teacher", *tiny_teacher_args,
            "--max-epochs", "400", "--patience", "400", "--output-dir", str(folder)]
    last = folder / "checkpoints" / "last"  # written atomically after an evaluation
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            deadline = time.monotonic() + 600
            while not last.is_dir() and time.monotonic() < deadline:
                time.sleep(0.5)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=300)
        finally:
            process.kill()
    lines = [line for line in err.replace("\r", "\n").splitlines()
             if line.strip() and not line.startswith(("teacher:", "Generating", "rows:"))]
    assert process.returncode == 130, err[-2000:]
    assert lines == ["interrupted: checkpointing after the running step (Ctrl-C again stops "
                     "at once, from the last evaluation's checkpoint)",
                     "smat train-teacher: interrupted; finished work is kept, and the same "
                     "command resumes from the last checkpoint"], err[-2000:]
    with subprocess.Popen([*argv, "--no-progress"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as rerun:
        try:
            said, deadline = "", time.monotonic() + 600
            while "resuming" not in said and time.monotonic() < deadline:
                if select.select([rerun.stderr], [], [], 1.0)[0]:
                    said += os.read(rerun.stderr.fileno(), 4096).decode()
            rerun.send_signal(signal.SIGINT)
            rerun.communicate(timeout=300)
        finally:
            rerun.kill()
    assert f"teacher: resuming from {last} at step " in said, said


def test_version_and_no_progress_on_every_command(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"smat {importlib.metadata.version('smat')}"
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name, sub in commands.choices.items()
               if not sub._subparsers and "--no-progress" not in sub._option_string_actions]
    # study build / read / score are nested one level deeper
    study = commands.choices["study"]
    nested = next(a for a in study._actions if isinstance(a, argparse._SubParsersAction))
    missing += [f"study {name}" for name, sub in nested.choices.items()
                if "--no-progress" not in sub._option_string_actions and name != "score"]
    assert missing == []


def test_version_of_a_source_tree_without_package_metadata(capsys, monkeypatch):
    # a checkout on PYTHONPATH (the device machine's copy) has no installed metadata: the
    # parser still builds and every command runs (it raised PackageNotFoundError there)
    import importlib.metadata

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == (
        "smat unknown (not installed: run from a source tree)")


def test_explain_shows_a_progress_bar_over_its_rows(tiny_teacher, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\nboring and slow\nfine\n")
    assert main(["explain", "--model", str(tiny_teacher / "model"), "--explainers", "gradient",
                 "--output-dir", str(tmp_path / "out"), str(texts)]) == 0
    bar = capsys.readouterr().err.replace("\r", "\n")
    assert "explain:" in bar and "/3 [" in bar  # a bar over the 3 rows (cleared when done)
    assert main(["explain", "--model", str(tiny_teacher / "model"), "--explainers", "gradient",
                 "--no-progress", "--output-dir", str(tmp_path / "quiet"), str(texts)]) == 0
    assert "explain:" not in capsys.readouterr().err


def test_model_always_names_a_trained_model_folder(capsys):
    """`train-teacher --model` once meant --encoder; --model names a trained model in every
    other command, so a teacher refuses it and says which flag it wants."""
    with pytest.raises(SystemExit) as ended:
        cli.parse_command(["train-teacher", "--model", "some/encoder"])
    assert ended.value.code == 2
    assert ("--model names a model smat trained, everywhere; a teacher starts from a "
            "pretrained encoder: --encoder") in capsys.readouterr().err
    _, config = cli.parse_command(["train-teacher", "--encoder", "some/encoder"])
    assert config.model.encoder == "some/encoder"


def test_old_flag_spellings_still_work_for_one_release_with_a_warning(capsys):
    _, config = cli.parse_command(["train-student", "--teacher", "t", "--explainer", "smat",
                                   "--num-examples", "64"])
    assert (config.explainers, config.size) == ("smat", 64)
    warned = capsys.readouterr().err
    assert "--explainer is now --explainers" in warned and "--num-examples is now --size" in warned
    _, config = cli.parse_command(["train-student", "--teacher", "t", "--explainers", "none",
                                   "--size", "8"])
    assert (config.explainers, config.size) == ("none", 8) and capsys.readouterr().err == ""
    assert main(["train-student", "--teacher", "t", "--explainers", "none"]) == 2
    assert "--size is required" in capsys.readouterr().err
    assert main(["demo", "--seeds", "0", "1", "--output-dir", "unused"]) == 2
    assert "write --seeds 2 --seed 0" in capsys.readouterr().err
    _, config = cli.parse_command(["study", "read", "--model", "m", "--tasks", "t", "--output",
                                   "answers.jsonl"])
    assert config.output == "answers.jsonl" and "--output is now" in capsys.readouterr().err


def test_errors_name_the_flag_not_the_config_field(capsys):
    assert main(["faithfulness", "--model", "m", "--explainers", "gradient", "--batch-size",
                 "0"]) == 2
    assert capsys.readouterr().err.strip() == ("smat faithfulness: error: --batch-size must be "
                                               ">= 1, got 0")
    assert in_flags("LoopConfig.seed and StudyConfig.num_samples", {"--seed"}) == (
        "--seed and StudyConfig.num_samples")  # a field without a flag keeps its name


def test_every_example_of_smat_help_parses(capsys):
    """The examples `smat --help` shows are commands a user can copy (one put its texts
    file after --explainers, which read it as an explainer)."""
    import shlex

    import smat.cli

    with pytest.raises(SystemExit):
        main(["--help"])
    shown = [line.strip() for line in capsys.readouterr().out.splitlines()
             if line.startswith("  smat ")]
    assert len(shown) == 17
    for line in shown:
        command, _ = parse_command(shlex.split(line)[1:])
        assert line.startswith(f"smat {command.name} ")
    assert smat.cli.__doc__.splitlines()[0] in smat.cli.build_parser().format_help()
    with pytest.raises(SystemExit) as ended:  # no command: the help, then the error
        main([])
    said = capsys.readouterr().err
    assert ended.value.code == 2 and "examples:" in said
    assert said.strip().endswith("smat: error: the following arguments are required: command")
    with pytest.raises(SystemExit):  # a command group without its action: the group's help
        main(["study"])
    said = capsys.readouterr().err
    assert said.startswith("usage: smat study") and "positional arguments:" in said
    assert said.strip().endswith("the following arguments are required: action")


def test_a_positional_taken_by_a_list_flag_is_pointed_out(capsys):
    """argparse reads `--explainers gradient new.txt` as two explainers and then misses
    the texts file; the error says why and how to write it."""
    with pytest.raises(SystemExit):
        main(["explain", "--model", "m", "--explainers", "gradient", "new.txt"])
    assert capsys.readouterr().err.strip().endswith(
        "error: the following arguments are required: texts (--explainers takes every word "
        "up to the next flag: put texts before it, or end its list with --)")
    command, config = parse_command(["explain", "--model", "m", "--explainers", "gradient",
                                     "--", "new.txt"])
    assert config.texts == "new.txt" and config.explain.explainers == ("gradient",)
    with pytest.raises(SystemExit):  # no list flag given: argparse's message alone
        main(["predict", "--model", "m"])
    assert capsys.readouterr().err.strip().endswith("required: texts")


def test_config_file_replays_a_teachers_settings(tiny_teacher, tmp_path, capsys):
    recorded = tiny_teacher / "config.json"
    # every recorded setting replayed: the finished run is found, not refused or retrained
    assert main(["train-teacher", "--config", str(recorded), "--output-dir",
                 str(tiny_teacher)]) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == json.loads(
        (tiny_teacher / "result.json").read_text())["steps"]
    assert main(["train-teacher", "--config", str(recorded), "--learning-rate", "0.5",
                 "--output-dir", str(tiny_teacher)]) == 2
    assert "learning_rate" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"student": {}, "num_examples": 8}))
    assert main(["train-teacher", "--config", str(other)]) == 2
    assert "records 'student', which `smat train-teacher` has no flag for" in (
        capsys.readouterr().err)
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": {"source": "a.csv",}}')
    assert main(["train-teacher", "--config", str(broken)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"smat train-teacher: error: --config: {broken} is not valid JSON: Expecting property "
        "name enclosed in double quotes at line 1, column 29")
    assert main(["train-teacher", "--config", str(tmp_path / "missing.json")]) == 2
    assert "--config: " in capsys.readouterr().err
