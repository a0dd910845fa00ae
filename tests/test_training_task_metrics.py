import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from smat.training.task_metrics import (
    accuracy,
    macro_f1,
    pearson,
    primary_metric,
    rmse,
    task_metrics,
)


def test_accuracy_and_rmse_by_hand():
    assert accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    assert rmse([1.0, 2.0], [1.0, 4.0]) == pytest.approx(np.sqrt(2.0))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=40))
def test_macro_f1_matches_sklearn(pairs):
    pred, ref = map(np.array, zip(*pairs, strict=True))
    expected = f1_score(ref, pred, average="macro", labels=np.union1d(pred, ref))
    assert macro_f1(pred, ref) == pytest.approx(expected)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5)), min_size=3, max_size=40))
def test_pearson_matches_scipy(pairs):
    x, y = map(np.array, zip(*pairs, strict=True))
    if np.ptp(x) < 1e-6 or np.ptp(y) < 1e-6:
        assert pearson(np.zeros(3), np.arange(3.0)) == 0.0
        return
    assert pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y)[0], abs=1e-9)


def test_task_metrics_and_errors():
    assert set(task_metrics("classification", [1], [1])) == {"accuracy", "macro_f1"}
    assert set(task_metrics("regression", [1.0, 2.0], [1.0, 3.0])) == {"pearson", "rmse"}
    assert primary_metric("regression") == "pearson"
    with pytest.raises(ValueError, match="unknown task 'ranking'"):
        task_metrics("ranking", [1], [1])
    with pytest.raises(ValueError, match="empty split"):
        accuracy([], [])
    with pytest.raises(ValueError, match=r"shapes \(2,\) and \(3,\)"):
        accuracy([1, 2], [1, 2, 3])
