"""Small shared builders for tests: a learnable synthetic token task and a tiny classifier."""

from __future__ import annotations

import numpy as np
from flax import nnx

from smat.data import Encoded
from smat.models import SequenceClassifier, TextConfig

CUE_TOKEN = 7  # a sequence is positive when it contains this token


def synthetic_encoded(num_examples: int, *, seq_len: int = 16, seed: int = 0,
                      vocab_size: int = 101) -> Encoded:
    """[CLS]=2 ... [SEP]=3 then padding; label 1 iff CUE_TOKEN occurs (learnable in a few steps)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, seq_len + 1, size=num_examples)
    ids = np.zeros((num_examples, seq_len), np.int32)
    mask = np.zeros((num_examples, seq_len), np.int32)
    labels = rng.integers(0, 2, size=num_examples).astype(np.int32)
    for i, length in enumerate(lengths):
        body = rng.integers(10, vocab_size, size=length - 2)
        if labels[i]:
            body[rng.integers(0, length - 2)] = CUE_TOKEN
        ids[i, :length] = np.concatenate([[2], body, [3]])
        mask[i, :length] = 1
    special = (mask == 0) | (ids == 2) | (ids == 3)
    return Encoded(ids, mask, np.zeros_like(ids), special, labels)


def tiny_classifier(*, task: str = "classification", seed: int = 0,
                    pooling: str = "scalar_mix") -> SequenceClassifier:
    """A 2-layer, 32-wide BERT classifier with random weights."""
    return SequenceClassifier(TextConfig.tiny(), num_labels=2 if task == "classification" else 1,
                              task=task, pooling=pooling, rngs=nnx.Rngs(seed))
