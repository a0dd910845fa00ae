"""Tests for smat.models.inference: the one batched inference loop and predictions."""

import numpy as np
import pytest

from smat.models import functional
from smat.models.inference import (
    batch_logits,
    map_batches,
    predict_logits,
    predictions_from_logits,
    trim_to_length,
)
from tests.helpers import synthetic_encoded, tiny_classifier


def test_trim_to_length_cuts_only_padding_columns():
    data = synthetic_encoded(8, seq_len=32)
    trimmed = trim_to_length(data, 8)
    assert trimmed.input_ids.shape[1] == 8 * int(np.ceil(data.attention_mask.sum(1).max() / 8))
    assert not data.attention_mask[:, trimmed.input_ids.shape[1]:].any()


@pytest.mark.parametrize("batch_size,length_multiple", [(3, 8), (8, None), (32, 16)])
def test_map_batches_returns_every_row_in_order(batch_size, length_multiple):
    """Length-sorted, cut, last-batch-padded batches: each row's outputs land at its index,
    per-token outputs padded back to the full length with zeros."""
    data = synthetic_encoded(11, seq_len=32, seed=3)
    seen = []

    def fn(batch, rows, full):
        seen.append(batch.input_ids.shape)
        np.testing.assert_array_equal(full.input_ids, data.input_ids[rows])
        return {"row": rows, "ids": batch.input_ids}

    out = map_batches(fn, data, batch_size=batch_size, length_multiple=length_multiple,
                      per_token=["ids"])
    np.testing.assert_array_equal(out["row"], np.arange(11))
    real = data.attention_mask != 0
    np.testing.assert_array_equal(out["ids"][real], data.input_ids[real])
    assert out["ids"].shape == data.input_ids.shape
    assert all(rows == batch_size for rows, _ in seen)  # one compiled batch shape
    if length_multiple is None:
        assert {width for _, width in seen} == {32}


def test_predict_logits_equals_one_uncut_call():
    data = synthetic_encoded(10, seq_len=32, seed=1)
    graphdef, params = functional.split(tiny_classifier())
    whole = np.asarray(batch_logits(graphdef, params, data.input_ids, data.attention_mask,
                                    data.token_type_ids))
    for batch_size, multiple in ((3, 8), (4, 32)):
        np.testing.assert_allclose(predict_logits(graphdef, params, data, batch_size=batch_size,
                                                  length_multiple=multiple), whole, atol=1e-5)
    predicted = predictions_from_logits(whole, "classification")
    np.testing.assert_array_equal(predicted, whole.argmax(-1))
    np.testing.assert_array_equal(predictions_from_logits(whole, "regression"), whole[:, 0])
