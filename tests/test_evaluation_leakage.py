"""The leakage probe reads a label planted in where explanations put their mass, and only
there: not in explanations whose mass ignores the label, nor in the length alone.

Mutation record: features from the signed scores instead of their absolute values fail the
first test; features without the per-position shares (every token in one bin, no first /
last token) fail both."""

import numpy as np
import pytest

from smat.evaluation.leakage import explanation_features, length_features, probe_accuracy


def _explanations(n=300, t=20, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, t, n)
    mask = np.arange(t)[None, :] < lengths[:, None]
    labels = rng.integers(0, 2, n)
    return rng.random((n, t)) * mask, mask, labels


def test_features_are_position_and_mass_only():
    scores, mask, _ = _explanations()
    features = explanation_features(scores, mask, bins=4)
    assert features.shape == (300, 4 + 5)
    np.testing.assert_allclose(features[:, 2:6].sum(axis=1), 1.0)  # the bins hold all mass
    # the same mass at the same positions gives the same features, whatever the sign
    np.testing.assert_allclose(explanation_features(-3 * scores, mask, bins=4), features)
    # an explanation with no mass is spread evenly: its entropy is the maximum
    assert explanation_features(np.zeros((1, 6)), np.ones((1, 6), bool))[0, -2] == (
        pytest.approx(1.0))
    with pytest.raises(ValueError, match="row 0 has no real tokens"):
        explanation_features(np.zeros((1, 6)), np.zeros((1, 6), bool))
    with pytest.raises(ValueError, match="must be the same"):
        explanation_features(scores, mask[:, :5])


def test_edge_tokens_give_the_share_of_each_first_and_last_word():
    """Rows of 6 and 3 real tokens, 2 edge tokens: the shares on positions 1, 2 and on
    positions length-2, length-3 after the other features; 0 where a row has no such
    word between its first and last token."""
    scores = np.array([[1, 2, 3, 4, 5, 5, 0], [2, 1, 1, 0, 0, 0, 0]], float)
    mask = scores > 0
    plain = explanation_features(scores, mask, bins=2)
    edged = explanation_features(scores, mask, bins=2, edge_tokens=2)
    np.testing.assert_array_equal(edged[:, :plain.shape[1]], plain)
    np.testing.assert_allclose(edged[0, plain.shape[1]:], [2 / 20, 3 / 20, 5 / 20, 4 / 20])
    np.testing.assert_allclose(edged[1, plain.shape[1]:], [1 / 4, 0, 1 / 4, 0])
    with pytest.raises(ValueError, match="edge_tokens must be >= 0"):
        explanation_features(scores, mask, edge_tokens=-1)


def test_probe_reads_a_planted_positional_label_and_nothing_else():
    scores, mask, labels = _explanations()
    honest = probe_accuracy(explanation_features(scores, mask), labels)
    leaky = scores.copy()
    leaky[:, 0] += 5 * labels  # class 1 puts its mass on the first token
    leaked = probe_accuracy(explanation_features(leaky, mask), labels)
    length = probe_accuracy(length_features(mask), labels)
    assert leaked["accuracy"] > 0.95 and leaked["p_value"] < 1e-10
    assert honest["accuracy"] < 0.6 and honest["p_value"] > 0.05
    assert length["accuracy"] < 0.6 and len(leaked["fold_accuracies"]) == 5
    # a subtler leak, in where the mass sits late in the sequence
    late = scores * np.where(labels[:, None] == 1,
                             1 + (np.arange(20)[None, :] > mask.sum(1)[:, None] // 2), 1)
    assert probe_accuracy(explanation_features(late, mask), labels)["accuracy"] > 0.8
    with pytest.raises(ValueError, match="need folds >= 2"):
        probe_accuracy(explanation_features(scores, mask)[:3], labels[:3])
