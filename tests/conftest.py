"""Shared pytest configuration: strict JAX numerics for every test (STYLE 10), and the
tiny checkpoint / CSV data / trained teacher used by the command-line tests."""

import shutil

import jax
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture
def key() -> jax.Array:
    return jax.random.key(0)


POSITIVE = ["a great film", "wonderful and moving", "truly great acting", "a joy to watch",
            "great fun", "moving and wonderful story"]
NEGATIVE = ["a dull film", "boring and slow", "truly awful acting", "a waste of time",
            "dull mess", "slow and boring story"]


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A 2-layer random BERT saved by the PyTorch class, with the MiniLM tokenizer."""
    from smat.models import minilm_path

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


@pytest.fixture(scope="session")
def csv_data(tmp_path_factory):
    rng = np.random.default_rng(0)
    rows = [(text, "pos") for text in POSITIVE] + [(text, "neg") for text in NEGATIVE]
    rows = [rows[i] for i in rng.integers(0, len(rows), size=400)]
    path = tmp_path_factory.mktemp("data") / "reviews.csv"
    path.write_text("sentence,sentiment\n" + "".join(f"{t},{y}\n" for t, y in rows))
    return path


@pytest.fixture(scope="session")
def tiny_teacher_args(tiny_checkpoint, csv_data):
    """`smat train-teacher` flags for the tiny BERT on csv_data (add --output-dir)."""
    return ["--model", str(tiny_checkpoint), "--source", str(csv_data), "--text-column",
            "sentence", "--label-column", "sentiment", "--max-len", "16",
            "--student-validation-size", "40", "--student-test-size", "40",
            "--learning-rate", "2e-3", "--warmup-steps", "5", "--max-epochs", "2",
            "--batch-size", "16", "--no-progress"]


@pytest.fixture(scope="session")
def tiny_teacher(tiny_teacher_args, tmp_path_factory):
    """A `smat train-teacher` run folder of the tiny BERT on csv_data (40 test sentences)."""
    from smat.cli import main

    folder = tmp_path_factory.mktemp("teacher")
    assert main(["train-teacher", *tiny_teacher_args, "--output-dir", str(folder)]) == 0
    return folder
