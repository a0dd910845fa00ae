from collections import Counter

import numpy as np
import pytest

from smat.evaluation.study_tasks import HIDDEN, assign_packages, is_punctuation, shown_words


def test_exactly_k_words_shown_in_place_without_punctuation():
    words = ["the", "film", ",", "sadly", ",", "is", "dull", "."]
    scores = [0.1, 0.5, 9.0, 0.7, 9.0, 0.5, 0.9, 9.0]
    shown = shown_words(words, scores, 3)
    assert shown == [HIDDEN, "film", HIDDEN, "sadly", HIDDEN, HIDDEN, "dull", HIDDEN]
    # "film" and "is" tie at 0.5: the earlier word wins, deterministically
    assert shown_words(words, scores, 3) == shown
    kept = shown_words(words, scores, 2, drop_punctuation=False)
    assert kept == [HIDDEN, HIDDEN, ",", HIDDEN, ",", HIDDEN, HIDDEN, HIDDEN]
    assert sum(w != HIDDEN for w in shown_words(words, scores, 40)) == 5  # all eligible
    cut = shown_words(["good", "film", "ending"], [1.0, 0.5, np.nan], 3)
    assert cut == ["good", "film", HIDDEN]  # an unscored word is never shown
    assert is_punctuation("--") and is_punctuation("?!") and not is_punctuation("don't")
    with pytest.raises(ValueError, match="8 words but 2 scores"):
        shown_words(words, [1.0, 2.0], 3)
    with pytest.raises(ValueError, match="k must be >= 1, got 0"):
        shown_words(words, scores, 0)


def test_packages_label_every_task_r_times_and_never_repeat_a_sample():
    samples, methods, ks = 12, 3, 4
    task_samples = np.repeat(np.arange(samples), methods * ks)  # 144 tasks
    plan = assign_packages(task_samples, annotators_per_task=5, tasks_per_annotator=10,
                           seed=3)
    assert Counter(plan.task.tolist()) == {t: 5 for t in range(len(task_samples))}
    for person in np.unique(plan.annotator):
        seen = task_samples[plan.task[plan.annotator == person]]
        assert len(seen) <= 10 and len(set(seen.tolist())) == len(seen)
    assert len(np.unique(plan.annotator)) == -(-144 * 5 // 10)
    again = assign_packages(task_samples, annotators_per_task=5, tasks_per_annotator=10,
                            seed=3)
    np.testing.assert_array_equal(again.task, plan.task)
    other = assign_packages(task_samples, annotators_per_task=5, tasks_per_annotator=10,
                            seed=4)
    assert not np.array_equal(other.task, plan.task)


def test_package_settings_are_checked():
    with pytest.raises(ValueError, match="tasks_per_annotator=5 exceeds the 3 samples"):
        assign_packages(np.repeat(np.arange(3), 2), tasks_per_annotator=5)
    with pytest.raises(ValueError, match="must be >= 1, got 0 and 100"):
        assign_packages(np.arange(3), annotators_per_task=0)
    with pytest.raises(ValueError, match="same number of tasks"):
        assign_packages(np.array([0, 0, 1]), tasks_per_annotator=2)
