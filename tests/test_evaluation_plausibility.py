"""Tests for smat.evaluation.plausibility: hand cases and sklearn parity."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, roc_auc_score

from smat.evaluation import plausibility as P


@st.composite
def scored_rationales(draw):
    # One fixed shape keeps recompilation out of the loop; the random mask varies lengths.
    batch, n = 4, 8
    size = batch * n
    values = draw(st.sampled_from([st.integers(-2, 2), st.integers(-500, 500)]))
    scores = np.asarray(draw(st.lists(values, min_size=size, max_size=size)), np.float32) / 4
    gold = np.asarray(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    mask = np.asarray(draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    return scores.reshape(batch, n), gold.reshape(batch, n), mask.reshape(batch, n)


def test_roc_auc_hand_computed_with_ties():
    r = P.roc_auc(jnp.asarray([[0.9, 0.1, 0.5, 0.5]]), jnp.asarray([[True, False, True, False]]),
                  jnp.ones((1, 4), bool))
    assert float(r.values[0]) == pytest.approx(3.5 / 4)


def test_roc_auc_skips_single_class_examples_and_masks():
    scores = jnp.asarray([[0.9, 0.1, 0.3], [0.9, 0.1, 0.3], [0.2, 0.8, 0.3], [0.5, 0.5, 0.5]])
    gold = jnp.asarray([[1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 0, 0]])
    mask = jnp.asarray([[1, 1, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0]])
    r = P.roc_auc(scores, gold, mask)
    # Row 0: only the first two tokens count -> AUC 1. Rows 1-3: one class only.
    assert r.valid.tolist() == [True, False, False, False]
    assert r.values.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert float(r.mean()) == 1.0 and int(r.num_excluded()) == 3


@given(scored_rationales())
@settings(max_examples=50, deadline=None)
def test_roc_auc_matches_sklearn(data):
    scores, gold, mask = data
    r = P.roc_auc(scores, gold, mask)
    for i in range(scores.shape[0]):
        y, s = gold[i][mask[i]], scores[i][mask[i]]
        defined = 0 < y.sum() < y.size
        assert bool(r.valid[i]) == defined
        if defined:
            assert float(r.values[i]) == pytest.approx(roc_auc_score(y, s), abs=1e-6)


def test_average_precision_hand_computed():
    r = P.average_precision(jnp.asarray([[0.9, 0.8, 0.1], [0.5, 0.5, 0.5], [1.0, 2.0, 3.0]]),
                            jnp.asarray([[1, 0, 1], [1, 0, 0], [0, 0, 0]]),
                            jnp.ones((3, 3), bool))
    # Row 0: 0.5 * 1 + 0.5 * 2/3. Row 1: all tied -> precision 1/3 at the only threshold.
    np.testing.assert_allclose(r.values, [5 / 6, 1 / 3, 0.0], rtol=1e-6)
    assert r.valid.tolist() == [True, True, False]


@given(scored_rationales())
@settings(max_examples=50, deadline=None)
def test_average_precision_matches_sklearn(data):
    scores, gold, mask = data
    r = P.average_precision(scores, gold, mask)
    for i in range(scores.shape[0]):
        y, s = gold[i][mask[i]], scores[i][mask[i]]
        assert bool(r.valid[i]) == (y.sum() > 0)
        if y.sum() > 0:
            assert float(r.values[i]) == pytest.approx(average_precision_score(y, s), abs=1e-6)


def test_chunked_equals_unchunked():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 3, (9, 6)).astype(np.float32)
    gold = rng.random((9, 6)) < 0.4
    mask = rng.random((9, 6)) < 0.9
    for fn in (P.roc_auc, P.average_precision):
        np.testing.assert_allclose(fn(scores, gold, mask, batch_size=None).values,
                                   fn(scores, gold, mask, batch_size=2).values, atol=1e-7)


def test_token_f1_hand_computed():
    scores = jnp.asarray([[0.9, 0.8, 0.1, 0.0], [0.1, 0.2, 0.3, 0.4]])
    gold = jnp.asarray([[1, 0, 1, 0], [0, 0, 0, 0]])
    r = P.token_f1(scores, gold, jnp.ones((2, 4), bool), k=2)
    assert r.true_positives.tolist() == [1, 0]
    assert r.num_predicted.tolist() == [2, 2] and r.num_gold.tolist() == [2, 0]
    assert r.f1.tolist() == [0.5, 0.0]
    assert float(r.precision) == pytest.approx(0.25) and float(r.recall) == pytest.approx(0.5)
    assert float(r.micro_f1) == pytest.approx(1 / 3)
    assert float(r.macro_f1) == pytest.approx(0.5)  # only the example with gold tokens


def test_token_f1_per_example_k_and_clipping():
    scores = jnp.asarray([[0.9, 0.8, 0.7], [0.9, 0.8, 0.7]])
    gold = jnp.asarray([[1, 1, 0], [1, 0, 0]])
    mask = jnp.asarray([[1, 1, 1], [1, 0, 0]])
    r = P.token_f1(scores, gold, mask, k=jnp.asarray([2, 5]))
    assert r.num_predicted.tolist() == [2, 1]  # k=5 clipped to the one valid token
    assert r.f1.tolist() == [1.0, 1.0]
    zero = P.token_f1(scores, gold, mask, k=0)
    assert zero.num_predicted.tolist() == [0, 0] and float(zero.micro_f1) == 0.0


def _spans(x):
    out, start = [], None
    for i, v in enumerate(list(x) + [False]):
        if v and start is None:
            start = i
        if not v and start is not None:
            out.append((start, i))
            start = None
    return out


def _iou_reference(pred, gold, threshold):
    ps, gs = _spans(pred), _spans(gold)
    tp = 0
    for p in ps:
        best = 0.0
        for g in gs:
            a, b = set(range(*p)), set(range(*g))
            best = max(best, len(a & b) / len(a | b))
        tp += best >= threshold
    return tp, len(ps), len(gs)


def test_iou_f1_hand_computed():
    scores = jnp.asarray([[0.9, 0.8, 0.7, 0.0, 0.6, 0.0, 0.0, 0.0]])
    gold = jnp.asarray([[1, 1, 0, 0, 0, 0, 1, 1]])
    r = P.iou_f1(scores, gold, jnp.ones((1, 8), bool), k=4)
    # Predicted spans [0,3) and [4,5); gold [0,2) and [6,8). IOU 2/3 and 0 -> 1 match.
    assert (int(r.true_positives[0]), int(r.num_predicted[0]), int(r.num_gold[0])) == (1, 2, 2)
    assert float(r.micro_f1) == pytest.approx(0.5)
    strict = P.iou_f1(scores, gold, jnp.ones((1, 8), bool), k=4, threshold=0.7)
    assert int(strict.true_positives[0]) == 0


def test_iou_f1_mask_splits_spans():
    scores = jnp.asarray([[0.9, 5.0, 0.8]])
    gold = jnp.asarray([[1, 0, 1]])
    r = P.iou_f1(scores, gold, jnp.asarray([[1, 0, 1]]), k=2)
    assert (int(r.true_positives[0]), int(r.num_predicted[0]), int(r.num_gold[0])) == (2, 2, 2)


@given(scored_rationales(), st.integers(0, 10), st.sampled_from([0.5, 0.3, 1.0]))
@settings(max_examples=50, deadline=None)
def test_iou_f1_matches_reference(data, k, threshold):
    scores, gold, mask = data
    r = P.iou_f1(scores, gold, mask, k=k, threshold=threshold)
    for i in range(scores.shape[0]):
        idx = np.flatnonzero(mask[i])
        top = idx[np.argsort(-scores[i][idx], kind="stable")[:k]]
        pred = np.zeros(scores.shape[1], bool)
        pred[top] = True
        expected = _iou_reference(pred, gold[i] & mask[i], threshold)
        got = (int(r.true_positives[i]), int(r.num_predicted[i]), int(r.num_gold[i]))
        assert got == expected


def test_ground_truth_overlap_hand_computed():
    scores = jnp.asarray([[0.1, 0.9, 0.2], [0.5, 0.5, 0.1], [0.3, 0.3, 0.1], [1.0, 2.0, 3.0]])
    gold = jnp.asarray([[0, 1, 0], [1, 0, 0], [1, 1, 0], [0, 0, 0]])
    r = P.ground_truth_overlap(scores, gold, jnp.ones((4, 3), bool))
    # Row 1 ties the gold token with a non-gold one: no credit.
    assert r.values.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert r.valid.tolist() == [True, True, True, False]


def test_ground_truth_overlap_ignores_masked_tokens():
    r = P.ground_truth_overlap(jnp.asarray([[0.5, 9.0, 0.1]]), jnp.asarray([[1, 0, 0]]),
                               jnp.asarray([[1, 0, 1]]))
    assert r.values.tolist() == [1.0]


def test_mean_rank_hand_computed():
    scores = jnp.asarray([[0.1, 0.9, 0.2, 0.3], [0.4, 0.4, 0.4, 0.4], [0.9, 0.1, 0.8, 0.0]])
    gold = jnp.asarray([[0, 0, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0]])
    mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 0]])
    r = P.mean_rank(scores, gold, mask)
    assert r.rank.tolist() == [3, 4, 2]  # constant scores: the whole input is needed
    np.testing.assert_allclose(r.fraction, [0.75, 1.0, 2 / 3], rtol=1e-6)
    assert float(r.mean_rank) == pytest.approx(3.0)
    none = P.mean_rank(scores, jnp.zeros((3, 4), bool), mask)
    assert none.valid.tolist() == [False] * 3 and float(none.mean_fraction) == 0.0


def test_ground_truth_metrics_summarise_each_explainer_over_valid_rows():
    gold = jnp.asarray([[0, 1, 0], [1, 0, 0], [0, 0, 0]], bool)
    mask = jnp.ones((3, 3), bool)
    perfect = jnp.asarray([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.2, 0.1, 0.0]])
    report = P.ground_truth_metrics({"perfect": perfect, "reversed": -perfect}, gold, mask)
    assert report["perfect"]["num_valid"] == 2  # the row without a ground truth is left out
    assert report["perfect"]["overlap"] == {"mean": 1.0, "low": 1.0, "high": 1.0}
    assert report["perfect"]["mean_rank"]["mean"] == 1.0
    assert report["reversed"]["overlap"]["mean"] == 0.0
    assert report["reversed"]["mean_rank_fraction"]["mean"] == pytest.approx(1.0)


@given(scored_rationales())
@settings(max_examples=40, deadline=None)
def test_gt_metrics_agree_with_brute_force(data):
    scores, gold, mask = data
    overlap = P.ground_truth_overlap(scores, gold, mask)
    rank = P.mean_rank(scores, gold, mask)
    for i in range(scores.shape[0]):
        g, s = gold[i][mask[i]], scores[i][mask[i]]
        if not g.any():
            assert not bool(overlap.valid[i]) and not bool(rank.valid[i])
            continue
        expected_rank = int(np.sum(s >= s[g].min()))
        assert int(rank.rank[i]) == expected_rank
        assert float(overlap.values[i]) == float(expected_rank == g.sum())


def test_word_level_scores_sum_sub_words():
    scores = jnp.asarray([[0.0, 1.0, 2.0, 3.0, 0.5], [0.0, 4.0, 0.0, 0.0, 0.0]])
    word_ids = jnp.asarray([[-1, 0, 0, 1, -1], [-1, 0, -1, -1, -1]])
    w, m = P.word_level_scores(scores, word_ids, num_words=3)
    assert w.tolist() == [[3.0, 3.0, 0.0], [4.0, 0.0, 0.0]]
    assert m.tolist() == [[True, True, False], [True, False, False]]
    # The word-level arrays plug into every metric.
    gold = jnp.asarray([[True, False, False], [True, False, False]])
    assert P.mean_rank(w, gold, m).rank.tolist() == [2, 1]


def test_word_level_scores_errors():
    with pytest.raises(ValueError, match="word index 3 but num_words=2"):
        P.word_level_scores(jnp.zeros((1, 2)), jnp.asarray([[3, 0]]), num_words=2)
    with pytest.raises(ValueError, match="num_words must be >= 1"):
        P.word_level_scores(jnp.zeros((1, 2)), jnp.asarray([[0, 0]]), num_words=0)


def test_shape_and_threshold_errors():
    with pytest.raises(ValueError, match="gold has shape"):
        P.roc_auc(jnp.zeros((2, 3)), jnp.zeros((2, 4)), jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="threshold must be in"):
        P.iou_f1(jnp.zeros((1, 3)), jnp.zeros((1, 3)), jnp.ones((1, 3)), k=1, threshold=0.0)


def test_docstring_examples():
    import doctest

    import jax
    import jax.numpy as jnp

    result = doctest.testmod(P, extraglobs={"jax": jax, "jnp": jnp})
    assert result.attempted > 0 and result.failed == 0
