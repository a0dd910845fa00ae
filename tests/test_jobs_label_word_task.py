"""Tests for smat.jobs.label_word_task: the augmented-SST files a teacher run reads."""

import numpy as np
import pytest
from transformers import AutoTokenizer

from smat.data import load_dataset
from smat.jobs import label_word_task
from smat.models import minilm_path
from tests.conftest import NEGATIVE, POSITIVE


def _tsv(path, texts):
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(texts)))
    return path


def test_augmented_data_names_each_label_by_a_word_that_is_never_cut(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    texts = [*POSITIVE, *NEGATIVE]
    long = " ".join(["word"] * 40)  # too long for 16 tokens with a label word
    files = {"train": _tsv(tmp_path / "train.tsv", [*texts * 3, long]),
             "dev": _tsv(tmp_path / "dev.tsv", texts[:10])}
    data = label_word_task.augmented_data(files, tokenizer, tmp_path / "out", train_rows=20,
                                          held_out_rows=6, eval_rows=8, max_len=16)
    written = load_dataset(data.data_config.source, text_column="sentence",
                           label_column="label")
    assert len(written.texts) == 28  # 20 + 6 + one validation and one pool row of students
    assert not any(t.startswith(long) for t in written.texts)
    assert data.data_config.teacher_fraction == pytest.approx(20 / 28)
    assert data.data_config.student_test_size == 6 and data.data_config.max_len == 16
    assert all(t.split()[-1] == written.label_names[y]
               for t, y in zip(written.texts, written.labels, strict=True))
    assert data.total == {"train": 37, "dev": 10} and data.fitting == {"train": 36, "dev": 10}
    assert len(data.eval.texts) == len(data.eval_rows) == 8
    assert np.all(np.diff(data.eval_rows) > 0)
    assert [t.split()[-1] for t in data.eval.texts] == [
        label_word_task.LABEL_WORDS[y] for y in data.eval.labels]
    with pytest.raises(ValueError, match=r"too few rows of at most 16 tokens .*'dev': \(10, 11\)"):
        label_word_task.augmented_data(files, tokenizer, tmp_path / "out", train_rows=20,
                                       held_out_rows=6, eval_rows=11, max_len=16)
