import numpy as np
import pytest

from smat.evaluation.cartography import (
    ambiguous_counts,
    cartography,
    group_counts,
    plot_data_map,
)


def test_statistics_and_groups_by_hand(tmp_path):
    # 5 epochs (the paper's), 4 instances: always right, never right, right 2 times, 4 times
    p = np.array([[0.9, 0.1, 0.6, 0.6],
                  [0.8, 0.2, 0.4, 0.7],
                  [1.0, 0.3, 0.6, 0.8],
                  [0.7, 0.0, 0.4, 0.4],
                  [0.6, 0.4, 0.4, 0.9]])
    stats = cartography(p, p > 0.5)
    np.testing.assert_allclose(stats.confidence, [0.8, 0.2, 0.48, 0.68])
    np.testing.assert_allclose(stats.variability, np.std(p, axis=0))  # population std
    np.testing.assert_allclose(stats.closeness, [0.16, 0.16, 0.2496, 0.2176])
    assert stats.correctness.tolist() == [5, 0, 2, 4]
    assert stats.group.tolist() == ["easy", "hard", "ambiguous", "other"]
    assert group_counts(stats.group) == {"easy": 1, "ambiguous": 1, "hard": 1, "other": 1}
    figure = plot_data_map(stats, tmp_path / "map.png")
    assert (tmp_path / "map.png").stat().st_size > 0 and figure.axes[0].get_xlabel() == (
        "variability")


@pytest.mark.parametrize("epochs,band", [(2, [1]), (3, [1, 2]), (4, [2]), (5, [2, 3]),
                                         (10, [4, 5, 6])])
def test_ambiguous_band_generalizes_the_paper_rule(epochs, band):
    assert ambiguous_counts(epochs) == band


def test_bad_dynamics_raise_naming_the_problem():
    with pytest.raises(ValueError, match="at least 2 epochs"):
        cartography(np.full((1, 3), 0.5), np.ones((1, 3), bool))
    with pytest.raises(ValueError, match=r"\(epochs, instances\)"):
        cartography(np.full((2, 3), 0.5), np.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"lie in \[0, 1\]"):
        cartography(np.full((2, 3), 1.5), np.ones((2, 3), bool))
