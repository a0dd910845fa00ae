"""Deterministic, seeded data splits as index arrays, including the SMaT student protocol.

Every split is a function of (number of rows, sizes, seed) only: the same seed gives the same
indices on every machine (numpy's PCG64 through `np.random.default_rng`), different seeds
give different ones, and the parts never overlap.

SMaT protocol (Fernandes et al., 2022, §5; the authors' IMDB code): the teacher is trained
on its own split; the *other* data is shuffled and carved into a student test set (the last
`student_test_size` rows), a student validation set (the `student_validation_size` rows
before them, used for early stopping and for the outer step's simulability loss) and a
student pool (the rest). The student trains on the first `num_examples` rows of the pool,
so the 500-example set is a prefix of the 1,000-example set for the same seed, and the
validation / test sets do not change with the student size.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
from jaxtyping import Int


class Splits(NamedTuple):
    """Row indices of a train / validation / test split (each (K,) int64, disjoint)."""

    train: Int[np.ndarray, " k"]
    validation: Int[np.ndarray, " k"]
    test: Int[np.ndarray, " k"]


class StudentSplits(NamedTuple):
    """Row indices of the student's parts of the "other" data (each (K,) int64, disjoint).

    Attributes:
      train: the first `num_examples` rows of the student pool.
      validation: the student validation set.
      test: the student test set (simulability is reported here).
      pool: the whole student pool (train is its prefix).
    """

    train: Int[np.ndarray, " k"]
    validation: Int[np.ndarray, " k"]
    test: Int[np.ndarray, " k"]
    pool: Int[np.ndarray, " k"]


class TeacherSplits(NamedTuple):
    """Row indices of the teacher's parts (each (K,) int64, disjoint).

    Attributes:
      train: rows the teacher is trained on.
      validation: rows for the teacher's early stopping.
    """

    train: Int[np.ndarray, " k"]
    validation: Int[np.ndarray, " k"]


class ProtocolSplits(NamedTuple):
    """Teacher and student splits of one data set under the SMaT protocol (disjoint parts).

    Attributes:
      teacher_train: rows the teacher is trained on.
      teacher_validation: rows for the teacher's early stopping.
      student: the student's parts of the remaining rows (`StudentSplits`).
    """

    teacher_train: Int[np.ndarray, " k"]
    teacher_validation: Int[np.ndarray, " k"]
    student: StudentSplits


def _check_count(name: str, value: object, *, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_fraction(name: str, value: float) -> float:
    if not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def permutation(num_rows: int, *, seed: int) -> Int[np.ndarray, " n"]:
    """The seeded random order of `num_rows` rows that all splits in this module slice.

    Args:
      num_rows: N.
      seed: a non-negative int.

    Returns:
      (N,) int64, a permutation of 0..N-1.

    Raises:
      TypeError / ValueError: num_rows or seed is not a non-negative int.
    """
    num_rows = _check_count("num_rows", num_rows, minimum=0)
    seed = _check_count("seed", seed, minimum=0)
    return np.random.default_rng(seed).permutation(num_rows).astype(np.int64)


def _part_size(name: str, fraction: float, n: int) -> int:
    size = round(fraction * n)
    if fraction > 0 and size == 0:
        raise ValueError(f"{name}={fraction} of {n} rows is an empty split; use more data or a "
                         "larger fraction")
    return size


def train_validation_test_split(
    num_rows: int, *, seed: int, validation_fraction: float = 0.1, test_fraction: float = 0.1,
) -> Splits:
    """Split N rows into train / validation / test at random, deterministically from `seed`.

    Sizes: validation = round(validation_fraction * N), test = round(test_fraction * N),
    train = the rest. A fraction of exactly 0 gives an intentionally empty part.

    Args:
      num_rows: N, the number of rows.
      seed: a non-negative int; the same seed gives the same split.
      validation_fraction: fraction of rows for validation, in [0, 1).
      test_fraction: fraction of rows for test, in [0, 1).

    Returns:
      `Splits` of disjoint (K,) int64 index arrays covering all N rows.

    Raises:
      ValueError: fractions outside [0, 1) or summing to >= 1, or a non-zero fraction that
        leaves its part (or train) empty.
    """
    validation_fraction = _check_fraction("validation_fraction", validation_fraction)
    test_fraction = _check_fraction("test_fraction", test_fraction)
    if validation_fraction + test_fraction >= 1.0:
        raise ValueError(f"validation_fraction + test_fraction must be < 1, got "
                         f"{validation_fraction} + {test_fraction}")
    order = permutation(num_rows, seed=seed)
    n_valid = _part_size("validation_fraction", validation_fraction, num_rows)
    n_test = _part_size("test_fraction", test_fraction, num_rows)
    n_train = num_rows - n_valid - n_test
    if n_train < 1:
        raise ValueError(f"no training rows left: {num_rows} rows, {n_valid} validation, "
                         f"{n_test} test")
    return Splits(train=order[:n_train], validation=order[n_train:n_train + n_valid],
                  test=order[n_train + n_valid:])


def _student_parts(order: np.ndarray, *, num_examples: int, validation_size: int,
                   test_size: int) -> StudentSplits:
    num_examples = _check_count("the student size", num_examples, minimum=1)
    validation_size = _check_count("student_validation_size", validation_size, minimum=1)
    test_size = _check_count("student_test_size", test_size, minimum=1)
    n = order.shape[0]
    pool_size = n - validation_size - test_size
    if pool_size < 1:
        raise ValueError(f"the student data has {n} rows, not enough for "
                         f"student_validation_size={validation_size} + "
                         f"student_test_size={test_size} and a non-empty pool")
    if num_examples > pool_size:
        raise ValueError(f"a student size of {num_examples} is larger than the student pool of "
                         f"{pool_size} rows ({n} student rows minus {validation_size} "
                         f"validation and {test_size} test); choose a size <= {pool_size}")
    pool = order[:pool_size]
    return StudentSplits(train=pool[:num_examples], validation=order[pool_size:n - test_size],
                         test=order[n - test_size:], pool=pool)


def student_split(
    num_rows: int, *, seed: int, num_examples: int, student_validation_size: int,
    student_test_size: int,
) -> StudentSplits:
    """Carve the student's parts out of data the teacher never saw (SMaT protocol).

    Use this when the teacher has its own source split, e.g. IMDB: teacher on `train`, the
    student's pool, validation and test from `test` (paper §5: student sizes 500 / 1,000 /
    2,000; authors' code: validation 1,250, test 2,500).

    Args:
      num_rows: N, rows of the student's source.
      seed: a non-negative int.
      num_examples: the student training size (the pool is truncated to it).
      student_validation_size: rows of student validation.
      student_test_size: rows of student test.

    Returns:
      `StudentSplits` of disjoint int64 index arrays into the N rows.

    Raises:
      ValueError: num_examples larger than the pool (both numbers in the message), or sizes
        that leave no pool.
    """
    order = permutation(num_rows, seed=seed)
    return _student_parts(order, num_examples=num_examples,
                          validation_size=student_validation_size, test_size=student_test_size)


def smat_split(
    num_rows: int, *, seed: int, num_examples: int, student_validation_size: int,
    student_test_size: int, teacher_fraction: float = 0.5,
    teacher_validation_fraction: float = 0.1,
) -> ProtocolSplits:
    """Split one data set into teacher and student parts under the SMaT protocol.

    The seeded permutation's first round(teacher_fraction * N) rows go to the teacher
    (of which round(teacher_validation_fraction * that) are its validation set); the
    remaining rows are the student's data, split as in `student_split`.

    Args:
      num_rows: N.
      seed: a non-negative int.
      num_examples: the student training size.
      student_validation_size: rows of student validation.
      student_test_size: rows of student test.
      teacher_fraction: fraction of rows for the teacher, in (0, 1).
      teacher_validation_fraction: fraction of the teacher's rows for its validation, [0, 1).

    Returns:
      `ProtocolSplits`, all parts disjoint.

    Example:
      >>> p = smat_split(10_568, seed=0, num_examples=2_000, student_validation_size=500,
      ...                student_test_size=2_000)
      >>> len(p.teacher_train), len(p.teacher_validation), len(p.student.train)
      (4756, 528, 2000)

    Raises:
      ValueError: num_examples larger than the student pool, fractions out of range, or an
        empty part.
    """
    order = permutation(num_rows, seed=seed)
    teacher = _teacher_parts(order, teacher_fraction=teacher_fraction,
                             teacher_validation_fraction=teacher_validation_fraction)
    n_teacher = len(teacher.train) + len(teacher.validation)
    student = _student_parts(order[n_teacher:], num_examples=num_examples,
                             validation_size=student_validation_size,
                             test_size=student_test_size)
    return ProtocolSplits(teacher_train=teacher.train, teacher_validation=teacher.validation,
                          student=student)


def teacher_split(num_rows: int, *, seed: int, teacher_fraction: float = 0.5,
                  teacher_validation_fraction: float = 0.1) -> TeacherSplits:
    """The teacher's parts of a split of its own: `smat_split`'s teacher rule alone.

    Use it with `student_split` when the students' data is another split (the paper's
    IMDB layout): the seeded permutation's first round(teacher_fraction * N) rows, of which
    the last round(teacher_validation_fraction * that) are the teacher's validation set.

    Example:
      >>> parts = teacher_split(1_000, seed=0, teacher_fraction=0.2)
      >>> len(parts.train), len(parts.validation)
      (180, 20)

    Raises:
      ValueError: fractions out of range, or an empty part.
    """
    return _teacher_parts(permutation(num_rows, seed=seed), teacher_fraction=teacher_fraction,
                          teacher_validation_fraction=teacher_validation_fraction)


def _teacher_parts(order: np.ndarray, *, teacher_fraction: float,
                   teacher_validation_fraction: float) -> TeacherSplits:
    # 1.0 is a whole source for the teacher, when the students' rows come from another
    # (teacher_split); smat_split then finds no student rows and says so
    if not isinstance(teacher_fraction, numbers.Real) or not 0.0 < float(teacher_fraction) <= 1:
        raise ValueError(f"teacher_fraction must be a number in (0, 1], got "
                         f"{teacher_fraction!r}")
    teacher_validation_fraction = _check_fraction("teacher_validation_fraction",
                                                  teacher_validation_fraction)
    n_teacher = _part_size("teacher_fraction", teacher_fraction, len(order))
    if n_teacher < 1:
        raise ValueError(f"teacher_fraction must be > 0, got {teacher_fraction}")
    n_teacher_valid = _part_size("teacher_validation_fraction", teacher_validation_fraction,
                                 n_teacher)
    if n_teacher_valid >= n_teacher:
        raise ValueError(f"teacher_validation_fraction={teacher_validation_fraction} leaves no "
                         f"teacher training rows out of {n_teacher}")
    teacher = order[:n_teacher]
    return TeacherSplits(train=teacher[:n_teacher - n_teacher_valid],
                         validation=teacher[n_teacher - n_teacher_valid:])


def students_from_teacher_rows(splits: ProtocolSplits, *, seed: int,
                               num_examples: int) -> ProtocolSplits:
    """`splits` with the students' pool drawn from the teacher's training rows.

    The paper's CIFAR-100 and MLQE-PE protocol (Fernandes et al., 2022, §5.2-5.3: "we
    reuse the same training set for both the teacher and student, sampling a subset for
    the latter"): the pool is a seeded permutation of ``teacher_train`` and the students
    train on its first `num_examples` rows; their validation and test parts stay the
    held-out rows the teacher never saw.

    Example:
      >>> p = smat_split(1_000, seed=0, num_examples=1, student_validation_size=100,
      ...                student_test_size=200)
      >>> q = students_from_teacher_rows(p, seed=0, num_examples=300)
      >>> len(q.student.train), set(q.student.pool) == set(p.teacher_train)
      (300, True)

    Raises:
      ValueError: num_examples larger than the teacher's training rows.
    """
    num_examples = _check_count("the student size", num_examples, minimum=1)
    rows = splits.teacher_train
    if num_examples > len(rows):
        raise ValueError(f"a student size of {num_examples} is larger than the "
                         f"{len(rows)} teacher training rows the students' pool is drawn "
                         f"from; choose a size <= {len(rows)}")
    pool = rows[permutation(len(rows), seed=seed)]
    return splits._replace(student=splits.student._replace(train=pool[:num_examples],
                                                           pool=pool))
