"""End to end through the `smat` command line on a tiny BERT checkpoint and a local CSV."""

import json
import shutil

import numpy as np
import pytest

from smat.cli import main
from smat.explainer_store import load_explainer
from smat.models import minilm_path

POSITIVE = ["a great film", "wonderful and moving", "truly great acting", "a joy to watch",
            "great fun", "moving and wonderful story"]
NEGATIVE = ["a dull film", "boring and slow", "truly awful acting", "a waste of time",
            "dull mess", "slow and boring story"]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A 2-layer random BERT saved by the PyTorch class, with the MiniLM tokenizer."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-bert")
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=37,
                                     max_position_embeddings=64)
    transformers.BertModel(config).save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy(minilm_path() / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def csv_data(tmp_path_factory):
    rng = np.random.default_rng(0)
    rows = [(text, "pos") for text in POSITIVE] + [(text, "neg") for text in NEGATIVE]
    rows = [rows[i] for i in rng.integers(0, len(rows), size=400)]
    path = tmp_path_factory.mktemp("data") / "reviews.csv"
    path.write_text("sentence,sentiment\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return path


def test_teacher_student_explain_predict(tiny_checkpoint, csv_data, tmp_path, capsys):
    teacher = tmp_path / "teacher"
    common = ["--no-progress"]
    assert main(["train-teacher", "--model", str(tiny_checkpoint), "--source", str(csv_data),
                 "--text-column", "sentence", "--label-column", "sentiment", "--max-len", "16",
                 "--student-validation-size", "40", "--student-test-size", "40",
                 "--learning-rate", "2e-3", "--warmup-steps", "5", "--max-epochs", "3",
                 "--batch-size", "16", "--output-dir", str(teacher), *common]) == 0
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
