"""Tests for smat.models.inference: the one batched inference loop and predictions."""

import numpy as np
import pytest

from smat.data import take
from smat.models import functional
from smat.models.inference import (
    batch_logits,
    block_plan,
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


def test_block_plan_takes_an_equal_part_of_every_block_and_each_row_once():
    """Blocks of 5 and 7 rows, batches of 4 (2 per block): the second block's last batch
    has no partner in the first, which repeats its first rows there, none of them kept."""
    lengths = np.array([3, 9, 1, 4, 4, 20, 2, 2, 17, 5, 3, 8])
    blocks = [slice(0, 5), slice(5, 12)]
    plan = block_plan(lengths, blocks, batch_size=4, length_multiple=8, width=32)
    assert len(plan) == 4  # max(ceil(5 / 2), ceil(7 / 2))
    kept = np.concatenate([batch.rows[batch.kept] for batch in plan])
    np.testing.assert_array_equal(np.sort(kept), np.arange(12))
    for batch in plan:
        assert all(r < 5 for r in batch.rows[:2]) and all(r >= 5 for r in batch.rows[2:])
        np.testing.assert_array_equal(batch.rows, np.concatenate(
            [block.start + part for block, part in zip(blocks, batch.parts, strict=True)]))
        assert batch.length == min(32, 8 * -(-lengths[batch.rows[batch.kept]].max() // 8))
    assert not plan[-1].kept[:2].any() and plan[-1].kept[2]  # block 0 has run out
    assert plan[0].length == 8 and plan[-1].length == 24  # lengths 1-2 first, 20 last
    with pytest.raises(ValueError, match="does not divide over 2 processes"):
        block_plan(lengths, blocks, batch_size=3, length_multiple=8, width=32)
    with pytest.raises(ValueError, match="leave process 1 without rows"):
        block_plan(lengths[:1], [slice(0, 1), slice(1, 1)], batch_size=2, length_multiple=8,
                   width=32)


def test_map_batches_over_one_block_is_map_batches():
    """One process's block of every row (`num_rows`): the same outputs as without."""
    data = synthetic_encoded(11, seq_len=32, seed=3)

    def fn(batch, rows, full):
        return {"row": rows, "ids": batch.input_ids, "label": batch.labels}

    plain = map_batches(fn, data, batch_size=4, length_multiple=8, per_token=["ids"])
    blocks = map_batches(fn, data, batch_size=4, length_multiple=8, per_token=["ids"],
                         num_rows=11)
    for name in plain:
        np.testing.assert_array_equal(blocks[name], plain[name])
    with pytest.raises(ValueError, match="holds 10 rows; its block of 11 is rows 0..10"):
        map_batches(fn, take(data, np.arange(10)), batch_size=4, num_rows=11)
