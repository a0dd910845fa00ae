"""The Oxford thesis's augmented-SST task (§3.1) as files a teacher run reads.

A sample of a text classification file's rows gets randomized labels, each named by a word
appended to the text (:func:`smat.evaluation.add_label_words`), so the label word is the
only predictive feature and its token is the ground truth an explanation should rank
first. :func:`augmented_data` writes the training file and keeps evaluated rows augmented
the same way; :func:`encode_task` tokenizes those rows for a trained model with their
ground-truth masks. Rows whose augmented text does not fit the model's length are never
sampled, so no label word is cut off.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from smat.data import Encoded, TextDataset, char_spans_to_token_mask, load_dataset, tokenize
from smat.data.protocol import DataConfig
from smat.evaluation import SyntheticTask, add_label_words
from smat.store import model_store

LABEL_WORDS = ("negative", "positive")
"""The words naming labels 0 and 1 (the thesis's); a model of the task has them as its
classes."""


class AugmentedData(NamedTuple):
    """What :func:`augmented_data` wrote and kept.

    Attributes:
      data_config: the teacher run's data: the augmented training file, the teacher's rows
        (10% of them for its early stopping) and the held-out rows.
      eval: the evaluated rows, augmented.
      eval_rows: their indices in the evaluated file.
      fitting: per file ("train", "dev"), how many rows fit in max_len tokens.
      total: per file, how many rows it holds.
    """

    data_config: DataConfig
    eval: SyntheticTask
    eval_rows: list[int]
    fitting: dict[str, int]
    total: dict[str, int]


def _fitting(dataset: TextDataset, tokenizer: Any, max_len: int) -> np.ndarray:
    """Rows whose text with a label word appended fits in `max_len` tokens (never cut)."""
    longest = max(LABEL_WORDS, key=lambda w: len(tokenizer.tokenize(w)))
    lengths = [len(ids) for ids in tokenizer([f"{t.rstrip()} {longest}" for t in dataset.texts],
                                             add_special_tokens=True)["input_ids"]]
    return np.flatnonzero(np.asarray(lengths) <= max_len)


def augmented_data(files: Mapping[str, Path], tokenizer: Any, folder: Path, *,
                   train_rows: int, held_out_rows: int, eval_rows: int,
                   max_len: int) -> AugmentedData:
    """Write the augmented training file and augment the evaluated rows.

    The training file (``folder/augmented_sst_train.tsv``) is a seeded sample of
    ``files["train"]`` with labels randomized and named by an appended word (seed 0): the
    teacher's `train_rows`, the `held_out_rows`, and one validation and one pool row of the
    student parts the SMaT protocol split always carves (unused here). The evaluated rows
    are a seeded sample of ``files["dev"]``, augmented with seed 1. Both files are TSVs with
    ``sentence`` and ``label`` columns (GLUE SST-2's).

    Raises:
      ValueError: the files have too few rows that fit in `max_len` tokens, or a sampled
        text holds a tab or line break.
    """
    read = {name: load_dataset(str(path), text_column="sentence", label_column="label")
            for name, path in files.items()}
    fit = {name: _fitting(data, tokenizer, max_len) for name, data in read.items()}
    total_rows = train_rows + held_out_rows + 2
    need = {"train": total_rows, "dev": eval_rows}
    short = {n: (len(fit[n]), need[n]) for n in need if len(fit[n]) < need[n]}
    if short:
        raise ValueError(f"too few rows of at most {max_len} tokens (have, need): {short}")
    rows = {n: np.sort(np.random.default_rng(i).permutation(fit[n])[:need[n]])
            for i, n in enumerate(("train", "dev"))}
    train = read["train"].select(rows["train"])
    task = add_label_words(train.texts, train.labels, seed=0, label_words=LABEL_WORDS)
    bad = [t for t in task.texts if "\t" in t or "\n" in t]
    if bad:
        raise ValueError(f"a text holds a tab or line break, which the TSV cannot keep: {bad[0]!r}")
    source = folder / "augmented_sst_train.tsv"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("sentence\tlabel\n" + "".join(
        f"{text}\t{LABEL_WORDS[label]}\n" for text, label in zip(task.texts, task.labels,
                                                                 strict=True)))
    data_config = DataConfig(source=str(source), text_column="sentence", label_column="label",
                             max_len=max_len, teacher_fraction=train_rows / total_rows,
                             student_validation_size=1, student_test_size=held_out_rows)
    dev = read["dev"].select(rows["dev"])
    return AugmentedData(data_config=data_config,
                         eval=add_label_words(dev.texts, dev.labels, seed=1,
                                              label_words=LABEL_WORDS),
                         eval_rows=rows["dev"].tolist(),
                         fitting={n: len(f) for n, f in fit.items()},
                         total={n: len(d) for n, d in read.items()})


def encode_task(trained: model_store.TrainedModel, task: SyntheticTask, *,
                max_len: int) -> tuple[Encoded, np.ndarray, np.ndarray]:
    """The augmented rows tokenized for `trained`, the (N, T) ground-truth mask (the label
    word's tokens) and the (N, T) mask of real, non-special tokens that are ranked.

    Raises:
      ValueError: the model's classes are not the label words.
    """
    labels = tuple(trained.info["label_names"])
    if labels != LABEL_WORDS:
        raise ValueError(f"the model's labels are {labels}, not the label words {LABEL_WORDS}")
    data = tokenize(TextDataset(texts=task.texts, labels=task.labels, task="classification",
                                label_names=labels), trained.tokenizer, max_len=max_len)
    gold = char_spans_to_token_mask(task.texts, [[tuple(s)] for s in task.char_spans],
                                    trained.tokenizer, max_len=max_len)
    return data, gold, (data.attention_mask != 0) & ~data.special_tokens_mask
