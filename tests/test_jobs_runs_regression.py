"""A text-pair regression task end to end through the command line (the MT quality
estimation shape of the paper's Tables 5-6): a regression teacher on (source, translation)
pairs, then a SMaT student whose simulability is the Pearson correlation with the
teacher's outputs. The teacher keeps only the first of the checkpoint's two layers
(``--num-layers``), and the students the run rebuilds start from the same cut encoder."""

import json

import numpy as np

from smat.cli import main

WORDS = ("the house is big", "a cat sleeps here", "we like the film", "it rains today",
         "the road is long", "my friend reads", "birds sing loudly", "the soup is hot")


def _pairs_csv(path, rows=160, seed=0):
    """source,mt,score: the translation repeats the source with some words replaced by
    "xx"; the score is the share of words kept (a quality the model can learn)."""
    rng = np.random.default_rng(seed)
    lines = ["source,mt,score"]
    for _ in range(rows):
        source = WORDS[rng.integers(len(WORDS))].split()
        bad = rng.random(len(source)) < rng.random()
        mt = " ".join("xx" if b else w for w, b in zip(source, bad, strict=True))
        lines.append(f"{' '.join(source)},{mt},{1 - bad.mean():.3f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_text_pair_regression_teacher_and_smat_student_report_pearson(tiny_checkpoint,
                                                                        tmp_path, capsys):
    data = _pairs_csv(tmp_path / "pairs.csv")
    teacher = tmp_path / "teacher"
    assert main(["train-teacher", "--encoder", str(tiny_checkpoint), "--source", str(data),
                 "--num-layers", "1", "--task", "regression", "--text-column", "source",
                 "--text-pair-column", "mt", "--label-column", "score", "--max-len", "24",
                 "--student-validation-size", "24", "--student-test-size", "24",
                 "--learning-rate", "2e-3",
                 "--warmup-steps", "5", "--max-epochs", "2", "--batch-size", "16",
                 "--no-progress", "--output-dir", str(teacher)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["test"]) >= {"pearson"} and -1 <= result["test"]["pearson"] <= 1
    model = json.loads((teacher / "model" / "model.json").read_text())
    assert model["task"] == "regression" and model["data"]["text_pair_column"] == "mt"
    assert main(["train-student", "--teacher", str(teacher), "--explainers", "smat", "--size",
                 "32", "--max-epochs", "1", "--batch-size", "8", "--no-progress"]) == 0
    student = json.loads(capsys.readouterr().out)
    assert student["explainer"] == "smat" and "pearson" in student["test"]
    assert np.isfinite(student["test"]["pearson"])
    run = teacher / "students" / "n32" / "smat" / "seed0"
    assert (run / "explainer").is_dir()  # the learned teacher explainer, reusable by explain
    assert model["encoder_config"]["num_layers"] == 1
    assert np.shape(json.loads((run / "result.json").read_text())["head_weights"]) == (1, 4)
