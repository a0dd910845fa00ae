"""Tests for experiments/smat_table5_mlqe.py and smat_table6_mlqe_plausibility.py: the
MLQE-PE pair files, the paper's split (students sample the teacher's training pairs;
validation and test held out), and both end to end on a synthetic MLQE-PE folder (whose
BAD words are exactly the replaced ones) and the tiny BERT."""

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))

import smat_table5_mlqe  # noqa: E402
import smat_table6_mlqe_plausibility  # noqa: E402

from smat.data.hub_sets import hub_data_dir  # noqa: E402
from smat.data.mlqe import load_mlqe  # noqa: E402
from tests.helpers import write_synthetic_mlqe  # noqa: E402
from tests.test_data_hub_sets import (  # noqa: E402
    MLQE_ROWS,
    _mlqe_split,
    _mlqe_z_mean,
    _save_mlqe,
)


def test_pair_files_hold_train_and_the_held_out_dev_and_test_pairs(tmp_path):
    root = write_synthetic_mlqe(tmp_path / "mlqe", rows={"train": 30, "dev": 5, "test": 7})
    train, held_out = smat_table5_mlqe.write_pair_files(root, ["en-de"], tmp_path / "data")
    with train.open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    loaded = load_mlqe(root, language_pairs="en-de", split="train").data
    assert [r["source"] for r in rows] == list(loaded.texts)
    assert [r["mt"] for r in rows] == list(loaded.text_pairs)
    np.testing.assert_allclose([float(r["score"]) for r in rows], loaded.labels)
    with held_out.open(newline="") as stream:
        assert len(list(csv.DictReader(stream))) == 5 + 7
    assert not list((tmp_path / "data").glob(".*partial"))


def test_variants_follow_the_paper_design():
    paper = smat_table5_mlqe.get_config("paper", output_dir="out").experiment
    assert paper.sizes == (1050, 2100, 4200)  # 5 / 10 / 20% of 21,000 training pairs
    assert paper.explainers == smat_table5_mlqe.SETTINGS and len(paper.seeds) == 5
    assert paper.data.source == str(Path("out") / "data" / "train.csv")
    for variant in smat_table5_mlqe.VARIANTS:
        config = smat_table5_mlqe.get_config(variant, output_dir="out").experiment
        assert config.student.student_pool == "teacher_train" and config.metric == "pearson"
    reference = smat_table5_mlqe.get_config("reference", output_dir="out").experiment
    cpu = smat_table5_mlqe.get_config("cpu", output_dir="out").experiment
    assert (reference.sizes, reference.data) == (cpu.sizes, cpu.data)  # the cpu layout
    assert reference.seeds == (0, 1, 2, 3, 4) and reference.student.inner_learning_rate == 5e-3
    assert (reference.student.loop.patience, reference.student.loop.max_epochs) == (10, 1000)
    with pytest.raises(ValueError, match="unknown variant"):
        smat_table5_mlqe.get_config("gpu", output_dir="out")
    with pytest.raises(SystemExit):  # the teacher is the experiment's own
        smat_table5_mlqe.main(["--data-dir", "x", "--teacher", "t"])


def test_without_data_dir_mlqe_is_read_from_the_hub_and_a_split_without_scores_stops(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SMAT_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SMAT_HUB_MIRROR", str(tmp_path / "mirror"))
    # the Hub holds en-de only: the paper variant's three pairs need a folder
    with pytest.raises(SystemExit) as stopped:
        smat_table5_mlqe.main(["--variant", "paper", "--output-dir", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert "reads en-de, et-en, ro-en and the Hugging Face Hub holds en-de only: pass " \
        "--data-dir" in capsys.readouterr().err
    # no Hub (an empty mirror): the usual advice, from both drivers
    for main, argv in ((smat_table5_mlqe.main, ["--variant", "cpu"]),
                       (smat_table6_mlqe_plausibility.main, ["--table5", str(tmp_path)])):
        with pytest.raises(SystemExit) as stopped:
            main([*argv, "--output-dir", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and "Traceback" not in err
        assert "no --data-dir and mlqe_pe could not be read from the Hugging Face Hub" in err
    # the Hub's copy (train and dev tagged, test20 scored without tags) gives Table 5 its
    # pairs: the tokenized texts and z_mean of every split
    _save_mlqe(tmp_path / "mirror", {"train": _mlqe_split([0, 1, 2]),
                                     "validation": _mlqe_split([2, 0]),
                                     "test": _mlqe_split([1, 2], untagged=True)})
    hub = hub_data_dir("mlqe_pe")
    smat_table5_mlqe.write_pair_files(hub, ["en-de"], tmp_path / "pairs")
    with (tmp_path / "pairs" / "held_out.csv").open(newline="") as stream:
        held_out = list(csv.DictReader(stream))
    assert [row["source"] for row in held_out] == [MLQE_ROWS[r][1] for r in (2, 0, 1, 2)]
    assert float(held_out[-1]["score"]) == pytest.approx(_mlqe_z_mean(2))
    # a copy whose test split has no scores either stops Table 5 at test20, untrained
    monkeypatch.setenv("SMAT_DATA_CACHE", str(tmp_path / "cache_blind"))
    _save_mlqe(tmp_path / "mirror", {"train": _mlqe_split([0, 1, 2]),
                                     "validation": _mlqe_split([2, 0]),
                                     "test": _mlqe_split([1, 2], blind=True)})
    with pytest.raises(SystemExit) as stopped:
        smat_table5_mlqe.main(["--variant", "cpu", "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    assert "en-de test: the Hugging Face Hub copy in " in err
    assert "pass --data-dir with the GitHub release (sheffieldnlp/mlqe-pe" in err
    assert not (tmp_path / "out" / "teacher").exists()


@pytest.mark.slow
def test_smoke_variant_trains_teacher_and_students_and_writes_the_table(tiny_checkpoint,
                                                                         tmp_path):
    root = write_synthetic_mlqe(tmp_path / "mlqe", rows={"train": 160, "dev": 20, "test": 24})
    out = tmp_path / "t5"
    summary = smat_table5_mlqe.run("smoke", data_dir=root, output_dir=out,
                                   encoder=str(tiny_checkpoint), progress=False)
    assert len(summary["records"]) == 3 * 2
    assert all(np.isfinite(r["test"]["pearson"]) for r in summary["records"])
    text = (out / "table.md").read_text()
    assert "Teacher test Pearson" in text and "| smat |" in text and "n=8400" in text
    assert (out / "simulability.png").is_file() and (out / "head_weights.png").is_file()
    recorded = json.loads((out / "students" / "n32" / "smat" / "seed0" / "config.json")
                          .read_text())
    assert recorded["student"]["student_pool"] == "teacher_train"
    # share 1 of 2 on the finished run: its students (reused), the pair files not rewritten
    written = {path: path.stat().st_mtime_ns for path in (out / "data").iterdir()}
    share = smat_table5_mlqe.run("smoke", data_dir=root, output_dir=out,
                                 encoder=str(tiny_checkpoint), progress=False, share=(1, 2))
    assert share["share"] == "1/2" and 0 < len(share["records"]) < 3 * 2
    assert {path: path.stat().st_mtime_ns for path in (out / "data").iterdir()} == written

    # Table 6 on the Table 5 run: both sides scored on the translations with errors
    table6 = smat_table6_mlqe_plausibility.run(out, root, output_dir=tmp_path / "t6")
    scored = table6["per_pair"]["en-de"]
    test = load_mlqe(root, language_pairs="en-de", split="test")
    rows = [i for i, mask in enumerate(test.pair_word_masks) if mask.any()]
    assert scored["num_examples"] == len(rows) > 0
    # each side is scored against its own tags: BAD source words, BAD translation words
    for side, masks in (("src", test.word_masks), ("tgt", test.pair_word_masks)):
        assert scored[side]["report"]["rationale_words"] == sum(int(masks[i].sum())
                                                                 for i in rows)
    assert (scored["src"]["report"]["words_scored"]
            == sum(len(test.data.texts[i].split()) for i in rows))
    assert (scored["tgt"]["report"]["words_scored"]
            == sum(len(test.data.text_pairs[i].split()) for i in rows))
    for side in ("src", "tgt"):
        aucs = scored[side]["auc"]
        assert set(aucs) == {*smat_table6_mlqe_plausibility.STATIC, "smat", "best layer*",
                             "best head*"}
        assert all(0 <= value <= 1 for value in aucs.values())
    assert "| smat |" in (tmp_path / "t6" / "table.md").read_text()
