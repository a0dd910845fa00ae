"""Tests for smat.data.splits: seeded train/validation/test and the SMaT student protocol."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smat.data.splits import (
    permutation,
    smat_split,
    student_split,
    teacher_split,
    train_validation_test_split,
)


def _assert_partition(parts, n, *, complete=True):
    joined = np.concatenate(parts)
    assert len(np.unique(joined)) == len(joined), "splits overlap"
    assert joined.min() >= 0 and joined.max() < n
    if complete:
        assert len(joined) == n


def test_train_validation_test_sizes_and_partition():
    s = train_validation_test_split(1000, seed=3, validation_fraction=0.1, test_fraction=0.2)
    assert [len(p) for p in s] == [700, 100, 200]
    _assert_partition(s, 1000)
    assert all(p.dtype == np.int64 for p in s)


def test_same_seed_same_split_different_seed_differs():
    a = train_validation_test_split(500, seed=7)
    b = train_validation_test_split(500, seed=7)
    c = train_validation_test_split(500, seed=8)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.test, c.test)


def test_fixed_values_are_stable_across_versions():
    # Golden values recorded with numpy 2.4 (PCG64 via default_rng is stream-stable): a change
    # here would silently change every published split.
    np.testing.assert_array_equal(permutation(6, seed=0), [3, 2, 5, 4, 0, 1])


def test_zero_fraction_is_an_intended_empty_part():
    s = train_validation_test_split(10, seed=0, validation_fraction=0.2, test_fraction=0.0)
    assert len(s.test) == 0 and len(s.validation) == 2


def test_tiny_data_empty_split_raises():
    with pytest.raises(ValueError, match="validation_fraction=0.01 of 10 rows is an empty"):
        train_validation_test_split(10, seed=0, validation_fraction=0.01)
    with pytest.raises(ValueError, match="must be < 1"):
        train_validation_test_split(10, seed=0, validation_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        train_validation_test_split(10, seed=0, test_fraction=-0.1)


def test_bad_seed_and_rows():
    with pytest.raises(ValueError, match="seed must be >= 0"):
        permutation(5, seed=-1)
    with pytest.raises(TypeError, match="num_rows must be an int"):
        permutation(5.0, seed=0)


def test_student_split_protocol():
    s = student_split(5000, seed=0, num_examples=500, student_validation_size=1250,
                      student_test_size=2500)
    assert (len(s.train), len(s.validation), len(s.test), len(s.pool)) == (500, 1250, 2500, 1250)
    _assert_partition([s.pool, s.validation, s.test], 5000)
    np.testing.assert_array_equal(s.train, s.pool[:500])


def test_student_sizes_are_nested_and_eval_sets_fixed():
    small = student_split(3000, seed=1, num_examples=500, student_validation_size=200,
                          student_test_size=400)
    large = student_split(3000, seed=1, num_examples=1000, student_validation_size=200,
                          student_test_size=400)
    np.testing.assert_array_equal(large.train[:500], small.train)
    np.testing.assert_array_equal(large.validation, small.validation)
    np.testing.assert_array_equal(large.test, small.test)


def test_student_size_larger_than_pool_names_both_numbers():
    with pytest.raises(ValueError, match=r"a student size of 2000 .* student pool of 1500 rows"):
        student_split(2000, seed=0, num_examples=2000, student_validation_size=100,
                      student_test_size=400)
    with pytest.raises(ValueError, match="not enough"):
        student_split(100, seed=0, num_examples=1, student_validation_size=50,
                      student_test_size=50)
    with pytest.raises(ValueError, match="the student size must be >= 1"):
        student_split(100, seed=0, num_examples=0, student_validation_size=5,
                      student_test_size=5)


def test_smat_split_teacher_and_student_are_disjoint():
    p = smat_split(10_000, seed=4, num_examples=2000, student_validation_size=500,
                   student_test_size=2000, teacher_fraction=0.5, teacher_validation_fraction=0.1)
    assert (len(p.teacher_train), len(p.teacher_validation)) == (4500, 500)
    assert (len(p.student.train), len(p.student.validation), len(p.student.test)) == (
        2000, 500, 2000)
    _assert_partition([p.teacher_train, p.teacher_validation, p.student.pool,
                       p.student.validation, p.student.test], 10_000)
    with pytest.raises(ValueError, match=r"student size of 3000 .* pool of 2500"):
        smat_split(10_000, seed=4, num_examples=3000, student_validation_size=500,
                   student_test_size=2000)


def test_teacher_split_is_smat_splits_teacher_rule():
    whole = smat_split(1_000, seed=3, num_examples=10, student_validation_size=50,
                       student_test_size=100, teacher_fraction=0.3)
    alone = teacher_split(1_000, seed=3, teacher_fraction=0.3)
    np.testing.assert_array_equal(alone.train, whole.teacher_train)
    np.testing.assert_array_equal(alone.validation, whole.teacher_validation)
    with pytest.raises(ValueError, match="leaves no teacher training rows"):
        teacher_split(10, seed=0, teacher_fraction=0.1, teacher_validation_fraction=0.9)
    # a whole source for the teacher when the students' rows come from another one
    whole_source = teacher_split(1_000, seed=3, teacher_fraction=1.0)
    assert len(whole_source.train) == 900 and len(whole_source.validation) == 100
    with pytest.raises(ValueError, match="student data has 0 rows"):
        smat_split(1_000, seed=3, num_examples=1, student_validation_size=1,
                   student_test_size=1, teacher_fraction=1.0)
    with pytest.raises(ValueError, match=r"teacher_fraction must be a number in \(0, 1\]"):
        teacher_split(1_000, seed=3, teacher_fraction=1.5)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(50, 400), seed=st.integers(0, 2**31), frac=st.floats(0.2, 0.8),
       valid=st.integers(1, 4), test=st.integers(1, 4))
def test_splits_never_overlap(n, seed, frac, valid, test):
    p = smat_split(n, seed=seed, num_examples=1, student_validation_size=valid,
                   student_test_size=test, teacher_fraction=frac, teacher_validation_fraction=0.2)
    _assert_partition([p.teacher_train, p.teacher_validation, p.student.pool,
                       p.student.validation, p.student.test], n)
    s = train_validation_test_split(n, seed=seed, validation_fraction=0.1, test_fraction=0.1)
    _assert_partition(s, n)
