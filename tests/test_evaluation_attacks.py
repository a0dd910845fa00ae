import numpy as np
import pytest

import baselines
from smat.evaluation import attacks
from smat.evaluation.attacks import (
    attack,
    rank_change,
    top_k_per_row,
    topk_sum_change,
)
from smat.models import functional
from tests.helpers import synthetic_encoded, tiny_classifier


@pytest.fixture(scope="module")
def inputs():
    graphdef, params = functional.split(tiny_classifier(seed=4))
    data = synthetic_encoded(4, seq_len=12, seed=3)
    return baselines.attribution_inputs(graphdef, params, input_ids=data.input_ids,
                                        attention_mask=data.attention_mask,
                                        token_type_ids=data.token_type_ids)


def test_the_thesis_rank_change_example():
    original = np.zeros((1, 16))
    original[0, [12, 3, 7]] = [3.0, 2.0, 1.0]
    adversarial = np.zeros((1, 16))
    adversarial[0, [3, 15, 7]] = [3.0, 2.0, 1.0]
    show = np.ones((1, 16), bool)
    assert float(rank_change(original, adversarial, show, [3])[0]) == pytest.approx(2 / 3)
    # top-3 of the original: 12, 3, 7 -> (3 - 0) + (2 - 3) + (1 - 1)
    assert float(topk_sum_change(original, adversarial, show, [3])[0]) == pytest.approx(2.0)


def test_k_per_row():
    assert top_k_per_row([20, 6, 7]).tolist() == [3, 1, 1]
    assert top_k_per_row([20, 6], k=2).tolist() == [2, 2]
    with pytest.raises(ValueError, match="k=7 for rows of 6 to 20 tokens"):
        top_k_per_row([20, 6], k=7)
    with pytest.raises(ValueError, match=r"fraction must lie in \(0, 1\], got 0"):
        top_k_per_row([20], fraction=0)


@pytest.mark.parametrize("explainer", ["gradient", "input_x_gradient"])
def test_unconstrained_attack_stays_in_the_ball_keeps_the_class_and_moves_the_top_k(
        inputs, explainer):
    f, x, mask = inputs
    result = attack(f, x, mask, explainer=explainer, epsilon=0.5, steps=40,
                    learning_rate=0.5)
    assert np.abs(result.delta).max() <= 0.5 + 1e-6
    assert np.all(result.delta[~np.asarray(mask)] == 0)  # padding is never perturbed
    before = np.argmax(np.asarray(f(x, mask)), axis=-1)
    after = np.argmax(np.asarray(f(x + result.delta, mask)), axis=-1)
    np.testing.assert_array_equal(after, before)
    assert result.rank_change.max() > 0 and result.topk_sum_change.mean() > 0
    assert 1 <= result.steps <= 40


def test_a_zero_learning_rate_leaves_delta_zero_and_the_constrained_objective_runs(inputs):
    f, x, mask = inputs
    still = attack(f, x, mask, explainer="integrated_gradients", steps=5, learning_rate=0.0,
                   ig_steps=2)
    assert np.all(still.delta == 0) and np.all(still.rank_change == 0)
    np.testing.assert_allclose(still.prob_change, 0.0, atol=1e-7)
    assert still.steps == 5  # the step budget ends it before the 20 quiet steps
    # a delta that never moves stops after `patience` quiet steps
    assert attack(f, x, mask, explainer="gradient", steps=100, learning_rate=0.0).steps == 20
    constrained = attack(f, x, mask, explainer="gradient", objective="constrained",
                         epsilon=0.5, steps=30, learning_rate=0.5)
    assert np.abs(constrained.delta).max() <= 0.5 + 1e-6
    assert np.all(constrained.prob_change >= 0)


def test_the_step_budget_and_patience_do_not_compile_another_loop(inputs):
    f, x, mask = inputs
    before = attacks._optimise_f._cache_size()
    # ig_steps=3 with the gradient explainer: a static setting no other test uses
    short = attack(f, x, mask, explainer="gradient", steps=3, learning_rate=0.0, patience=2,
                   ig_steps=3)
    longer = attack(f, x, mask, explainer="gradient", steps=9, learning_rate=0.0, patience=4,
                    ig_steps=3)
    assert (short.steps, longer.steps) == (2, 4)  # both stopped by their own patience
    assert attacks._optimise_f._cache_size() == before + 1


def test_bad_settings_name_the_value(inputs):
    f, x, mask = inputs
    with pytest.raises(ValueError, match="epsilon must be > 0.*got 0"):
        attack(f, x, mask, explainer="gradient", epsilon=0)
    with pytest.raises(ValueError, match="'lime' is not one of"):
        attack(f, x, mask, explainer="lime")
    with pytest.raises(ValueError, match="unknown objective 'soft'"):
        attack(f, x, mask, explainer="gradient", objective="soft")
    with pytest.raises(ValueError, match="k=99"):
        attack(f, x, mask, explainer="gradient", k=99)
