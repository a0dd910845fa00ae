"""Tests for smat.data.batching: take, epoch order, resumable batch iteration and data
shards."""

from typing import NamedTuple

import numpy as np
import pytest

from smat.data.batching import (
    DataShards,
    batches_per_epoch,
    epoch_batches,
    epoch_order,
    iterate_batches,
    length_sorted_batches,
    num_batches,
    owned_shards,
    padded_length,
    shard_positions,
    take,
)
from smat.data.tokenization import Encoded


def _encoded(n=10, t=4):
    ids = np.arange(n * t, dtype=np.int32).reshape(n, t)
    return Encoded(input_ids=ids, attention_mask=np.ones((n, t), np.int32),
                   token_type_ids=np.zeros((n, t), np.int32),
                   special_tokens_mask=np.zeros((n, t), bool),
                   labels=np.arange(n, dtype=np.int32))


def _rows(batches):
    return [b.labels.tolist() for b in batches]


def test_each_epoch_covers_every_row_once():
    batches = list(iterate_batches(_encoded(10), batch_size=3, seed=0, epoch=0))
    assert [len(b.labels) for b in batches] == [3, 3, 3, 1]
    assert sorted(sum(_rows(batches), [])) == list(range(10))
    for b in batches:  # rows stay aligned across fields
        np.testing.assert_array_equal(b.input_ids[:, 0], b.labels * 4)
        assert isinstance(b, Encoded)


def test_order_depends_on_seed_and_epoch_only():
    data = _encoded(50)
    a = _rows(iterate_batches(data, batch_size=8, seed=1, epoch=2))
    b = _rows(iterate_batches(data, batch_size=8, seed=1, epoch=2))
    assert a == b
    assert a != _rows(iterate_batches(data, batch_size=8, seed=1, epoch=3))
    assert a != _rows(iterate_batches(data, batch_size=8, seed=2, epoch=2))


def test_resume_mid_epoch_yields_identical_batches():
    data = _encoded(50)
    full = _rows(iterate_batches(data, batch_size=8, seed=5, epoch=4))
    # Interrupted after 3 batches: a fresh iterator resumes with the remaining ones.
    resumed = _rows(iterate_batches(data, batch_size=8, seed=5, epoch=4, start_batch=3))
    assert resumed == full[3:]


def test_no_shuffle_and_drop_last():
    batches = _rows(iterate_batches(_encoded(7), batch_size=3, seed=0, epoch=0, shuffle=False,
                                    drop_last=True))
    assert batches == [[0, 1, 2], [3, 4, 5]]
    assert num_batches(7, batch_size=3, drop_last=True) == 2
    assert num_batches(7, batch_size=3) == 3


def test_epoch_order_is_a_permutation():
    order = epoch_order(20, seed=0, epoch=1)
    assert sorted(order.tolist()) == list(range(20))
    np.testing.assert_array_equal(epoch_order(5, seed=0, epoch=0, shuffle=False), np.arange(5))


def test_generic_named_tuples_and_take():
    class Pair(NamedTuple):
        x: np.ndarray
        teacher_logits: np.ndarray

    data = Pair(x=np.arange(6), teacher_logits=np.arange(12.0).reshape(6, 2))
    sub = take(data, [4, 1])
    assert isinstance(sub, Pair)
    np.testing.assert_array_equal(sub.x, [4, 1])
    np.testing.assert_array_equal(sub.teacher_logits, [[8.0, 9.0], [2.0, 3.0]])
    with pytest.raises(IndexError, match=r"\[0, 6\)"):
        take(data, [6])


def test_bad_inputs_raise_at_call_time():
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        iterate_batches(_encoded(), batch_size=0, seed=0, epoch=0)
    with pytest.raises(ValueError, match="epoch must be a non-negative int"):
        iterate_batches(_encoded(), batch_size=2, seed=0, epoch=-1)
    with pytest.raises(ValueError, match="disagree on the number of rows"):
        iterate_batches(_encoded()._replace(labels=np.zeros(3)), batch_size=2, seed=0, epoch=0)
    with pytest.raises(ValueError, match="empty data set"):
        iterate_batches(_encoded(0), batch_size=2, seed=0, epoch=0)
    with pytest.raises(TypeError, match="NamedTuple"):
        iterate_batches((np.zeros(3),), batch_size=2, seed=0, epoch=0)


def test_padded_length_rounds_up_the_longest_row_and_caps_at_the_width():
    mask = np.zeros((3, 40), np.int32)
    mask[0, :5], mask[1, :17], mask[2, :1] = 1, 1, 1
    assert padded_length(mask, 8) == 24  # 17 -> 24
    assert padded_length(mask, 16) == 32
    assert padded_length(mask, 64) == 40  # never wider than the data
    assert padded_length(np.zeros((2, 40)), 16) == 16  # all padding: one multiple
    with pytest.raises(ValueError, match="multiple must be a positive int"):
        padded_length(mask, 0)


def test_length_sorted_batches_cover_each_row_once_in_length_order():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, 23)
    mask = (np.arange(30)[None] < lengths[:, None]).astype(np.int32)
    batches = length_sorted_batches(mask, batch_size=5)
    assert [len(rows) for rows, _ in batches] == [5] * 5  # the last batch is filled up
    assert [count for _, count in batches] == [5, 5, 5, 5, 3]
    real = np.concatenate([rows[:count] for rows, count in batches])
    assert sorted(real.tolist()) == list(range(23))
    assert np.all(np.diff(lengths[real]) >= 0)
    last_rows, last_count = batches[-1]
    assert np.all(last_rows[last_count:] == last_rows[0])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        length_sorted_batches(mask, batch_size=0)


def _shards(data, owned, num_shards):
    n = len(data.labels)
    return DataShards(tuple(take(data, shard_positions(n, s, num_shards)) for s in owned),
                      tuple(owned), num_shards, n)


def test_data_shards_give_the_same_global_batches_however_many_processes_hold_them():
    """Two processes holding one shard each, or one holding both: process 0's rows then
    process 1's are the one process's batch; every batch takes B / S rows of each shard,
    no row twice in an epoch, and a resumed epoch goes on with the same batches."""
    data = _encoded(n=51)
    whole = _shards(data, (0, 1, 2), 3)
    assert batches_per_epoch(whole, batch_size=6) == 17 // 2 == 8
    for epoch in (0, 1):
        one = _rows(epoch_batches(whole, batch_size=6, seed=4, epoch=epoch))
        split = [_rows(epoch_batches(_shards(data, owned, 3), batch_size=6, seed=4,
                                     epoch=epoch)) for owned in ((0,), (1,), (2,))]
        assert one == [a + b + c for a, b, c in zip(*split, strict=True)]
        assert all([row % 3 for row in batch] == [0, 0, 1, 1, 2, 2] for batch in one)
        seen = [row for batch in one for row in batch]
        assert len(seen) == len(set(seen)) == 48
        assert _rows(epoch_batches(whole, batch_size=6, seed=4, epoch=epoch,
                                   start_batch=5)) == one[5:]
    assert one != _rows(epoch_batches(whole, batch_size=6, seed=4, epoch=0))
    # the shards' batches are not the split's: a run records its number of shards
    assert one != _rows(epoch_batches(data, batch_size=6, seed=4, epoch=1))


def test_data_shards_are_checked():
    assert owned_shards(4, 1, 2) == (2, 3)
    with pytest.raises(ValueError, match="--data-shards 3 must be a positive multiple of "
                                         "the number of processes, 2"):
        owned_shards(3, 0, 2)
    with pytest.raises(ValueError, match="data shard 1 of 2 holds 5 rows; a split of 9 "
                                         "gives it 4"):
        DataShards((_encoded(n=5),), (1,), 2, 9)
    with pytest.raises(ValueError, match="batch size 5 must be a multiple of --data-shards 2"):
        batches_per_epoch(_shards(_encoded(n=9), (0, 1), 2), batch_size=5)
