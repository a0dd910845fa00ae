"""`smat leakage` on the tiny teacher: one probe row per explainer plus the length-only
reference, written as leakage.json / leakage.md."""

import json

import pytest

from smat.cli import main


def test_leakage_command_probes_each_explainer_and_the_length(tiny_teacher, tmp_path, capsys):
    out = tmp_path / "leakage"
    assert main(["leakage", "--model", str(tiny_teacher / "model"), "--explainers", "gradient",
                 "attention_all", "--folds", "4", "--bins", "4", "--no-progress",
                 "--output-dir", str(out)]) == 0
    report = json.loads((out / "leakage.json").read_text())
    assert report["num_examples"] == 40 and sum(report["predicted_class_counts"]) == 40
    assert sorted(report["explainers"]) == ["attention_all", "gradient"]
    for probe in (*report["explainers"].values(), report["length_only"]):
        assert 0 <= probe["accuracy"] <= 1 and len(probe["fold_accuracies"]) == 4
        assert probe["num_rows"] == 40
    printed = capsys.readouterr().out
    assert "| *length only* |" in printed and printed.strip() == (
        out / "leakage.md").read_text().strip()
    assert main(["leakage", "--model", str(tiny_teacher / "model"), "--explainers",
                 "gradient", "--folds", "1", "--output-dir", str(out)]) == 2
    assert "--folds must be >= 2, got 1" in capsys.readouterr().err


@pytest.mark.parametrize("explainer,source", [("smat", "shuffled_text"),
                                              ("smat", "swapped_same_label"),
                                              ("label_leak", "shuffled_text")])
def test_control_students_run_on_their_own_cached_explanations(tiny_teacher, tmp_path,
                                                                capsys, explainer, source):
    common = ["train-student", "--teacher", str(tiny_teacher), "--explainers", explainer,
              "--size", "16", "--max-epochs", "1", "--batch-size", "8", "--no-progress"]
    assert main([*common, "--explanation-source", source, "--output-dir",
                 str(tmp_path / "control")]) == 0
    control = json.loads(capsys.readouterr().out)
    assert control["explainer"] == explainer and "accuracy" in control["test"]
    # each test sentence's agreement with the teacher, for a bootstrap over sentences
    agreed = json.loads(next((tmp_path / "control").rglob("result.json")).read_text())[
        "test_agreement"]
    assert len(agreed) == 40 and set(agreed) <= {"0", "1"}
    assert agreed.count("1") / 40 == pytest.approx(control["test"]["accuracy"])
    recorded = json.loads((tmp_path / "control" / "config.json").read_text())
    assert recorded["student"]["explanation_source"] == source
    # the teacher's explanations of the control are cached apart from the plain ones
    assert (tiny_teacher / "cache" / f"{explainer}-n16-ig50-{source}.npz").is_file()


def test_label_leak_is_what_the_probe_reads_best(tiny_teacher, tmp_path):
    """The positive control through `smat leakage`: its probe reads the predicted class
    (nearly) perfectly, far above the length alone."""
    out = tmp_path / "leakage"
    assert main(["leakage", "--model", str(tiny_teacher / "model"), "--explainers",
                 "label_leak", "--folds", "4", "--no-progress", "--output-dir",
                 str(out)]) == 0
    report = json.loads((out / "leakage.json").read_text())
    assert report["explainers"]["label_leak"]["accuracy"] >= 0.95
    assert report["length_only"]["accuracy"] < report["explainers"]["label_leak"]["accuracy"]


def test_the_committed_leakage_page_regenerates_from_its_json():
    """docs/results' leakage table is what leakage_table writes from its JSON, the plain
    majority class among the predictions beside the cross-validated rate."""
    from pathlib import Path

    from smat.jobs.leakage import leakage_table

    base = Path(__file__).resolve().parents[1] / "docs" / "results" / "smat_table1_sst2"
    report = json.loads((base / "leakage_n500.json").read_text())
    page = (base / "leakage_n500.md").read_text()
    assert page == leakage_table(report) + "\n"
    assert "Majority class: 0.509 of 1000 rows" in page and "against: 0.489" in page
    # the positive control on the same rows: read by the probe only with the edge words
    for edges, read in ((0, 0.603), (3, 1.0)):
        control = json.loads((base / f"leakage_label_leak_edges{edges}.json").read_text())
        assert (base / f"leakage_label_leak_edges{edges}.md").read_text() == (
            leakage_table(control) + "\n")
        assert control["explainers"]["label_leak"]["accuracy"] == read
        assert control["model_params"] == "5d47c791b4d144c1"
