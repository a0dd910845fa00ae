"""Tests for smat.evaluation.roar (masking op, Eq. 3, plot) and the synthetic validation of
Recursive ROAR (smat.evaluation.roar_synthetic)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from smat.evaluation.roar import (
    mask_input_ids,
    maskable_tokens,
    num_to_mask,
    parse_ratios,
    plot_roar,
    roar_faithfulness,
    roar_mask,
    summarize_faithfulness,
)
from smat.evaluation.roar_synthetic import (
    ground_truth_curve,
    make_synthetic_problem,
    roar_curve,
)
from tests.helpers import synthetic_encoded

# ------------------------------------------------------------------ masking op


def test_parse_ratios_reads_percent_ranges_and_lists():
    assert parse_ratios("0:100:20") == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert parse_ratios("0,50,100") == (0.0, 0.5, 1.0)
    with pytest.raises(ValueError, match="start:stop:step"):
        parse_ratios("0-100")
    with pytest.raises(ValueError, match="end at 1.0"):
        parse_ratios("0:80:20")

SPECIAL = np.array([[True, False, False, False, False, True, True]])  # [CLS] 4 tokens [SEP] pad
ATTENTION = np.array([[1, 1, 1, 1, 1, 1, 0]])


def _mask(scores, masked=None, **kwargs):
    maskable = maskable_tokens(ATTENTION, SPECIAL)
    return np.asarray(roar_mask(jnp.asarray([scores], jnp.float32), maskable,
                                None if masked is None else np.asarray([masked]), **kwargs))[0]


def test_ties_are_broken_by_position():
    assert _mask([0, 1, 1, 1, 1, 0, 0], count=2).tolist() == [0, 1, 1, 0, 0, 0, 0]
    assert _mask([0, 1, 5, 5, 1, 0, 0], count=1).tolist() == [0, 0, 1, 0, 0, 0, 0]


def test_special_and_padding_tokens_are_never_masked():
    scores = [100, 1, 2, 3, 4, 100, 100]
    assert _mask(scores, count=2).tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert _mask(scores, ratio=1.0).tolist() == [0, 1, 1, 1, 1, 0, 0]
    assert _mask(scores, count=99).tolist() == [0, 1, 1, 1, 1, 0, 0]  # clipped to n
    # A special token marked as masked is still not masked.
    assert _mask(scores, masked=[1, 0, 0, 0, 0, 0, 1], count=1).tolist() == [0, 0, 0, 0, 1, 0, 0]


def test_already_masked_tokens_rank_first_and_stay_masked():
    scores = [0, 9, 8, 7, 1, 0, 0]
    previous = [0, 0, 0, 0, 1, 0, 0]  # the lowest-scored token was masked before
    assert _mask(scores, previous, count=2).tolist() == [0, 1, 0, 0, 1, 0, 0]
    # Fewer tokens asked than already masked: they all stay masked, nothing is added.
    assert _mask(scores, [0, 0, 1, 0, 1, 0, 0], count=1).tolist() == [0, 0, 1, 0, 1, 0, 0]


def test_ratio_zero_and_one_and_rounding():
    scores = [0, 4, 3, 2, 1, 0, 0]
    assert _mask(scores, ratio=0.0).tolist() == [0] * 7
    assert _mask(scores, ratio=0.5).tolist() == [0, 1, 1, 0, 0, 0, 0]
    assert _mask(scores, ratio=0.3).tolist() == [0, 1, 0, 0, 0, 0, 0]  # 1.2 -> 1
    n = jnp.array([10, 5, 3, 0])
    assert num_to_mask(n, ratio=0.3).tolist() == [3, 2, 1, 0]  # exact: 0.3 * 10 = 3; 1.5 -> 2
    assert num_to_mask(n, ratio=0.5).tolist() == [5, 3, 2, 0]  # half up
    assert num_to_mask(n, count=jnp.array([4, 9, 1, 2])).tolist() == [4, 5, 1, 0]


def test_count_mode_is_traceable_and_masks_are_nested(key):
    maskable = jnp.asarray(synthetic_encoded(8, seed=1).special_tokens_mask == 0)
    scores = jax.random.normal(key, maskable.shape)
    masks = jax.jit(jax.vmap(lambda k: roar_mask(scores, maskable, count=k)))(jnp.arange(17))
    masks = np.asarray(masks)  # (17, B, T)
    assert np.all(masks[:-1] <= masks[1:])  # nested
    assert np.array_equal(masks.sum(axis=2)[:, 0],
                          np.minimum(np.arange(17), int(maskable[0].sum())))
    assert not np.any(masks & ~np.asarray(maskable)[None])
    by_ratio = [np.asarray(roar_mask(scores, maskable, ratio=r)) for r in (0.2, 0.5, 0.8)]
    assert all(np.all(a <= b) for a, b in zip(by_ratio, by_ratio[1:], strict=False))


def test_mask_input_ids_and_errors():
    ids = np.array([[2, 11, 12, 3]])
    out = mask_input_ids(ids, np.array([[False, True, False, False]]), mask_token_id=5)
    assert out.tolist() == [[2, 5, 12, 3]]
    with pytest.raises(ValueError, match="exactly one of ratio= or count="):
        _mask([0] * 7, ratio=0.5, count=1)
    with pytest.raises(ValueError, match=r"ratio must be in \[0, 1\]"):
        _mask([0] * 7, ratio=1.5)
    with pytest.raises(ValueError, match="masked has shape"):
        roar_mask(np.zeros((1, 7)), np.ones((1, 7), bool), np.ones((1, 6), bool), count=1)


# ------------------------------------------------------------------ Eq. 3


def _eq3_reference(p, b, x):
    p, b, x = map(np.asarray, (p, b, x))
    num = np.sum(0.5 * np.diff(x) * ((b - p)[:-1] + (b - p)[1:]))
    den = np.sum(0.5 * np.diff(x) * ((b - b[-1])[:-1] + (b - b[-1])[1:]))
    return num / den


def test_faithfulness_matches_eq3_and_clips():
    x = [0.0, 0.2, 0.5, 1.0]
    b = [0.9, 0.8, 0.7, 0.5]
    p = [0.9, 0.7, 0.6, 0.5]
    r = roar_faithfulness([p, [0.9, 1.0, 1.0, 0.9], [0.9, 0.3, 0.2, 0.5]], [b, b, b], x)
    assert float(r.values[0]) == pytest.approx(_eq3_reference(p, b, x), rel=1e-5)
    assert 0 < float(r.values[0]) < 1
    assert _eq3_reference([0.9, 1.0, 1.0, 0.9], b, x) < -1 and float(r.values[1]) == -1.0
    assert _eq3_reference([0.9, 0.3, 0.2, 0.5], b, x) > 1 and float(r.values[2]) == 1.0
    assert np.all(np.asarray(r.defined))


def test_faithfulness_flags_near_zero_denominator():
    x = [0.0, 0.5, 1.0]
    flat = [0.5, 0.5, 0.5]  # the random baseline never rises above the 100% model
    r = roar_faithfulness([[0.5, 0.4, 0.5], [0.9, 0.6, 0.5]],
                          [flat, [0.9, 0.8, 0.5]], x)
    assert np.asarray(r.defined).tolist() == [False, True]
    assert float(r.values[0]) == 0.0 and np.all(np.isfinite(np.asarray(r.values)))
    summary = summarize_faithfulness(r)
    assert summary.num_defined == 1 and summary.num_undefined == 1
    assert summary.mean == pytest.approx(float(r.values[1]))
    none = summarize_faithfulness(roar_faithfulness([[0.5, 0.4, 0.5]], [flat], x))
    assert none.num_defined == 0 and np.isnan(none.mean)


def test_faithfulness_summary_ci_and_shape_errors():
    x = [0.0, 0.5, 1.0]
    b = [[0.9, 0.8, 0.5]] * 4
    p = [[0.9, 0.6, 0.5], [0.9, 0.7, 0.5], [0.9, 0.65, 0.5], [0.9, 0.55, 0.5]]
    summary = summarize_faithfulness(roar_faithfulness(p, b, x))
    assert summary.low <= summary.mean <= summary.high and summary.num_defined == 4
    with pytest.raises(ValueError, match=r"performance must have shape \(seeds, 3\)"):
        roar_faithfulness([[0.9, 0.5]], [[0.9, 0.5]], x)
    with pytest.raises(ValueError, match="must start at 0.0 and end at 1.0"):
        roar_faithfulness([[0.9, 0.5]], [[0.9, 0.5]], [0.0, 0.5])


def test_plot_roar(tmp_path):
    x = [0.0, 0.5, 1.0]
    b = np.array([[0.9, 0.8, 0.5], [0.88, 0.75, 0.5]])
    fig = plot_roar({"gradient": b - 0.1}, b, x, metric="accuracy", path=tmp_path / "r.png")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["gradient", "random", "100% masked"]
    assert fig.axes[0].get_lines()[2].get_ydata()[0] == pytest.approx(0.5)
    assert (tmp_path / "r.png").stat().st_size > 0
    with pytest.raises(ValueError, match="curve 'gradient' has shape"):
        plot_roar({"gradient": b[:1]}, b, x)


# ------------------------------------------------------------------ synthetic validation


def test_recursive_roar_recovers_the_ground_truth_order_of_eq1():
    """Madsen et al. (2022) §3.3 / Figure 3: with |weights| as importance, Recursive ROAR
    masks the 4 informative (redundant) features first, like the ground truth; ROAR,
    ranking once by the weights of the unmasked model, does not."""
    roar_first4, recursive_first4, gap = [], [], []
    for seed in range(6):
        problem = make_synthetic_problem(jax.random.key(seed))
        informative = np.asarray(problem.informative)
        plain = roar_curve(problem, recursive=False)
        recursive = roar_curve(problem, recursive=True)
        truth = ground_truth_curve(problem)
        roar_first4.append(np.array_equal(np.asarray(plain.masked[4]), informative))
        recursive_first4.append(np.array_equal(np.asarray(recursive.masked[4]), informative))
        assert float(recursive.accuracy[4]) == pytest.approx(float(truth.accuracy[4]))
        assert float(truth.accuracy[0]) > 0.75 and float(truth.accuracy[4]) < 0.55
        gap.append(float(plain.accuracy[4] - recursive.accuracy[4]))
        assert np.all(np.diff(np.asarray(recursive.masked).sum(axis=1)) == 1)
    assert all(recursive_first4)
    assert sum(roar_first4) <= 4  # ROAR misses the informative set on some problems
    assert np.mean(gap) > 0.02  # ...so its curve stays above Recursive ROAR's
