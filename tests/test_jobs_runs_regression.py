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

    # A text-pair model reads each line of a texts file as its two texts, tab-separated;
    # the prediction of a pair is the one the model gives the tokenized pair.
    texts = tmp_path / "pairs.txt"
    texts.write_text("the house is big\tthe xx is big\nmy friend reads\tmy friend reads\n")
    assert main(["predict", "--model", str(teacher / "model"), str(texts)]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    from smat.data import tokenize_texts
    from smat.models import functional
    from smat.models.inference import predict_logits
    from smat.store import model_store

    trained = model_store.load(teacher / "model")
    pairs = tokenize_texts(["the house is big", "my friend reads"], trained.tokenizer,
                           max_len=24, text_pairs=["the xx is big", "my friend reads"])
    assert set(pairs.token_type_ids[0].tolist()) == {0, 1}  # two segments
    expected = predict_logits(*functional.split(trained.model), pairs)[:, 0]
    np.testing.assert_allclose([p["prediction"] for p in predicted], expected, rtol=1e-5,
                               atol=1e-6)
    out = tmp_path / "explained"
    assert main(["explain", "--model", str(teacher / "model"), "--explainers", "gradient",
                 "--output-dir", str(out), str(texts)]) == 0
    capsys.readouterr()
    explained = json.loads((out / "explanations.json").read_text())
    assert explained[0]["tokens"] == ["the", "house", "is", "big", "the", "xx", "is", "big"]
    texts.write_text("the house is big\tthe xx is big\nno tab here\n")
    assert main(["predict", "--model", str(teacher / "model"), str(texts)]) == 2
    assert "separated by one tab; text 2 has 0 tabs" in capsys.readouterr().err
