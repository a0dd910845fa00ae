import numpy as np
import pytest

from smat.evaluation.human_study import (
    DONT_KNOW,
    StudyInputError,
    accuracies,
    difficulty_weights,
    filter_workers,
    fleiss_kappa,
    flips,
    flips_and_aids,
    majority_correct,
    method_scores,
    plot_accuracy,
    score_rank_correlation,
    score_recognized,
    score_study,
)

# Lu et al. (2022) Table 3 (IMDB): p_jk in % for k = 5, 10, 20, 30, 40, and the Score column
TABLE3 = {"random": ([25, 42, 41, 55, 54], 42.9),
          "all attention": ([66, 74, 81, 87, 84], 78.5),
          "last attention": ([53, 60, 73, 72, 78], 66.9),
          "vanilla gradient": ([75, 81, 73, 80, 85], 79.5),
          "input x grad": ([46, 46, 60, 56, 52], 52.1),
          "integrated gradient": ([74, 81, 87, 80, 87], 82.3),
          "deeplift": ([52, 37, 60, 52, 67], 53.5),
          "lime": ([30, 28, 47, 48, 44], 39.0)}


def test_reproduces_the_score_column_of_lu_et_al_table3():
    p = np.array([row for row, _ in TABLE3.values()]) / 100
    np.testing.assert_allclose(100 * method_scores(p), [s for _, s in TABLE3.values()],
                               atol=0.05)


def test_toy_table_by_hand():
    # 3 methods, 2 ks, 2 samples: A (N=2, J=3, K=2)
    a = np.array([[[1, 1], [0, 1], [0, 0]],
                  [[1, 0], [1, 1], [0, 1]]])
    p = accuracies(a)
    np.testing.assert_allclose(p, [[1.0, 0.5], [0.5, 1.0], [0.0, 0.5]])
    # sum p = 3.5, K^2 = 4, per-k sums 1.5 and 2.0
    np.testing.assert_allclose(difficulty_weights(p), [3.5 / 6, 3.5 / 8])
    np.testing.assert_allclose(method_scores(p), [3.5 / 6 + 0.5 * 3.5 / 8,
                                                  0.5 * 3.5 / 6 + 3.5 / 8, 0.5 * 3.5 / 8])
    with pytest.raises(ValueError, match=r"accuracy 0 at the k settings \[0\]"):
        difficulty_weights([[0.0, 1.0], [0.0, 0.5]])


def test_majority_vote_ties_and_dont_know():
    assert majority_correct(["pos", "pos", "neg"], "pos") == 1
    assert majority_correct(["pos", "neg"], "pos") == 0  # a tie
    assert majority_correct(["pos", DONT_KNOW, DONT_KNOW], "pos") == 0  # "I don't know" wins
    assert majority_correct(["pos", DONT_KNOW], "pos") == 0  # ties with "I don't know"
    assert majority_correct([], "pos") == 0
    assert majority_correct(["neg", "neg", "pos", "pos", "pos"], "pos") == 1


def test_flips_on_constructed_patterns():
    a = np.array([[[1, 0, 1]],    # right at k1, wrong at k2: flipped
                  [[0, 1, 1]],    # aided
                  [[1, 1, 1]],    # always right
                  [[0, 0, 0]],    # never right (counts as aided in Table 7's formula)
                  [[0, 1, 0]]])   # flipped
    assert flips(a)[:, 0].tolist() == [True, False, False, False, True]
    flipped, aided = flips_and_aids(a)
    assert flipped.tolist() == [2] and aided.tolist() == [5 - 2 - 1]


def _study():
    tasks = [{"task_id": f"{i}-{m}-{k}", "sample": i, "method": m, "k": k, "gold": g,
              "classes": ["pos", "neg"]}
             for i, g in ((0, "pos"), (1, "neg")) for m in ("ig", "random") for k in (5, 10)]
    answers = []
    for t in tasks:  # ig: right everywhere; random: right at k=5 only for sample 0 (a flip)
        right = t["method"] == "ig" or (t["sample"] == 0 and t["k"] == 5)
        wrong = "neg" if t["gold"] == "pos" else "pos"
        for w, answer in enumerate([t["gold"], t["gold"], wrong] if right
                                   else [wrong, DONT_KNOW, t["gold"]]):
            answers.append({"worker": f"w{w}", "task_id": t["task_id"], "answer": answer})
    return tasks, answers


def test_score_study_end_to_end():
    tasks, answers = _study()
    report = score_study(tasks, answers)
    assert report["accuracy"] == {"ig": [1.0, 1.0], "random": [0.5, 0.0]}
    # w_k = 2.5 / (4 * [1.5, 1.0])
    np.testing.assert_allclose(report["weights"], [2.5 / 6, 2.5 / 4])
    assert report["score"]["ig"] == pytest.approx(2.5 / 6 + 2.5 / 4)
    assert report["flips"] == {"ig": 0, "random": 1} and report["aids"] == {"ig": 0,
                                                                             "random": 1}


def test_imports_never_drop_answers_silently():
    tasks, answers = _study()
    bad = answers + [{"worker": "w9", "task_id": "nope", "answer": "pos"},
                     {"worker": "w0", "task_id": "0-ig-5", "answer": "pos"},
                     {"worker": "w7", "task_id": "0-ig-5", "answer": "maybe"},
                     {"worker": "w8", "task_id": "0-ig-5", "answer": "meh"}]
    with pytest.raises(StudyInputError, match="1 answers for unknown task ids; 1 repeated "
                                              "answers by one worker to one task; 2 answers "
                                              "outside the task's classes"):
        score_study(tasks, bad)
    with pytest.warns(UserWarning, match="dropped 1 answers for unknown task ids"):
        lenient = score_study(tasks, bad, lenient=True)
    assert lenient == score_study(tasks, answers)
    with pytest.raises(StudyInputError, match="2 .sample, method, k. cells have no task"):
        score_study(tasks[:-2], answers[:-6])


def test_rank_correlation_between_two_studies():
    humans = {"ig": 0.8, "gradient": 0.7, "random": 0.4, "lime": 0.3}
    machine = {"ig": 0.9, "gradient": 0.5, "random": 0.6, "other": 0.1}
    assert score_rank_correlation(humans, machine) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="3 or more shared methods"):
        score_rank_correlation({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 0.0})


def test_worker_filters():
    answers = [{"worker": "fast", "task_id": "t1", "answer": "pos", "seconds": 0.2},
               {"worker": "fast", "task_id": "t2", "answer": "pos", "seconds": 0.4},
               {"worker": "idk", "task_id": "t1", "answer": DONT_KNOW, "seconds": 5},
               {"worker": "ok", "task_id": "t1", "answer": "neg", "seconds": 3}]
    kept, dropped = filter_workers(answers, min_seconds=1.0)
    assert [r["worker"] for r in kept] == ["ok"]
    assert dropped == {"fast": "median 0.30 s per task < 1.0 s",
                       "idk": "answered only \"I don't know\" (1 tasks)"}
    assert len(filter_workers(answers, drop_all_dont_know=False)[0]) == 4
    with pytest.raises(StudyInputError, match="worker w has answers without 'seconds'"):
        filter_workers([{"worker": "w", "task_id": "t", "answer": "pos"}], min_seconds=1)


def test_fleiss_kappa_by_hand():
    # P = (1 + 1/3) / 2 = 2/3; chance = (5/6)^2 + (1/6)^2 = 13/18; kappa = -0.2
    assert fleiss_kappa([["a", "a", "a"], ["a", "a", "b"], ["a"]]) == pytest.approx(-0.2)
    assert fleiss_kappa([["a", "a"], ["b", "b"]]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="2 or more answers"):
        fleiss_kappa([["a"]])


def test_an_already_voted_table_scores_like_the_answers(tmp_path):
    tasks, answers = _study()
    from_answers = score_study(tasks, answers)
    votes = {}
    for row in answers:
        votes.setdefault(row["task_id"], []).append(row["answer"])
    rows = [{"sample": t["sample"], "method": t["method"], "k": t["k"],
             "correct": majority_correct(votes[t["task_id"]], t["gold"])} for t in tasks]
    assert score_recognized(rows) == from_answers
    bad = [dict(rows[0]), {**rows[1], "correct": "yes"}] + rows[2:] + [dict(rows[0])]
    with pytest.raises(StudyInputError, match="1 'correct' values other than 0 or 1; 1 "
                                              "repeated .* rows"):
        score_recognized(bad)
    with pytest.raises(StudyInputError, match="1 missing"):
        score_recognized(rows[1:])
    figure = plot_accuracy(from_answers, tmp_path / "acc.png")
    assert (tmp_path / "acc.png").stat().st_size > 0 and len(figure.axes[0].lines) == 2
