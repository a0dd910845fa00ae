"""Tests for the paper experiments (experiments/smat_*.py, jukic_agreement.py,
thesis_evaluations.py): their configs and summaries, and each smoke variant end to end on the
tiny models of conftest.py."""

import dataclasses
import json
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import jukic_agreement  # noqa: E402
import smat_digits  # noqa: E402
import smat_leakage_control  # noqa: E402
import smat_sweep  # noqa: E402
import smat_table1  # noqa: E402
import smat_table1_cells  # noqa: E402
import smat_table2_plausibility  # noqa: E402
import smat_table3_cifar  # noqa: E402
import smat_table7_normalizers  # noqa: E402
import table1_variants  # noqa: E402
import thesis_evaluations  # noqa: E402

from smat import compile_cache  # noqa: E402
from smat.cli import experiment as command_line  # noqa: E402
from smat.jobs import experiment, label_word_task, simulability_report, thesis  # noqa: E402


def _smoke(**grid):
    """Table 1's smoke variant with the grid changed (sizes, seeds, explainers)."""
    return dataclasses.replace(table1_variants.get_config("smoke"), **grid)


def _record(explainer, seed, accuracy, num_examples=125):
    return {"explainer": explainer, "seed": seed, "num_examples": num_examples,
            "test": {"accuracy": accuracy}}


def test_grid_flags_change_only_the_variants_grid(tmp_path):
    parser = command_line.variant_parser("x", name="smat_table1", data_dir_help="d",
                                         variants=table1_variants.VARIANTS, grid=True)
    variant = table1_variants.get_config("sst2", data_dir="sst2")
    args = command_line.parse_variant_args(parser, [
        "--variant", "sst2", "--data-dir", "sst2", "--explainers", "smat", "--sizes", "1000",
        "500", "--seeds", "3"])
    config = command_line.chosen_grid(variant, args)
    assert (config.explainers, config.sizes, config.seeds) == (("smat",), (500, 1000), (3,))
    # the rest is the variant's, and no grid flag keeps the variant whole
    assert dataclasses.replace(config, explainers=variant.explainers, sizes=variant.sizes,
                               seeds=variant.seeds) == variant
    plain = command_line.parse_variant_args(parser, ["--variant", "sst2"])
    assert command_line.chosen_grid(variant, plain) == variant
    with pytest.raises(ValueError, match="explanation_source must be one of"):
        smat_table1.run(variant, variant="sst2", output_dir=tmp_path,
                        explanation_source="reversed")
    assert not (tmp_path / "config.json").exists()


@pytest.mark.parametrize("command, named", [
    (lambda d: smat_table1.main(["--variant", "sst2", "--data-dir", str(d)]),
     "--data-dir {d} lacks dev.tsv, test-labeled.tsv"),
    (lambda d: smat_table7_normalizers.main(["--variant", "paper", "--data-dir", str(d)]),
     "--data-dir {d} lacks test.jsonl.gz"),
    (lambda d: smat_sweep.main(["--table1", str(d), "--size", "64"]),
     "--table1 {d} holds no config.json"),
    (lambda d: smat_table2_plausibility.main(["--table1", str(d), "--data-dir", str(d)]),
     "--table1 {d} holds no config.json"),
    (lambda d: jukic_agreement.main(["--variant", "smoke", "--data-dir", str(d / "none")]),
     "no train.tsv in {d}/none"),
], ids=["table1", "table7", "sweep", "table2", "jukic"])
def test_experiment_commands_name_a_missing_input_in_one_line_before_any_work(
        tmp_path, capsys, monkeypatch, command, named):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n")
    monkeypatch.chdir(tmp_path)  # default output folders (runs/...) land here
    with pytest.raises(SystemExit) as stopped:
        command(tmp_path)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert named.format(d=tmp_path) in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_command_runtime_ends_ctrl_c_with_one_line_saying_what_is_kept(capsys):
    parser = command_line.variant_parser("x", name="x")
    for resumes, kept in ((True, "the same command resumes"), (False, "")):
        with pytest.raises(SystemExit) as stopped, \
                command_line.command_runtime(parser, driver=smat_table1.__file__,
                                             resumes=resumes):
            raise KeyboardInterrupt
        err = capsys.readouterr().err
        assert stopped.value.code == 130 and f"{parser.prog}: interrupted" in err
        assert (kept in err) if kept else "resumes" not in err
    with pytest.raises(RuntimeError):  # a bug keeps its traceback
        with command_line.command_runtime(parser, driver=smat_table1.__file__):
            raise RuntimeError("a bug")


def test_command_runtime_takes_a_drivers_own_checks_as_input_errors(capsys):
    # a ValueError raised in experiments/ is a check (one line); smat's own are too
    parser = command_line.variant_parser("x", name="x")
    with pytest.raises(SystemExit) as stopped, \
            command_line.command_runtime(parser, driver=smat_table1.__file__):
        table1_variants.get_config("tpu")
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "unknown variant 'tpu'" in err
    assert "Traceback" not in err


def test_command_runtime_compiles_into_the_commands_cache_and_puts_jax_back(
        tmp_path, monkeypatch):
    # as for `smat`: SMAT_COMPILE_CACHE chooses the folder, one sub-folder per machine kind
    # (this test is about the driver's scope, so the cache is taken as loadable)
    monkeypatch.setattr(compile_cache, "loads_cleanly", lambda folder: True)
    monkeypatch.setenv("SMAT_COMPILE_CACHE", str(tmp_path / "cache"))
    before = jax.config.jax_compilation_cache_dir
    with command_line.command_runtime(command_line.variant_parser("x", name="x"),
                                      driver=smat_table1.__file__):
        assert jax.config.jax_compilation_cache_dir == str(
            tmp_path / "cache" / compile_cache.machine_key())
    assert jax.config.jax_compilation_cache_dir == before


def test_variants_follow_the_paper_design():
    paper = table1_variants.get_config("paper", data_dir="imdb")
    assert paper.sizes == (500, 1000, 2000) and len(paper.seeds) == 5
    assert paper.explainers == table1_variants.SETTINGS and len(paper.explainers) == 7
    assert paper.data.max_len == 256 and paper.data.source == str(
        Path("imdb") / "test.jsonl.gz")
    assert paper.student.ig_steps == 10 and paper.student.meta_interval == 1
    assert paper.student.inner_learning_rate == 5e-3
    assert paper.student.loop.patience == 10
    # the device lease's headline cell: the paper's students at n=500, one batch shape
    gpu = table1_variants.get_config("gpu", data_dir="imdb")
    assert gpu.data == paper.data and gpu.sizes == (500,)
    assert gpu.explainers == ("none", "attention_all", "smat") and len(gpu.seeds) == 5
    assert gpu.student == dataclasses.replace(paper.student, loop=dataclasses.replace(
        paper.student.loop, length_multiple=256))
    assert gpu.teacher.loop.length_multiple == 256 and gpu.teacher.loop.max_epochs == 1
    cpu = table1_variants.get_config("cpu")
    assert cpu.student.meta_interval == 1 and cpu.student.ig_steps == 10
    assert set(table1_variants.PAPER_TABLE1.cells) == set(table1_variants.SETTINGS)


def test_bad_variants_are_refused():
    with pytest.raises(ValueError, match="--data-dir"):
        table1_variants.get_config("paper")
    with pytest.raises(ValueError, match="--data-dir"):
        table1_variants.get_config("gpu")
    with pytest.raises(ValueError, match="unknown variant 'tpu'"):
        table1_variants.get_config("tpu")


@pytest.mark.parametrize("flags, said", [
    (["--explainers", "taylor"], "--explainers: unknown settings ['taylor']"),
    (["--sizes", "0"], "--sizes must be positive student training sizes, got [0]"),
    (["--seeds", "1", "1"], "--seeds must be distinct non-negative integers, got [1, 1]"),
], ids=["explainers", "sizes", "seeds"])
def test_table1_grid_flags_are_checked_before_any_training(tmp_path, capsys, flags, said):
    with pytest.raises(SystemExit) as stopped:
        smat_table1.main(["--smoke", "--output-dir", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and said in err and "Traceback" not in err
    assert not (tmp_path / "config.json").exists()


def test_table1_teacher_only_stops_before_any_student(tiny_teacher, tmp_path, capsys):
    from smat.models import functional
    from smat.store import model_store

    with pytest.warns(experiment.OtherDataTeacherWarning):  # the tiny teacher's csv
        smat_table1.main(["--smoke", "--teacher", str(tiny_teacher), "--teacher-only",
                          "--output-dir", str(tmp_path)])
    # the fingerprint of the weights themselves, not only the one model.json records
    model = model_store.load(tiny_teacher / "model").model
    weights = model_store.params_fingerprint(functional.split(model)[1])
    assert capsys.readouterr().out.strip().endswith(f"weights {weights}")
    assert not (tmp_path / "students").exists() and not (tmp_path / "results.json").exists()


def test_sweep_changes_each_alter_what_they_name():
    student = table1_variants.get_config("cpu").student
    changed = smat_sweep.changes(student)
    assert set(changed) == set(smat_sweep.AFFECTS)
    assert changed["outer_lr_x10"].outer_learning_rate == pytest.approx(5e-3)
    assert changed["epochs_x2"].loop.max_epochs == 2 * student.loop.max_epochs
    # a change differs from the Table 1 config in exactly one field
    for name, config in changed.items():
        fields = [f for f in dataclasses.fields(config)
                  if getattr(config, f.name) != getattr(student, f.name)]
        assert len(fields) == 1, name


def _sst_like(folder, rows):
    from tests.conftest import NEGATIVE, POSITIVE

    texts = [(t, 1) for t in POSITIVE] + [(t, 0) for t in NEGATIVE]
    picked = np.random.default_rng(0).integers(0, len(texts), size=rows)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{texts[i][0]} \t{texts[i][1]}\n" for i in picked))
    return folder


def test_jukic_variants_follow_the_paper(tmp_path):
    data_dir = _sst_like(tmp_path / "sst", 2000)
    cpu = jukic_agreement.get_config("cpu", data_dir=data_dir)
    assert cpu["teacher"].loop.max_epochs == 5 and cpu["teacher"].training_dynamics
    assert cpu["data"].teacher_fraction == pytest.approx(800 / 2000)
    assert cpu["data"].student_test_size == 150 and cpu["seeds"] == [1, 2, 3, 4, 5]
    # tying's grid reaches below 0.001: MiniLM's embedding-block output is far from its last layer
    assert min(cpu["tying_grid"]) < 0.001
    smoke = jukic_agreement.get_config("smoke", data_dir=data_dir)
    assert smoke["data"].teacher_fraction == pytest.approx(200 / 2000)
    assert len(smoke["seeds"]) == 2
    # the paper's grids (appendix A.2)
    assert jukic_agreement.PAPER["table2"]["pearson"]["tying"] == 0.60
    with pytest.raises(ValueError, match="has 2000 rows; the paper variant needs 61001"):
        jukic_agreement.get_config("paper", data_dir=data_dir)
    with pytest.raises(FileNotFoundError, match="no train.tsv"):
        jukic_agreement.get_config("cpu", data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown variant 'gpu'"):
        jukic_agreement.get_config("gpu", data_dir=data_dir)


@pytest.mark.slow
def test_jukic_smoke_variant_writes_every_table(tiny_checkpoint, tmp_path):
    data_dir = _sst_like(tmp_path / "sst", 400)
    summary = jukic_agreement.run("smoke", data_dir=str(data_dir), output_dir=tmp_path / "j",
                                  model_source=str(tiny_checkpoint), progress=False)
    assert set(summary["weights"]) == {"conicity", "tying", "base_validation_f1"}
    assert set(summary["comparison"]["variants"]) <= {"base", "conicity", "tying"}
    assert summary["comparison"]["num_rows"] == 40
    assert summary["pairwise_base"]["num_models"] == 2
    assert len(summary["pairwise_base"]["metrics"]["pearson"]["names"]) == 8
    groups = set(summary["by_group"]["groups"]) - {"all"}
    assert groups <= {"easy", "ambiguous", "hard"}
    text = (tmp_path / "j" / "table.md").read_text()
    assert "Table 2 layout" in text and "Table 4 layout" in text
    assert json.loads((tmp_path / "j" / "results.json").read_text())["test_f1"].keys() == (
        summary["test_f1"].keys())


def test_command_line_variants_and_default_folders():
    parser = command_line.variant_parser("Table 1", name="smat_table1", data_dir_help="data")
    args = command_line.parse_variant_args(parser, ["--smoke"])
    assert (args.variant, args.output_dir) == ("smoke", "runs/smat_table1_smoke")
    args = command_line.parse_variant_args(parser, ["--variant", "paper", "--data-dir", "d",
                                                    "--output-dir", "out"])
    assert (args.variant, args.data_dir, args.output_dir) == ("paper", "d", "out")
    with pytest.raises(SystemExit):
        command_line.parse_variant_args(parser, ["--variant", "gpu"])
    with pytest.raises(SystemExit):  # it reuses no teacher: --teacher would be ignored
        command_line.parse_variant_args(parser, ["--teacher", "t"])
    assert command_line.parse_variant_args(parser, []).variant == "cpu"
    gpu_only = command_line.variant_parser("Table 3", name="t3", variants=("paper", "smoke"))
    args = command_line.parse_variant_args(gpu_only, [])  # not "cpu", which it lacks
    assert (args.variant, args.output_dir) == ("paper", "runs/t3_paper")


def test_a_reused_teacher_of_other_data_is_said(tiny_teacher, tmp_path):
    """--teacher reuses a teacher as it is; a table under a variant's name that is of other
    data warns, naming each difference (a copy of the same files is the same data)."""
    import shutil
    import warnings

    from smat.store.run_record import saved_data_config

    data = saved_data_config(tiny_teacher)
    copy = tmp_path / "copy.csv"
    shutil.copy(data.source, copy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        experiment.check_reused_teacher(tiny_teacher, data, variant="smoke")
        experiment.check_reused_teacher(
            tiny_teacher, dataclasses.replace(data, source=str(copy)), variant="smoke")
    copy.write_text(copy.read_text() + copy.read_text().splitlines()[-1] + "\n")
    with pytest.warns(experiment.OtherDataTeacherWarning,
                      match=f"source: '{data.source}', the variant's '{copy}'"):
        experiment.check_reused_teacher(
            tiny_teacher, dataclasses.replace(data, source=str(copy)), variant="smoke")
    with pytest.warns(experiment.OtherDataTeacherWarning,
                      match=r"other data than the cpu variant reads \(max_len: 16, the "
                      r"variant's 64\): its students and table are of the teacher's data"):
        experiment.check_reused_teacher(tiny_teacher, dataclasses.replace(data, max_len=64),
                                          variant="cpu")


@pytest.mark.parametrize("argv", [
    ["--smoke", "--teacher", "t"], ["--smoke", "--data-dir", "d"],
    ["--smoke", "--vit-dir", "v", "--teacher", "t"],
], ids=["digits-teacher", "digits-data", "cifar-teacher"])
def test_drivers_refuse_flags_they_would_ignore(argv, capsys):
    # the digits are scikit-learn's offline set, taught by their own teacher; CIFAR trains
    # its own teacher too: these flags would silently change nothing
    main = smat_table3_cifar.main if "--vit-dir" in argv else smat_digits.main
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert f"unrecognized arguments: {' '.join(argv[-2:])}" in capsys.readouterr().err


def test_median_record_takes_the_middle_seed():
    records = [_record("smat", 0, 0.7), _record("smat", 1, 0.9), _record("smat", 2, 0.8),
               _record("smat", 3, 0.5, num_examples=250), _record("none", 4, 0.8)]
    median = simulability_report.median_record(records, explainer="smat", num_examples=125)
    assert median["seed"] == 2
    # an even count takes the lower middle
    assert simulability_report.median_record(records[:2], explainer="smat",
                                     num_examples=125)["seed"] == 0
    with pytest.raises(ValueError, match="no 'smat' students at n=500"):
        simulability_report.median_record(records, explainer="smat", num_examples=500)


def test_figure5_draws_the_median_smat_student_at_the_middle_size_by_its_metric(tmp_path):
    def smat(seed, accuracy, pearson, num_examples=125):
        weights = [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]] if seed == 1 else [[0.25] * 3, [0.25] * 3]
        return {**_record("smat", seed, accuracy, num_examples),
                "test": {"accuracy": accuracy, "pearson": pearson}, "head_weights": weights}
    records = [smat(0, 0.7, 0.2), smat(1, 0.8, 0.9), smat(2, 0.9, 0.5),
               smat(3, 0.8, 0.5, num_examples=60), smat(4, 0.8, 0.5, num_examples=250),
               _record("none", 5, 0.8)]
    by_accuracy = simulability_report.plot_figure5(records, tmp_path / "a.png")
    assert by_accuracy == {"figure5_seed": 1, "figure5_nonzero_heads": 2,
                           "figure5_max_weight": 0.5}
    by_pearson = simulability_report.plot_figure5(records, tmp_path / "p.png", task="MLQE-PE",
                                          metric="pearson")
    assert by_pearson["figure5_seed"] == 2 and by_pearson["figure5_nonzero_heads"] == 6
    assert (tmp_path / "a.png").stat().st_size > 0 and (tmp_path / "p.png").stat().st_size > 0
    # without SMaT students there is nothing to draw
    assert simulability_report.plot_figure5(records[-1:], tmp_path / "none.png") == {}
    assert not (tmp_path / "none.png").exists()


def test_a_one_setting_call_reports_no_comparison_rather_than_an_empty_table():
    # the SST-2 queue trains one setting of one seed per call: its table.md must not show
    # table headers without rows, and a call with a pair must still get its table
    alone = [_record("none", 0, 0.868)]
    assert simulability_report.paired_comparisons(alone) == []
    assert simulability_report.comparisons_table([]).startswith("No compared pair of settings")
    assert simulability_report.diagnostics_table([]) == "No SMaT students in these records."
    pair = simulability_report.paired_comparisons(alone + [_record("attention_all", 0, 0.878)])
    table = simulability_report.comparisons_table(pair)
    assert table.splitlines()[2].startswith("| attention_all vs none | 125 | 1 | +1.00 | 1/1")


def test_normalizer_table_marks_cells_above_the_baseline():
    baseline = [_record("none", s, a) for s, a in enumerate((0.60, 0.61, 0.62))]
    records = {normalizer: [_record(setting, s, a + (0.2 if normalizer == "sparsemax" else 0))
                            for setting in smat_table7_normalizers.SETTINGS
                            for s, a in enumerate((0.60, 0.61, 0.62))]
               for normalizer in smat_table7_normalizers.NORMALIZERS}
    table = smat_table7_normalizers.normalizer_table(records, baseline)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert rows["none"].count("61.00 [60.50:61.50]") == 4
    for setting in smat_table7_normalizers.SETTINGS:
        cells = rows[setting].split(" | ")[1:]
        assert cells[0].startswith("81.00") and cells[0].endswith("*")
        assert all("*" not in cell for cell in cells[1:])


@pytest.mark.slow
def test_smoke_variants_write_tables_json_and_plots(tiny_teacher, eraser_dir, tmp_path):
    with pytest.warns(experiment.OtherDataTeacherWarning):  # the tiny teacher's csv
        table1 = smat_table1.run(_smoke(), variant="smoke", output_dir=tmp_path / "t1",
                                 teacher_dir=tiny_teacher, progress=False)
    assert len(table1["records"]) == 7 * 2 * 2
    text = (tmp_path / "t1" / "table.md").read_text()
    for setting in table1_variants.SETTINGS:
        assert f"| {setting} |" in text
    for name in ("simulability.png", "head_weights.png", "results.json", "config.json"):
        assert (tmp_path / "t1" / name).stat().st_size > 0
    diagnostics = table1["smat_diagnostics"]
    assert [(d["num_examples"], d["seed"]) for d in diagnostics] == [(32, 0), (32, 1),
                                                                    (64, 0), (64, 1)]
    assert all(d["outer_grad_norm_max"] > 0 and d["kl_first"] > 0 for d in diagnostics)
    assert "L1 from uniform" in text
    smat_records = [r for r in table1["records"] if r["explainer"] == "smat"]
    assert all(np.isclose(np.sum(r["head_weights"]), 1.0, atol=1e-5) for r in smat_records)
    # rerunning reuses every finished student
    stamp = (tmp_path / "t1" / "students" / "n32" / "smat" / "seed0" / "result.json"
             ).stat().st_mtime_ns
    with pytest.warns(experiment.OtherDataTeacherWarning):
        smat_table1.run(_smoke(), variant="smoke", output_dir=tmp_path / "t1",
                        teacher_dir=tiny_teacher, progress=False)
    assert (tmp_path / "t1" / "students" / "n32" / "smat" / "seed0" / "result.json"
            ).stat().st_mtime_ns == stamp

    table7 = smat_table7_normalizers.run("smoke", output_dir=tmp_path / "t7",
                                         table1_dir=tmp_path / "t1", progress=False)
    assert set(table7["records"]) == set(smat_table7_normalizers.NORMALIZERS)
    # the sparsemax and no-explainer students are Table 1's, not retrained
    assert (tmp_path / "t1" / "students" / "n32" / "smat" / "seed0" / "result.json"
            ).stat().st_mtime_ns == stamp
    assert table7["records"]["sparsemax"] == [
        r for r in table1["records"] if r["num_examples"] == 32
        and r["explainer"] in smat_table7_normalizers.SETTINGS]
    assert not (tmp_path / "t7" / "students" / "sparsemax").exists()
    assert (tmp_path / "t7" / "normalizers.png").stat().st_size > 0
    assert "| smat |" in (tmp_path / "t7" / "table.md").read_text()

    sweep = smat_sweep.run(tmp_path / "t1", size=32, output_dir=tmp_path / "sweep",
                           names=["beta_1"], explainers=["none", "attention_all", "smat"],
                           progress=False)
    # beta alters the explained students only: "none" keeps Table 1's students as control
    assert sweep["trained"]["beta_1"] == ["attention_all", "smat"]
    assert not (tmp_path / "sweep" / "beta_1" / "n32" / "none").exists()
    assert sweep["cells"]["beta_1"]["none"] == sweep["cells"]["table1"]["none"]
    assert sweep["cells"]["beta_1"]["smat"] != sweep["cells"]["table1"]["smat"]
    assert all(len(cell) == 2 for change in sweep["cells"].values() for cell in change.values())
    assert sweep["changes"]["beta_1"]["beta"] == 1.0
    paired = {(row["candidate"], row["baseline"]): row
              for row in sweep["paired_over_seeds"]["beta_1"]}
    assert paired["smat", "attention_all"]["num_models"] == 2
    (row,) = [line for line in (tmp_path / "sweep" / "table.md").read_text().splitlines()
              if line.startswith("| beta_1 |")]
    none, static, smat = row.split(" | ")[1:4]
    assert none.endswith(" =") and not static.endswith("=") and not smat.endswith("=")
    # a change that alters none of the settings asked for trains nothing
    untouched = smat_sweep.run(tmp_path / "t1", size=32, output_dir=tmp_path / "sweep_none",
                               names=["beta_1"], explainers=["none"], progress=False)
    assert untouched["trained"]["beta_1"] == []
    assert untouched["cells"]["beta_1"] == untouched["cells"]["table1"]
    with pytest.raises(ValueError, match=r"unknown changes \['lr'\]"):
        smat_sweep.run(tmp_path / "t1", size=32, output_dir=tmp_path / "sweep", names=["lr"])
    # --share: the second change is share 1's; share 0 reuses the finished first one, joins
    # share 1's students (never retrained) and writes the comparison
    shared = dict(size=32, output_dir=tmp_path / "sweep", names=["beta_1", "meta_interval_2"],
                  explainers=["none", "attention_all", "smat"], progress=False)
    assert smat_sweep.run(tmp_path / "t1", share=(1, 2), **shared) == {
        "share": "1/2", "changes": ["meta_interval_2"]}
    assert not (tmp_path / "sweep" / "beta_1" / "table.md").exists()
    made = (tmp_path / "sweep" / "meta_interval_2" / "n32" / "smat" / "seed0" / "result.json"
            ).stat().st_mtime_ns
    joined = smat_sweep.run(tmp_path / "t1", share=(0, 2), join_timeout=1, **shared)
    assert joined["trained"] == {"table1": sorted(smat_sweep.COMPARED),
                                 "beta_1": ["attention_all", "smat"],
                                 "meta_interval_2": ["smat"]}
    assert joined["cells"]["beta_1"] == sweep["cells"]["beta_1"]
    assert (tmp_path / "sweep" / "meta_interval_2" / "n32" / "smat" / "seed0" / "result.json"
            ).stat().st_mtime_ns == made

    table2 = smat_table2_plausibility.run(tmp_path / "t1", eraser_dir,
                                          output_dir=tmp_path / "t2", max_len=32)
    assert set(table2["auc"]) == set(smat_table2_plausibility.PAPER_TABLE2)
    assert table2["auc"]["best head*"] == max(max(row) for row in table2["oracle"]["head_auc"])
    saved = json.loads((tmp_path / "t2" / "results.json").read_text())
    assert saved["auc"] == table2["auc"]
    assert (tmp_path / "t2" / "head_auc.png").stat().st_size > 0


def _sst_glue_like(folder, train_rows, dev_rows):
    """An SST-2-like folder with train.tsv and dev.tsv (conftest's phrases)."""
    _sst_like(folder / "dev", dev_rows)
    _sst_like(folder, train_rows)
    (folder / "dev" / "train.tsv").rename(folder / "dev.tsv")
    return folder


def test_thesis_variants_follow_the_thesis(tmp_path):
    from smat import registry
    from smat.jobs.roar import PRESETS

    data_dir = _sst_glue_like(tmp_path / "sst", 40, 10)
    paper = thesis_evaluations.get_config("paper", data_dir=data_dir)
    # the thesis's 500 / 50 / 16 examples and its attack and fine-tuning settings (§3.5, §3.6.3)
    evaluation = paper.evaluation
    assert (evaluation.eval_rows, evaluation.sanity_rows, evaluation.attack_rows) == (500, 50,
                                                                                     16)
    assert evaluation.attack_steps == 500 and evaluation.sanity_modes == ("cascading",
                                                                          "independent")
    recipe, pooling = paper.teachers["minilm"]
    assert (recipe.learning_rate, recipe.loop.batch_size, recipe.loop.max_epochs,
            recipe.loop.patience, pooling) == (5e-5, 16, 10, 5, "scalar_mix")
    assert recipe.warmup_steps == round(0.06 * (54_000 // 16) * 10)  # 6% of the steps
    cpu = thesis_evaluations.get_config("cpu", data_dir=data_dir)
    assert cpu.teachers["small"] == (PRESETS["small"].train, "mean")
    assert cpu.small_layers == PRESETS["small"].model.num_layers == 2
    assert cpu.evaluation.sanity_modes == ("cascading",)
    # results.json's config: every number of the variant under its own name
    assert cpu.sizes()["train_rows"] == 2_000 and cpu.sizes()["eval_rows"] == 50
    assert len(cpu.sizes()) == 15
    assert len(thesis.METHODS) == 7
    assert set(thesis.EXPLAINERS) <= set(registry.STATIC)
    assert set(thesis.SANITY_METHODS) | {"lime", "kernel_shap"} == set(thesis.METHODS.values())
    for name in thesis.ENSEMBLES.values():
        registry.spec(name)  # every ensemble is a registry name
    with pytest.raises(ValueError, match="unknown variant 'gpu'"):
        thesis_evaluations.get_config("gpu", data_dir=data_dir)
    (data_dir / "dev.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        thesis_evaluations.get_config("cpu", data_dir=data_dir)


@pytest.mark.slow
def test_thesis_smoke_variant_writes_every_table(tiny_checkpoint, tmp_path):
    from smat import registry
    from smat.store.model_store import load

    data_dir = _sst_glue_like(tmp_path / "sst", 400, 40)
    out = tmp_path / "thesis"
    summary = thesis_evaluations.run("smoke", data_dir=data_dir, output_dir=out,
                                     model_source=tiny_checkpoint,
                                     results_dir=tmp_path / "published", progress=False)
    evaluated = (*thesis.EXPLAINERS, *thesis.ENSEMBLES.values())
    assert {name: r["layers"] for name, r in summary["models"].items()} == {"minilm": 2,
                                                                          "small": 1}
    for result in summary["models"].values():
        ground_truth = result["ground_truth"]["explainers"]
        assert set(ground_truth) == set(result["faithfulness"]["explainers"]) == set(evaluated)
        assert all(r["num_valid"] == 12 for r in ground_truth.values())
        assert set(result["sanity"]) == {"cascading", "independent"}
        for report in result["sanity"].values():
            assert set(report["explainers"]) == set(thesis.SANITY_METHODS)
            assert report["steps"][0] == "original" and len(report["steps"]) == (
                result["layers"] + 1)
            for curves in report["explainers"].values():
                assert curves["spearman"][0]["mean"] == pytest.approx(1.0)
        assert set(result["attacks"]) == {"2", "0.5"}  # the thesis's epsilon and a smaller one
        for epsilon, reports in result["attacks"].items():
            for objective in thesis.OBJECTIVES:
                report = reports[objective]
                assert report["objective"] == objective and report["num_examples"] == 4
                assert report["epsilon"] == float(epsilon)
                assert set(report["explainers"]) == set(thesis.ATTACKED)
        assert len(result["verdicts"]) == 10 and all(
            isinstance(v["holds"], bool) for v in result["verdicts"])
    text = (out / "table.md").read_text()
    assert "(d) constrained attack, epsilon 0.5" in text and "independent randomization" in text
    assert text.count("Verdicts:") == 2
    published = tmp_path / "published"
    assert json.loads((published / "thesis_smoke.json").read_text())["models"].keys() == {
        "minilm", "small"}
    assert (published / "thesis_smoke_cascading_small.png").stat().st_size > 0

    # the ground truth is the label word's one token; the ensembles computed from the stored
    # members equal the registry's ensemble names explaining the model
    trained = load(out / "small" / "model")
    config = thesis_evaluations.get_config("smoke", data_dir=data_dir)
    task = label_word_task.augmented_data(
        config.files, trained.tokenizer, tmp_path / "d", train_rows=config.train_rows,
        held_out_rows=config.held_out_rows, eval_rows=config.evaluation.eval_rows,
        max_len=config.evaluation.max_len).eval
    data, gold, show = label_word_task.encode_task(trained, task, max_len=32)
    assert (gold.sum(1) == 1).all() and not (gold & ~show).any()
    assert trained.tokenizer.convert_ids_to_tokens(data.input_ids[gold].tolist()) == [
        label_word_task.LABEL_WORDS[y] for y in task.labels]
    members = [thesis.explain_rows(trained, data, m, ig_steps=4, batch_size=8)
               for m in thesis.TOP3]
    for prefix, normalization in registry.ENSEMBLES.items():
        name = f"{prefix}:" + "+".join(thesis.TOP3)
        direct = thesis.explain_rows(trained, data, name, ig_steps=4, batch_size=8)
        np.testing.assert_allclose(direct, registry.ensemble_scores(
            members, data.attention_mask, normalization=normalization), rtol=1e-5, atol=1e-6)

    # a rerun reads every finished stage back
    stages = sorted((out / "small" / "evaluation").glob("*.json"))
    stamps = [p.stat().st_mtime_ns for p in stages]
    again = thesis_evaluations.run("smoke", data_dir=data_dir, output_dir=out,
                                   model_source=tiny_checkpoint, progress=False)
    assert [p.stat().st_mtime_ns for p in stages] == stamps
    assert again["models"]["small"]["ground_truth"] == summary["models"]["small"][
        "ground_truth"]


def test_digits_variants():
    assert smat_digits.get_config("cpu", output_dir="d").experiment.sizes == (60, 120, 240)
    reference = smat_digits.get_config("reference", output_dir="d").experiment
    assert reference.sizes == (60, 120, 240) and reference.seeds == (0, 1, 2, 3, 4)
    assert reference.student.inner_learning_rate == 5e-3
    assert (reference.student.loop.patience, reference.student.loop.max_epochs) == (10, 3000)
    with pytest.raises(ValueError, match="unknown variant"):
        smat_digits.get_config("paper", output_dir="d")


def test_digits_smoke_variant_trains_pretext_teacher_and_students(tmp_path):
    summary = smat_digits.run("smoke", output_dir=tmp_path, progress=False)
    with np.load(tmp_path / "data" / "rotations.npz") as rotations, \
            np.load(tmp_path / "data" / "digits.npz") as digits:
        assert digits["images"].shape == (300, 8, 8) and digits["labels"].max() == 9
        # the pretext's images are the digits turned by 0 / 90 / 180 / 270 degrees
        np.testing.assert_array_equal(rotations["images"][300:600],
                                      np.rot90(digits["images"], 1, axes=(1, 2)))
        assert rotations["labels"].tolist() == [0] * 300 + [1] * 300 + [2] * 300 + [3] * 300
    assert {r["explainer"] for r in summary["records"]} == {"none", "attention_all", "smat"}
    assert len(summary["records"]) == 3 * 2 and "pretext_test" in summary
    # the teacher and the students start from the pretext run's encoder, not a random one
    recorded = json.loads((tmp_path / "teacher" / "config.json").read_text())
    assert recorded["model_source"] == str(tmp_path / "pretext" / "model")
    assert "from_scratch" not in recorded
    assert (tmp_path / "table.md").is_file() and (tmp_path / "head_weights.png").is_file()
    # share 1 of 2 on the finished run: its students (reused); the data and the pretext
    # model are share 0's, not written again
    written = {path: path.stat().st_mtime_ns for path in (tmp_path / "data").iterdir()}
    share = smat_digits.run("smoke", output_dir=tmp_path, progress=False, share=(1, 2))
    assert share["share"] == "1/2" and 0 < len(share["records"]) < 3 * 2
    assert {path: path.stat().st_mtime_ns for path in (tmp_path / "data").iterdir()} == written


def test_cifar_table3_design_and_its_data_folders(tmp_path):
    vit = tmp_path / "vit"
    vit.mkdir()
    (vit / "config.json").write_text("{}")
    for name in ("train", "test"):
        (tmp_path / f"{name}.npz").write_bytes(b"")
    paper = smat_table3_cifar.get_config("paper", data_dir=tmp_path, vit_dir=vit)
    assert paper.sizes == (2250, 4500, 9000) and len(paper.seeds) == 5
    assert paper.student.student_pool == "teacher_train"
    assert set(smat_table3_cifar.PAPER_TABLE3.cells) == set(paper.explainers)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        smat_table3_cifar.get_config("paper", data_dir=tmp_path, vit_dir=tmp_path)
    (tmp_path / "test.npz").unlink()
    with pytest.raises(FileNotFoundError, match="no test.npz or test/"):
        smat_table3_cifar.split_files(tmp_path)


def test_cifar_smoke_variant_runs_on_local_files(tmp_path):
    rng = np.random.default_rng(0)
    for name, rows in (("train", 48), ("test", 32)):
        np.savez(tmp_path / f"{name}.npz", labels=rng.integers(0, 3, rows),
                 images=rng.integers(0, 256, (rows, 16, 16, 3), dtype=np.uint8),
                 label_names=np.array(["a", "b", "c"]))
    vit = tmp_path / "vit"
    vit.mkdir()
    (vit / "config.json").write_text(json.dumps({
        "model_type": "vit", "image_size": 16, "patch_size": 4, "hidden_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37}))
    summary = smat_table3_cifar.run("smoke", data_dir=tmp_path, vit_dir=vit,
                                    output_dir=tmp_path / "out", progress=False)
    teacher = json.loads((tmp_path / "out" / "teacher" / "result.json").read_text())
    # the teacher trains on the train split (90 / 10), the students are tested on test's
    assert teacher["sizes"] == {"teacher_train": 43, "teacher_validation": 5, "test": 16}
    assert len(summary["records"]) == 3 * 2
    assert "Paper (CIFAR-100, ViT-base/16):" in (tmp_path / "out" / "table.md").read_text()
    share = smat_table3_cifar.run("smoke", data_dir=tmp_path, vit_dir=vit,
                                  output_dir=tmp_path / "out", progress=False, share=(1, 2))
    assert share["share"] == "1/2" and 0 < len(share["records"]) < 3 * 2


def test_an_earlier_runs_unreadable_file_is_named_with_its_flag(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"variant": "cpu", ')  # cut off mid-write
    with pytest.raises(SystemExit) as stopped:
        smat_sweep.main(["--table1", str(tmp_path), "--size", "64"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert f"{tmp_path / 'config.json'} is not valid JSON: " in err


def test_leakage_control_pairs_the_control_with_its_cells_students(tmp_path, capsys):
    results = Path(__file__).resolve().parents[1] / "docs" / "results" / "smat_table1_sst2"
    cells = [results / f"n500_{name}.json" for name in ("none", "attention_all", "smat")]
    smat_run = json.loads(cells[2].read_text())
    # a control whose every student is 2 points below its SMaT twin of the same seed
    control = {**smat_run, "explanation_source": "shuffled_text", "records": [
        {**r, "test": {**r["test"], "accuracy": r["test"]["accuracy"] - 0.02}}
        for r in smat_run["records"]]}
    (tmp_path / "control.json").write_text(json.dumps(control))
    smat_leakage_control.main(["--control", str(tmp_path / "control.json"), "--cells",
                               *map(str, cells), "--output-dir", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = {(r["candidate"], r["baseline"]): r for r in summary["paired_over_seeds"]}
    assert rows["smat", "smat_shuffled_text"]["wins"] == 5
    assert rows["smat", "smat_shuffled_text"]["median_difference"] == pytest.approx(0.02)
    assert rows["smat", "smat_shuffled_text"]["p_value"] == pytest.approx(1 / 32)
    # the committed cells' own comparison comes out as Table 1's did
    none = {r["seed"]: r["test"]["accuracy"] for r in json.loads(cells[0].read_text())["records"]}
    ours = {r["seed"]: r["test"]["accuracy"] for r in smat_run["records"]}
    assert rows["smat", "none"]["wins"] == sum(ours[s] > none[s] for s in ours)
    assert "| smat_shuffled_text |" in (tmp_path / "out" / "table.md").read_text()
    capsys.readouterr()
    # a control from another teacher, or a run that is not a control, is refused
    for changed, said in (({"teacher_test": {"accuracy": 0.5}}, "different teachers"),
                          ({"explanation_source": "text"}, "--explanation-source")):
        (tmp_path / "bad.json").write_text(json.dumps({**control, **changed}))
        with pytest.raises(SystemExit) as stopped:
            smat_leakage_control.main(["--control", str(tmp_path / "bad.json"), "--cells",
                                       *map(str, cells), "--output-dir", str(tmp_path / "x")])
        assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_cells_trained_in_separate_calls_are_paired_by_seed_from_one_teacher(tmp_path, capsys):
    """The committed n=500 SST-2 cells (one call each) joined: the paired tests come out as
    the leakage control's comparison of the same cells did; a cell whose students name
    other teacher weights is refused, naming each file's."""
    results = Path(__file__).resolve().parents[1] / "docs" / "results" / "smat_table1_sst2"
    cells = [results / f"n500_{name}.json" for name in ("none", "attention_all", "smat")]
    smat_table1_cells.main(["--cells", *map(str, cells), "--output-dir", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = {(r["candidate"], r["baseline"]): r for r in summary["paired_over_seeds"]}
    assert set(rows) == {("smat", "attention_all"), ("smat", "none"), ("attention_all", "none")}
    control = json.loads((results / "control_n500_comparison.json").read_text())
    for row in control["paired_over_seeds"]:
        if (row["candidate"], row["baseline"]) in rows:
            assert rows[row["candidate"], row["baseline"]] == row
    smat, none = (json.loads(cells[i].read_text())["records"] for i in (2, 0))
    diffs = sorted(a["test"]["accuracy"] - b["test"]["accuracy"] for a, b in zip(
        sorted(smat, key=lambda r: r["seed"]), sorted(none, key=lambda r: r["seed"]),
        strict=True))
    assert rows["smat", "none"]["median_difference"] == pytest.approx(diffs[2])
    text = (tmp_path / "out" / "table.md").read_text()
    assert "| attention_all vs none | 500 | 5 |" in text
    # Figure 5 is the median SMaT student's coefficients; the time table sums the students'
    by_accuracy = sorted(smat, key=lambda r: (r["test"]["accuracy"], r["seed"]))
    assert summary["figure5_seed"] == by_accuracy[2]["seed"]
    assert summary["figure5_nonzero_heads"] == sum(
        w > 0 for row in by_accuracy[2]["head_weights"] for w in row)
    assert (tmp_path / "out" / "head_weights.png").stat().st_size > 0
    hours = sum(r["train_seconds"] for r in summary["records"]) / 3600
    assert f"{hours:.1f} h for all 15" in text
    assert ("Seeds at n=500: attention_all 0, 1, 2, 3, 4; none 0, 1, 2, 3, 4; "
            "smat 0, 1, 2, 3, 4.") in text
    # a setting still being trained joins with its seeds named, and is paired with nothing
    partial = json.loads(cells[0].read_text())
    partial["records"] = [{**record, "explainer": "gradient"} for record in partial["records"]
                          if record["seed"] in (0, 3)]
    (tmp_path / "gradient.json").write_text(json.dumps(partial))
    smat_table1_cells.main(["--cells", *map(str, cells), str(tmp_path / "gradient.json"),
                            "--output-dir", str(tmp_path / "partial")])
    joined = json.loads((tmp_path / "partial" / "results.json").read_text())
    assert joined["paired_over_seeds"] == summary["paired_over_seeds"]
    assert "; gradient 0, 3; none" in (tmp_path / "partial" / "table.md").read_text()
    capsys.readouterr()
    # the same teacher score, other weights in the students' records
    def cell(name, index, weights):
        run = json.loads(cells[index].read_text())
        run["records"] = [{**record, "teacher_params": weights} for record in run["records"]]
        (tmp_path / name).write_text(json.dumps(run))
        return str(tmp_path / name)

    ours, theirs = cell("a.json", 0, "aaaa"), cell("b.json", 1, "bbbb")
    # records written before the weights were kept (the committed smat cell) name none
    smat_table1_cells.main(["--cells", ours, str(cells[2]), "--output-dir", str(tmp_path / "y")])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        smat_table1_cells.main(["--cells", ours, theirs, "--output-dir", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "different teachers" in err and "Traceback" not in err
    assert f"{ours}: test accuracy 0.895, weights aaaa" in err and "weights bbbb" in err
    # a cell in two files would count its students twice
    copy = tmp_path / "copy.json"
    copy.write_text(cells[2].read_text())
    with pytest.raises(SystemExit) as stopped:
        smat_table1_cells.main(["--cells", str(cells[2]), ours, str(copy),
                                "--output-dir", str(tmp_path / "x")])
    assert stopped.value.code == 2
    assert f"the smat student of n=500, seed 0 is in {cells[2]} and in {copy}" in (
        capsys.readouterr().err)


def test_ablation_arms_train_from_the_smat_students_of_the_same_teacher(tiny_teacher,
                                                                        tmp_path):
    """smat_frozen learns from SMaT's final coefficients frozen, random_heads from the same
    coefficients on other heads, layerK from one layer's heads; smat_pool_outer is SMaT."""
    def run(explainers, **options):
        return smat_table1.run(_smoke(sizes=(32,), seeds=(0, 1), explainers=explainers),
                               variant="smoke", teacher_dir=tiny_teacher, progress=False,
                               **options)

    with pytest.warns(experiment.OtherDataTeacherWarning):
        smat = run(("smat",), output_dir=tmp_path / "smat")
    with pytest.raises(ValueError, match="hold no SMaT student of seed 0 at n=32"), \
            pytest.warns(experiment.OtherDataTeacherWarning):
        run(("smat_frozen",), output_dir=tmp_path / "arms")
    cells = [tmp_path / "smat" / "results.json"]
    with pytest.warns(experiment.OtherDataTeacherWarning):
        arms = run(("smat_frozen", "random_heads", "layer1", "smat_pool_outer"),
                   output_dir=tmp_path / "arms", smat_cells=cells)
    by_arm = {(r["explainer"], r["seed"]): r for r in arms["records"]}
    assert {r["setting"] for r in arms["records"]} == {"attention_heads", "smat"}

    def given(arm, seed):
        folder = tmp_path / "arms" / "students" / "n32" / arm / f"seed{seed}"
        return np.asarray(json.loads((folder / "config.json").read_text())
                          ["student"]["head_weights"])

    for record in smat["records"]:
        learned = np.asarray(record["head_weights"]).ravel()
        frozen, shuffled = given("smat_frozen", record["seed"]), given("random_heads",
                                                                       record["seed"])
        np.testing.assert_allclose(frozen, learned / learned.sum(), rtol=1e-6)
        np.testing.assert_allclose(np.sort(shuffled), np.sort(frozen), rtol=1e-6)
        assert not np.array_equal(shuffled, frozen)
    layer = given("layer1", 0).reshape(2, -1)
    assert np.all(layer[0] == 0) and np.allclose(layer[1], 1 / layer.shape[1])
    assert "| smat_pool_outer |" in (tmp_path / "arms" / "table.md").read_text()
    assert [d["explainer"] for d in arms["smat_diagnostics"]] == ["smat_pool_outer"] * 2
    assert by_arm["smat_pool_outer", 0]["head_weights"]


@pytest.mark.parametrize("path, metric", [
    ("smat_table1_cpu.json", "accuracy"), ("smat_digits_cpu/results.json", "accuracy"),
    ("smat_digits_cpu/epochs60_results.json", "accuracy"),
    ("smat_table5_mlqe_cpu/results.json", "pearson"),
])
def test_committed_simulability_results_regenerate_with_the_driver(path, metric):
    """Every committed result of a simulability experiment, written before the experiments
    ran over one driver, reads back: its table, its paired tests over seeds and its
    Figure 5 student come out of the driver's report code unchanged."""
    from smat.evaluation.simulability import simulability_table
    from smat.jobs.experiment import metric_scale

    results = json.loads((Path(__file__).resolve().parents[1] / "docs" / "results" / path)
                         .read_text())
    records = results["records"]
    scale, digits = metric_scale(metric)
    assert simulability_table(records, metric=metric, scale=scale, digits=digits) == (
        results["table"])
    if "paired_over_seeds" in results:
        assert simulability_report.paired_comparisons(records, metric=metric) == (
            results["paired_over_seeds"])
    seed = next(results[key] for key in ("figure5_seed", "figure_seed", "median_smat_seed")
                if key in results)
    sizes = sorted({r["num_examples"] for r in records if r["explainer"] == "smat"})
    assert simulability_report.median_record(
        records, explainer="smat", num_examples=sizes[len(sizes) // 2],
        metric=metric)["seed"] == seed


def test_committed_table7_regenerates():
    results = json.loads((Path(__file__).resolve().parents[1] / "docs" / "results" /
                          "smat_table7_cpu.json").read_text())
    assert smat_table7_normalizers.normalizer_table(results["records"], results["baseline"]) == (
        results["table"])


def test_without_data_dir_a_driver_reads_the_hub_or_says_how_to_give_data(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SMAT_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SMAT_HUB_MIRROR", str(tmp_path / "mirror"))  # empty: no Hub
    with pytest.raises(SystemExit) as stopped:
        smat_table1.main(["--variant", "sst2", "--teacher-only",
                          "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert ("no --data-dir and sst2_glue could not be read from the Hugging Face Hub" in err
            and "pass --data-dir" in err and "SMAT_HUB_MIRROR" in err)
    assert not (tmp_path / "out").exists()
    # a variant that reads no data folder never asks the Hub; a given folder is used as it is
    assert command_line.data_dir_or_hub(None, table1_variants.HUB_DATA.get("cpu")) is None
    assert command_line.data_dir_or_hub("mine", "sst2_glue") == "mine"


def test_shares_split_the_grid_and_share_zero_writes_the_report(tiny_teacher, tmp_path,
                                                                capsys):
    """--share I/N: each share trains every N-th cell; share 0 joins them and reports; a share
    other than 0 waits for the teacher share 0 trains, and names it when it does not come."""
    config = _smoke(sizes=(32,), seeds=(0,), explainers=("none", "attention_all"))

    def run(share):
        with pytest.warns(experiment.OtherDataTeacherWarning):
            return smat_table1.run(config, variant="smoke", teacher_dir=tiny_teacher,
                                   output_dir=tmp_path / "shared", progress=False,
                                   share=share, join_timeout=60)

    second = run((1, 2))
    assert second["share"] == "1/2"
    assert [r["explainer"] for r in second["records"]] == ["attention_all"]
    assert not (tmp_path / "shared" / "results.json").exists()
    joined = run((0, 2))
    assert [r["explainer"] for r in joined["records"]] == ["none", "attention_all"]
    assert joined["records"][1]["test"] == second["records"][0]["test"]  # reused, not retrained
    assert "| attention_all |" in (tmp_path / "shared" / "table.md").read_text()
    # without a finished teacher, share 1 waits for share 0's and says so in one line
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        smat_table1.main(["--smoke", "--output-dir", str(tmp_path / "alone"), "--share", "1/2",
                          "--join-timeout", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert ("--share 1/2: after 1 s the teacher in " in err
            and "is not finished; share 0/2 trains it" in err), err
    with pytest.raises(SystemExit) as stopped:
        smat_table1.main(["--smoke", "--output-dir", str(tmp_path / "x"), "--share", "2/2"])
    assert stopped.value.code == 2 and "--share '2/2': expected I/N" in capsys.readouterr().err
