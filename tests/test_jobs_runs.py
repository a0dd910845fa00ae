"""Tests for smat.store.run_record: loading a data source as the run configs describe it."""

import dataclasses
import json

import numpy as np
import pytest

from smat.data.protocol import DataConfig, load_examples


def test_imdb_line_breaks_become_spaces_only_when_asked(tmp_path):
    rows = [{"text": "Great film.<br /><br />Loved it.", "label": 1},
            {"text": "Dull<br /><br />and long.", "label": 0}]
    path = tmp_path / "reviews.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    kept = load_examples(DataConfig(source=str(path)))
    assert kept.texts == ("Great film.<br /><br />Loved it.", "Dull<br /><br />and long.")
    cleaned = load_examples(DataConfig(source=str(path), html_line_breaks_as_spaces=True))
    assert cleaned.texts == ("Great film. Loved it.", "Dull and long.")
    assert list(cleaned.labels) == list(kept.labels)


def test_static_teacher_explanations_are_cached_for_training_rows_only(tiny_teacher):
    """The explanation loss reads them on training rows; validation and test rows only
    need the teacher's logits, so no explainer runs over them."""
    from smat.jobs.student_run import _cached_student_rows
    from smat.store.run_record import load_run

    trained, _, parts, _ = load_run(tiny_teacher, num_examples=16)
    train, validation, test = _cached_student_rows(tiny_teacher, trained, parts,
                                                   setting="gradient", ig_steps=2,
                                                   num_examples=16)
    assert train.teacher_scores.shape == train.input_ids.shape
    assert validation.teacher_scores.shape == (len(validation.labels), 0)
    assert test.teacher_scores.shape == (len(test.labels), 0)
    assert validation.teacher_logits.shape[0] == len(validation.labels)


def test_load_run_reads_each_setting_from_its_one_saved_copy(tiny_teacher):
    """A teacher run folder, its model folder and a loaded model give the same data
    settings and rows; only the run folder knows the pretrained start (config.json)."""
    from smat.models import ModelSource
    from smat.store.run_record import load_run, saved_data_config

    recorded = json.loads((tiny_teacher / "config.json").read_text())
    run = load_run(tiny_teacher, num_examples=16)
    assert run.data == DataConfig(**recorded["data"]) == saved_data_config(tiny_teacher)
    assert run.source == ModelSource(recorded["model_source"], recorded["pooling"])
    assert len(run.parts.student_train.labels) == 16
    for other in (tiny_teacher / "model", run.trained):
        again = load_run(other, num_examples=16)
        assert again.source is None and again.data == run.data
        np.testing.assert_array_equal(again.parts.student_test.input_ids,
                                      run.parts.student_test.input_ids)
    with pytest.raises(FileNotFoundError, match="no model.json"):
        load_run(tiny_teacher / "checkpoints")


def test_a_teacher_data_file_changed_since_training_is_refused(tiny_teacher, tmp_path,
                                                              monkeypatch):
    """Students rebuild the teacher's splits from its data files: an edited file would
    give them other rows than the teacher held out, so it is refused, for a model that
    records its data's fingerprint and for one saved before it did (the run's
    config.json has it); a file found nowhere is named."""
    import shutil

    from smat.store.run_record import load_run, student_pool_size

    run = tmp_path / "teacher"
    shutil.copytree(tiny_teacher, run, ignore=shutil.ignore_patterns("checkpoints"))
    model_json = run / "model" / "model.json"
    info = json.loads(model_json.read_text())
    recorded = json.loads((run / "config.json").read_text())["data_fingerprint"]
    assert info["data_fingerprint"] == recorded
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(info["data"]["source"], data / "reviews.csv")
    info["data"]["source"] = "reviews.csv"  # relative, as most users type it
    model_json.write_text(json.dumps(info))
    monkeypatch.chdir(data)
    pool = student_pool_size(run)
    assert len(load_run(run / "model", num_examples=16).parts.student_train.labels) == 16

    original = (data / "reviews.csv").read_text()
    (data / "reviews.csv").write_text(original + original.splitlines()[-1] + "\n")
    for old_model in (False, True):
        if old_model:
            del info["data_fingerprint"]
            model_json.write_text(json.dumps(info))
        with pytest.raises(ValueError, match="source 'reviews.csv' changed since it was trained"):
            student_pool_size(run)
    with pytest.raises(ValueError, match="changed since it was trained"):
        load_run(run, num_examples=16)

    (data / "reviews.csv").write_text(original)
    assert student_pool_size(run) == pool
    monkeypatch.chdir(tmp_path)
    del info["data_locations"]  # a model saved before they were recorded
    model_json.write_text(json.dumps(info))
    with pytest.raises(FileNotFoundError, match="neither where it was named nor where it was "
                                                "relative to the model folder"):
        load_run(run, num_examples=16)


def test_students_find_the_teachers_data_from_any_folder_and_after_a_move(
        tiny_teacher_args, tmp_path, monkeypatch):
    """A teacher trained on a relative data path: its students run from another folder,
    and from anywhere once the project (runs and data together) has moved."""
    import shutil

    from smat.cli import main
    from smat.store.run_record import load_run

    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    args = list(tiny_teacher_args)
    source = args.index("--source") + 1
    shutil.copy(args[source], project / "data" / "reviews.csv")
    args[source] = "data/reviews.csv"
    monkeypatch.chdir(project)
    assert main(["train-teacher", *args, "--output-dir", "runs/teacher"]) == 0
    monkeypatch.chdir(tmp_path)
    assert len(load_run(project / "runs" / "teacher", num_examples=16).parts.student_train
               .labels) == 16
    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    project.rename(moved)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    assert len(load_run(moved / "runs" / "teacher" / "model", num_examples=16)
               .parts.student_train.labels) == 16


def _record(teacher_dir):
    """A student record to write beside inputs built outside :func:`run_student`."""
    from smat.store.run_record import StudentRecord

    return StudentRecord(str(teacher_dir), teacher="", teacher_params="", num_examples=16,
                         student={})


def test_every_seed_starts_from_one_student_initialisation_unless_asked(tiny_teacher, tmp_path):
    """The authors' students share their initial parameters, task head included; seeds
    vary only the data order, dropout and validation draws (``per_seed_init`` keeps one
    head per seed). The CLI test of parallel seeds checks that trained students differ."""
    import jax
    import numpy as np

    from smat.jobs.student_run import _student_inputs
    from smat.models import functional
    from smat.training.student import StudentTrainConfig

    def initial_heads(config):
        inputs = _student_inputs(tiny_teacher, config, 16, [tmp_path / "a", tmp_path / "b"],
                                 [_record(tiny_teacher)] * 2)
        return [jax.tree.leaves(functional.split(inputs.new_student(seed))[1])
                for seed in (0, 1)]

    shared = initial_heads(StudentTrainConfig(explainer="none", ig_steps=2))
    assert all(np.array_equal(a, b) for a, b in zip(*shared, strict=True))
    own = initial_heads(StudentTrainConfig(explainer="none", ig_steps=2, per_seed_init=True))
    assert not all(np.array_equal(a, b) for a, b in zip(*own, strict=True))
    # the encoder is the pretrained checkpoint either way: only the head differs
    assert sum(not np.array_equal(a, b) for a, b in zip(*own, strict=True)) <= 4


def test_students_carved_from_their_own_source_never_touch_the_teachers(tmp_path):
    """The paper's IMDB layout: the teacher on one split, the students' parts from another."""
    from smat.data.protocol import protocol_splits

    def write(name, rows):
        path = tmp_path / name
        path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
        return str(path)

    teacher = write("train.tsv", [(f"phrase {i}", i % 2) for i in range(50)])
    students = write("dev.tsv", [(f"sentence {i}", (i + 1) % 2) for i in range(30)])
    config = DataConfig(source=teacher, student_source=students, text_column="sentence",
                        teacher_fraction=0.4, student_validation_size=5, student_test_size=10)
    dataset = load_examples(config)
    assert len(dataset) == 80 and dataset.student_rows == 30
    splits = protocol_splits(config, dataset, num_examples=12)
    teacher_rows = np.concatenate([splits.teacher_train, splits.teacher_validation])
    assert len(teacher_rows) == 20 and teacher_rows.max() < 50
    student = splits.student
    assert (len(student.train), len(student.validation), len(student.test)) == (12, 5, 10)
    assert all(dataset.texts[i].startswith("sentence") for part in student for i in part)
    # one source: the same config without student_source splits the teacher file alone
    alone = DataConfig(source=teacher, text_column="sentence", teacher_fraction=0.4,
                       student_validation_size=5, student_test_size=10)
    assert load_examples(alone).student_rows == 0
    with pytest.raises(ValueError, match="differ from those of source"):
        load_examples(dataclasses.replace(config, student_source=write(
            "other.tsv", [(f"x {i}", "pos") for i in range(20)])))


def test_students_can_train_on_a_sample_of_the_teachers_rows(tiny_teacher, tmp_path, capsys):
    """The paper's CIFAR-100 / MLQE-PE protocol: the students' pool is the teacher's own
    training rows; validation and test stay the rows the teacher never saw. 150 rows are
    more than the held-out pool (120 of the 400 rows) holds."""
    from smat.cli import main
    from smat.data.protocol import protocol_splits
    from smat.store.run_record import load_run, saved_data_config
    from smat.training.student import StudentTrainConfig

    data = saved_data_config(tiny_teacher)
    dataset = load_examples(data)
    held_out = protocol_splits(data, dataset, num_examples=16)
    reused = protocol_splits(data, dataset, num_examples=150, student_pool="teacher_train")
    assert set(reused.student.train) <= set(held_out.teacher_train)
    assert sorted(reused.student.pool) == sorted(held_out.teacher_train)
    for part in ("validation", "test"):
        np.testing.assert_array_equal(getattr(reused.student, part),
                                      getattr(held_out.student, part))
    np.testing.assert_array_equal(reused.teacher_train, held_out.teacher_train)
    run = load_run(tiny_teacher, num_examples=150, student_pool="teacher_train")
    assert len(run.parts.student_train.labels) == 150
    with pytest.raises(ValueError, match="student_pool must be one of"):
        StudentTrainConfig(student_pool="teacher")

    args = ["train-student", "--teacher", str(tiny_teacher), "--explainers", "none",
            "--size", "150", "--max-epochs", "1", "--batch-size", "16", "--no-progress"]
    assert main([*args, "--output-dir", str(tmp_path / "a")]) == 2
    assert "larger than the student pool of 120 rows" in capsys.readouterr().err
    assert main([*args, "--student-pool", "teacher_train",
                 "--output-dir", str(tmp_path / "b")]) == 0
    record = json.loads((tmp_path / "b" / "result.json").read_text())
    assert record["num_examples"] == 150 and 0 <= record["test"]["accuracy"] <= 1
    assert (tiny_teacher / "cache" / "none-n150-ig50-teacher_train.npz").is_file()


def test_a_teacher_trained_on_one_batch_shape_is_also_evaluated_on_it(tiny_teacher_args,
                                                                      tmp_path, monkeypatch):
    """With ``--length-multiple`` equal to ``--max-len`` (the GPU variant's one compiled
    shape) the validation and test passes run at that width too, not at the default
    multiple of 16 (an H200 compiled the evaluation pass once per cut length, 6 s each)."""
    import smat.models.inference as inference
    from smat.cli import main

    widths = []
    original = inference.batch_logits

    def recording(graphdef, params, input_ids, *args):
        widths.append(input_ids.shape[-1])
        return original(graphdef, params, input_ids, *args)

    monkeypatch.setattr(inference, "batch_logits", recording)
    argv = [*tiny_teacher_args, "--output-dir", str(tmp_path), "--max-epochs", "1"]
    argv[argv.index("--max-len") + 1] = "32"
    assert main(["train-teacher", *argv, "--length-multiple", "32"]) == 0
    # the corpus's sentences are under 16 tokens, so cuts to multiples of 16 would show here
    assert widths and set(widths) == {32}
    assert json.loads((tmp_path / "result.json").read_text())["test"]["accuracy"] > 0


def test_students_never_resume_from_a_teacher_whose_weights_changed(tiny_teacher, tmp_path,
                                                                   capsys):
    """A teacher trained again in its folder (its settings unchanged, its weights not: float
    summation order differs between machines) must not take over its students' runs: the
    students' settings and records name the teacher's weights."""
    import shutil

    import jax

    from smat.cli import main
    from smat.models import functional
    from smat.store import model_store

    teacher = shutil.copytree(tiny_teacher, tmp_path / "teacher")
    args = ["train-student", "--teacher", str(teacher), "--explainers", "none", "--size", "16",
            "--max-epochs", "1", "--batch-size", "16", "--no-progress",
            "--output-dir", str(tmp_path / "student")]
    assert main(args) == 0
    fingerprint = model_store.saved_params_fingerprint(teacher / "model")
    record = json.loads((tmp_path / "student" / "result.json").read_text())
    assert record["teacher_params"] == fingerprint
    assert main(args) == 0  # the same teacher: the finished student is reused
    capsys.readouterr()

    trained = model_store.load(teacher / "model")
    leaves, treedef = jax.tree.flatten(functional.split(trained.model)[1])
    retrained = jax.tree.unflatten(treedef, [leaves[0] + 1e-3, *leaves[1:]])
    described = model_store.describe(trained.model)
    model_store.save(teacher / "model", trained.model, trained.tokenizer, params=retrained,
                     **{key: value for key, value in trained.info.items()
                        if key not in described and key != "params_fingerprint"})
    assert model_store.saved_params_fingerprint(teacher / "model") != fingerprint
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "teacher_params" in err and fingerprint in err and "Traceback" not in err


def test_a_smaller_student_learns_from_every_teacher_head(tiny_teacher, tmp_path):
    """student_layers keeps the first layers of the pretrained encoder for the student;
    the SMaT explainer still weighs every head of the (2-layer) teacher."""
    import numpy as np

    from smat.jobs.student_run import _student_inputs, run_student
    from smat.store.explainer_store import load_explainer
    from smat.store.model_store import load
    from smat.training.loop import LoopConfig
    from smat.training.student import StudentTrainConfig

    config = StudentTrainConfig(explainer="smat", student_layers=1, ig_steps=2,
                                inner_learning_rate=0.05, outer_learning_rate=0.05,
                                loop=LoopConfig(batch_size=8, max_epochs=1, patience=1))
    (record,) = run_student(tiny_teacher, config=config, num_examples=16,
                            output_dir=tmp_path / "student", progress=False)
    teacher = load(tiny_teacher / "model").model.encoder.config
    assert np.asarray(record["head_weights"]).shape == (teacher.num_layers, teacher.num_heads)
    assert load_explainer(tmp_path / "student" / "explainer").head_weights().shape == (
        teacher.num_layers, teacher.num_heads)
    assert teacher.num_layers == 2
    student = _student_inputs(tiny_teacher, config, 16, [tmp_path / "s"],
                              [_record(tiny_teacher)]).new_student(0)
    assert student.encoder.config.num_layers == 1


def test_finished_runs_keep_what_later_commands_need_and_no_resume_state(tiny_teacher,
                                                                         tmp_path):
    """A finished run drops its resumable loop state (hundreds of MB for MiniLM) unless
    asked to keep it; students keep their parameters only when asked."""
    from smat.jobs.student_run import run_student
    from smat.store import model_store
    from smat.training.loop import LoopConfig
    from smat.training.student import StudentTrainConfig

    assert not list((tiny_teacher / "checkpoints").rglob("last"))
    assert (tiny_teacher / "checkpoints" / "metrics.jsonl").is_file()
    config = StudentTrainConfig(explainer="smat", ig_steps=2, inner_learning_rate=0.05,
                                loop=LoopConfig(batch_size=8, max_epochs=1, patience=1,
                                                parallel_seeds=True))

    def students(name, **keep):
        folders = [tmp_path / name / f"seed{seed}" for seed in (0, 1)]
        run_student(tiny_teacher, config=config, num_examples=16, seeds=[0, 1],
                    output_dir=folders, progress=False, **keep)
        return folders

    lean = students("lean")
    assert not list((tmp_path / "lean").rglob("last"))
    assert all((f / "result.json").is_file() and (f / "explainer").is_dir()
               and (f / "checkpoints" / "metrics.jsonl").is_file() and not (f / "model").exists()
               for f in lean)
    kept = students("kept", keep_checkpoints=True, keep_students=True)
    assert list((tmp_path / "kept").rglob("last"))  # the two seeds' one vmapped state
    loaded = model_store.load(kept[1] / "model")
    assert loaded.info["label_names"] == model_store.load(tiny_teacher / "model").info[
        "label_names"]
    assert (model_store.saved_params_fingerprint(kept[0] / "model")
            != model_store.saved_params_fingerprint(kept[1] / "model"))


def _count_tokenized_rows(monkeypatch) -> list[int]:
    """The row count of every tokenization call of the protocol from now on."""
    from smat.data import protocol

    tokenized = []
    original = protocol.tokenize_with_stats

    def counting(data, *args, **kwargs):
        tokenized.append(len(data))
        return original(data, *args, **kwargs)

    monkeypatch.setattr(protocol, "tokenize_with_stats", counting)
    return tokenized


def test_a_process_tokenizes_only_its_data_shards_of_the_teacher_rows(csv_data, monkeypatch):
    """Process 1 of 2 with 4 data shards holds shards 2 and 3 of the teacher's training
    rows, equal to those rows of the whole tokenization, and tokenizes no other training
    row; the other parts are the whole tokenization's."""
    from transformers import AutoTokenizer

    from smat.data import DataShards, protocol, shard_positions, take
    from smat.models import minilm_path

    config = DataConfig(source=str(csv_data), text_column="sentence", label_column="sentiment",
                        max_len=16, student_validation_size=40, student_test_size=40)
    dataset = load_examples(config)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    whole = protocol.protocol_data(config, dataset, tokenizer)
    tokenized = _count_tokenized_rows(monkeypatch)
    parts = protocol.protocol_data(config, dataset, tokenizer, data_shards=4, process=1,
                                   num_processes=2)
    held = parts.teacher_train
    size = len(whole.teacher_train.labels)
    assert isinstance(held, DataShards) and held.shard_ids == (2, 3)
    assert (held.num_shards, held.num_examples) == (4, size)
    for rows, shard in zip(held.shards, held.shard_ids, strict=True):
        expected = take(whole.teacher_train, shard_positions(size, shard, 4))
        for a, b in zip(rows, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    for ours, theirs in zip(parts[1:5], whole[1:5], strict=True):
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    others = sum(len(part.labels) for part in whole[1:5])
    assert sum(tokenized) == others + len(shard_positions(size, 2, 4)) + len(
        shard_positions(size, 3, 4)) < len(dataset)


def test_the_student_parts_alone_tokenize_no_teacher_row(csv_data, monkeypatch):
    """teacher_parts=False (students, the demo, held-out evaluations): the student parts
    equal the whole tokenization's and only their rows are tokenized."""
    from transformers import AutoTokenizer

    from smat.data import protocol
    from smat.models import minilm_path

    config = DataConfig(source=str(csv_data), text_column="sentence", label_column="sentiment",
                        max_len=16, student_validation_size=40, student_test_size=40)
    dataset = load_examples(config)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    whole = protocol.protocol_data(config, dataset, tokenizer, num_examples=32)
    tokenized = _count_tokenized_rows(monkeypatch)
    parts = protocol.protocol_data(config, dataset, tokenizer, num_examples=32,
                                   teacher_parts=False)
    assert parts.teacher_train is None and parts.teacher_validation is None
    for ours, theirs in zip(parts[2:5], whole[2:5], strict=True):
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
    assert sum(tokenized) == 32 + 40 + 40 < len(dataset)
