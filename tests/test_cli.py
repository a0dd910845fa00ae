"""The `smat` command end to end on a tiny BERT checkpoint and a local CSV (fixtures
tiny_teacher_args and tiny_teacher in conftest.py), and its process-wide effects: the
persistent compilation cache is scoped to one command, opt-out, and leaves JAX's global
configuration as it found it."""

import argparse
import contextlib
import dataclasses
import json
import typing
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat import cli
from smat.cli import compile_cache_dir, main
from smat.store.explainer_store import load_explainer
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from smat.training.teacher import TeacherTrainConfig


@contextlib.contextmanager
def _cache_every_program():
    """JAX skips caching programs that compile in under a second; cache all of them here."""
    names = ("jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    before = [getattr(jax.config, name) for name in names]
    jax.config.update(names[0], 0.0)
    jax.config.update(names[1], -1)
    try:
        yield
    finally:
        for name, value in zip(names, before, strict=True):
            jax.config.update(name, value)


def _predict(model: Path, texts: Path, *flags: str) -> list[str]:
    return ["predict", "--model", str(model), *flags, str(texts)]


def test_compile_cache_is_scoped_to_one_command(tiny_teacher, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\nboring and slow\n")
    cache = tmp_path / "cache"
    before = jax.config.jax_compilation_cache_dir
    with _cache_every_program():
        # --batch-size 3: shapes no earlier test compiled, so the command compiles afresh.
        assert main(_predict(tiny_teacher / "model", texts, "--batch-size", "3",
                             "--compile-cache", str(cache))) == 0
        written = sorted(cache.iterdir())
        assert written, "the command persisted none of its programs"
        assert jax.config.jax_compilation_cache_dir == before
        # A program compiled after the command returned is not written to its cache.
        jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.arange(7.0)).block_until_ready()
        assert sorted(cache.iterdir()) == written
    capsys.readouterr()


@pytest.mark.parametrize("opt_out", [["--no-compile-cache"], ["--compile-cache", "off"], []])
def test_compile_cache_opt_out(opt_out, tiny_teacher, tmp_path, monkeypatch, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n")
    cache = tmp_path / "cache"
    # With no flag, the environment variable turns the cache off (conftest sets it to off).
    monkeypatch.setenv("SMAT_COMPILE_CACHE", "off" if not opt_out else str(cache))
    with _cache_every_program():
        assert main(_predict(tiny_teacher / "model", texts, *opt_out)) == 0
    assert not cache.exists()
    capsys.readouterr()


def test_compile_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("SMAT_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert compile_cache_dir(None) == Path.home() / ".cache" / "smat" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache_dir(None) == tmp_path / "jax"
    monkeypatch.setenv("SMAT_COMPILE_CACHE", str(tmp_path / "env"))
    assert compile_cache_dir(None) == tmp_path / "env"
    assert compile_cache_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    for off in ("off", "OFF", "0", "false", "no"):
        assert compile_cache_dir(off) is None
    monkeypatch.setenv("SMAT_COMPILE_CACHE", "off")
    assert compile_cache_dir(None) is None


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

    grid = tmp_path / "grid"
    assert main(["simulability", "--teacher", str(tiny_teacher), "--sizes", "64", "--seeds", "2",
                 "--explainers", "none", "smat", "--parallel-seeds", "--batch-size", "16",
                 "--max-epochs", "1", "--output-dir", str(grid), "--no-progress"]) == 0
    assert "| smat |" in capsys.readouterr().out
    records = json.loads((grid / "results.json").read_text())
    assert [(r["explainer"], r["seed"]) for r in records] == [("none", 0), ("none", 1),
                                                              ("smat", 0), ("smat", 1)]
