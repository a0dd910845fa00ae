
import jax
import numpy as np
import pytest

import smat.training.scaffold
from smat.models import functional
from smat.registry import DEFAULT_BETA
from smat.registry import STUDENT_SETTINGS as SETTINGS
from smat.training.loop import LoopConfig, with_loop
from smat.training.student import (
    NO_MASS,
    StudentTrainConfig,
    cache_teacher,
    fixed_head_rows,
    same_label_donors,
    split_pool_for_outer,
    train_student,
)
from tests.helpers import interrupted_then_resumed, synthetic_encoded, tiny_classifier

FAST = dict(inner_learning_rate=0.05, outer_learning_rate=0.05, loop=LoopConfig(
    batch_size=16, max_epochs=2, patience=5, evals_per_epoch=2, length_multiple=16))


@pytest.fixture(scope="module")
def teacher():
    return functional.split(tiny_classifier(seed=1))


def _rows(teacher, setting, n, seed):
    graphdef, params = teacher
    return cache_teacher(graphdef, params, synthetic_encoded(n, seed=seed), setting=setting,
                         ig_steps=4, batch_size=16)


@pytest.mark.parametrize("setting", SETTINGS)
def test_cache_teacher_fields(teacher, setting):
    rows = _rows(teacher, setting, 20, 0)
    assert rows.teacher_logits.shape == (20, 2)
    attention_rows = setting in ("smat", "attention_heads")
    assert rows.teacher_features.shape == ((20, 2, 4, 16) if attention_rows else (20, 0))
    has_scores = setting not in ("none", "smat", "attention_heads")
    assert rows.teacher_scores.shape == ((20, 16) if has_scores else (20, 0))
    if has_scores:  # explanations are zero at padding and informative elsewhere
        assert np.all(rows.teacher_scores[rows.attention_mask == 0] == 0)
        assert np.ptp(rows.teacher_scores[rows.attention_mask == 1]) > 0


@pytest.mark.parametrize("setting", ["none", "attention_all", "gradient", "smat"])
def test_student_trains_and_reports_simulability(teacher, setting, tmp_path):
    train, valid, test = (_rows(teacher, setting, n, s) for n, s in ((64, 0), (32, 1), (32, 2)))
    (result,) = train_student(tiny_classifier(seed=5), train, valid, test,
                              task="classification",
                              config=StudentTrainConfig(explainer=setting, **FAST),
                              output_dir=tmp_path, progress=False)
    assert result.steps == 8
    assert 0.0 <= result.test["accuracy"] <= 1.0 and "macro_f1" in result.test
    if setting == "smat":  # the outer step moved the head coefficients away from uniform
        assert not np.allclose(np.asarray(result.teacher_explainer_params.phi), 1 / 8)
    else:
        assert result.teacher_explainer_params is None


@pytest.mark.parametrize("setting,temperature", [("input_x_gradient", 0.1),
                                                 ("integrated_gradients", 0.5),
                                                 ("gradient", 1.0)])
def test_static_teacher_scores_reach_the_step_at_the_teachers_temperature(
        teacher, setting, temperature, tmp_path, monkeypatch):
    """The authors' explainers divide input x gradient by 0.1 and IG by 0.5 before the
    softmax of the explanation loss; the student's own scores are not rescaled."""
    train = _rows(teacher, setting, 32, 0)
    seen = []

    def recording_step(states, train_batch, *args, **kwargs):
        seen.append(np.asarray(train_batch["teacher_scores"]))
        return real_step(states, train_batch, *args, **kwargs)

    real_step = smat.training.scaffold.scaffold_seed_step
    monkeypatch.setattr(smat.training.scaffold, "scaffold_seed_step", recording_step)
    config = with_loop(StudentTrainConfig(explainer=setting, **FAST), max_epochs=1)
    train_student(tiny_classifier(seed=5), train, train, train, task="classification",
                  config=config, output_dir=tmp_path, progress=False)
    # Every batch row is a training row scaled by 1 / temperature.
    cached = train.teacher_scores / np.float32(temperature)
    for row in seen[0][0]:
        width = row.shape[0]
        assert any(np.allclose(row, c[:width], rtol=1e-6) for c in cached)


def test_unknown_setting_and_missing_cache(teacher, tmp_path):
    with pytest.raises(ValueError, match="explainer='taylor'"):
        StudentTrainConfig(explainer="taylor")
    assert StudentTrainConfig(explainer="gradient").resolved_beta == DEFAULT_BETA["gradient"]
    with pytest.raises(ValueError, match="init_seed=3 is not used with .*per_seed_init"):
        StudentTrainConfig(explainer="none", init_seed=3, per_seed_init=True)
    assert StudentTrainConfig(explainer="none", per_seed_init=True).init_seed == 0
    for name in ("inner_learning_rate", "outer_learning_rate"):
        with pytest.raises(ValueError, match=f"{name} must be > 0, got -1.0"):
            StudentTrainConfig(explainer="smat", **{name: -1.0})
    rows = _rows(teacher, "none", 32, 0)
    with pytest.raises(ValueError, match="needs cached teacher attention features"):
        train_student(tiny_classifier(), rows, rows, rows, task="classification",
                      config=StudentTrainConfig(explainer="smat", **FAST), output_dir=tmp_path,
                      progress=False)


@pytest.mark.parametrize("seeds,parallel", [
    ((5,), False),
    pytest.param((5, 6), True, marks=pytest.mark.slow),  # the teacher's twin stays default
    ((5, 6), False)])
def test_smat_student_resumes_to_identical_parameters(seeds, parallel, teacher, tmp_path,
                                                      monkeypatch):
    """Killed after a checkpoint, rerun: bit-identical students and head coefficients, for
    one seed and for two (vmapped or one after another)."""
    train, valid = _rows(teacher, "smat", 64, 0), _rows(teacher, "smat", 32, 1)
    config = with_loop(StudentTrainConfig(explainer="smat", **FAST), parallel_seeds=parallel)

    def run(folder):
        return train_student([tiny_classifier(seed=s) for s in seeds], train, valid, valid,
                             task="classification", config=config, seeds=seeds,
                             output_dir=folder, progress=False)

    reference = run(tmp_path / "a")
    # killed after the evaluation at step 2 (evals every 2 steps)
    resumed = interrupted_then_resumed(monkeypatch, smat.training.scaffold,
                                       "scaffold_seed_step", on_call=4,
                                       run=lambda: run(tmp_path / "b"))
    for got, want in zip(resumed, reference, strict=True):
        assert (got.steps, got.best_step, got.test) == (want.steps, want.best_step, want.test)
        for a, b in zip(jax.tree.leaves((want.student_params, want.teacher_explainer_params)),
                        jax.tree.leaves((got.student_params, got.teacher_explainer_params)),
                        strict=True):
            np.testing.assert_array_equal(a, b)


# SMaT students of parallel seeds are also compared with separate runs in test_cli.py
@pytest.mark.parametrize("setting", [pytest.param("smat", marks=pytest.mark.slow), "gradient"])
def test_students_of_several_seeds_in_one_program_equal_separate_runs(teacher, setting,
                                                                      tmp_path):
    train, valid, test = (_rows(teacher, setting, n, s) for n, s in ((64, 0), (32, 1), (32, 2)))
    config = StudentTrainConfig(explainer=setting, **{**FAST, "meta_interval": 2})
    seeds = (3, 4)
    alone = train_student([tiny_classifier(seed=10 + s) for s in seeds], train, valid, test,
                          task="classification", config=config, seeds=seeds,
                          output_dir=tmp_path, progress=False)
    together = train_student([tiny_classifier(seed=10 + s) for s in seeds], train, valid, test,
                             task="classification",
                             config=with_loop(config, parallel_seeds=True),
                             seeds=seeds, output_dir=tmp_path / "vmap", progress=False)
    for one, other in zip(alone, together, strict=True):
        assert (other.best_step, other.steps) == (one.best_step, one.steps)
        assert other.test == pytest.approx(one.test)
        for a, b in zip(jax.tree.leaves(other.student_params), jax.tree.leaves(one.student_params),
                        strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
        if setting == "smat":
            np.testing.assert_allclose(np.asarray(other.teacher_explainer_params.phi),
                                       np.asarray(one.teacher_explainer_params.phi),
                                       rtol=1e-4, atol=1e-6)
    logged = (tmp_path / "vmap" / "seed3" / "metrics.jsonl").read_text().splitlines()
    assert len(logged) == len((tmp_path / "seed3" / "metrics.jsonl").read_text().splitlines())
    with pytest.raises(ValueError, match="one model per seed"):
        train_student([tiny_classifier()], train, valid, test, task="classification",
                      config=config, seeds=seeds, output_dir=tmp_path / "bad")


def test_static_settings_share_one_step_whatever_their_meta_settings(teacher):
    # the meta update's settings do not change a static setting's step: its students share
    # one compiled program (the step's config is a static argument of the jit)
    from smat.training.student import _setup

    configs = [StudentTrainConfig(explainer=setting, **{**FAST, "meta_interval": interval,
                                                          "outer_learning_rate": rate})
               for setting in ("gradient", "smat") for interval, rate in ((1, 1e-3), (2, 5e-2))]
    steps = [_setup(tiny_classifier(), _rows(teacher, c.explainer, 16, 0),
                    task="classification", config=c).step_config for c in configs]
    assert steps[0] == steps[1]  # gradient: one program
    assert steps[2] != steps[3] and (steps[3].meta_interval, steps[3].outer_learning_rate) == (
        2, 5e-2)  # SMaT keeps its own


@pytest.mark.parametrize("setting", ["smat", "gradient"])
def test_shuffled_text_control_explains_the_shuffled_tokens_and_keeps_the_logits(teacher,
                                                                                  setting):
    from smat.data import shuffled_tokens

    graphdef, params = teacher
    data = synthetic_encoded(20, seed=3)
    own = cache_teacher(graphdef, params, data, setting=setting, ig_steps=4, batch_size=16)
    control = cache_teacher(graphdef, params, data, setting=setting, ig_steps=4,
                            batch_size=16, explanation_source="shuffled_text")
    by_hand = cache_teacher(graphdef, params, shuffled_tokens(data, np.arange(20)),
                            setting=setting, ig_steps=4, batch_size=16)
    np.testing.assert_array_equal(control.input_ids, data.input_ids)  # the student's text
    np.testing.assert_allclose(control.teacher_logits, own.teacher_logits, rtol=1e-6)
    explanation = "teacher_features" if setting == "smat" else "teacher_scores"
    np.testing.assert_allclose(getattr(control, explanation), getattr(by_hand, explanation),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(getattr(control, explanation), getattr(own, explanation))
    with pytest.raises(ValueError, match="explanation_source must be one of"):
        StudentTrainConfig(explanation_source="shuffled")


def test_shuffled_text_explains_the_class_the_teacher_gives_the_row_itself(teacher,
                                                                          monkeypatch):
    """On shuffled text a static explainer is told the class of the unshuffled row (the
    teacher's label of the row), not left to the class of the shuffled tokens; so
    label_leak's scores are the plain ones."""
    from smat.training import student

    graphdef, params = teacher
    data = synthetic_encoded(16, seed=3)
    plain = cache_teacher(graphdef, params, data, setting="label_leak", batch_size=8)
    told = {}
    static = student.static_scores

    def recorded(*args, row_ids, **kwargs):
        told.update(zip(np.asarray(row_ids).tolist(), np.asarray(args[5]).tolist(),
                        strict=True))
        return static(*args, row_ids=row_ids, **kwargs)

    monkeypatch.setattr(student, "static_scores", recorded)
    control = cache_teacher(graphdef, params, data, setting="label_leak", batch_size=8,
                            explanation_source="shuffled_text")
    assert told == dict(enumerate(plain.teacher_logits.argmax(1).tolist()))
    np.testing.assert_array_equal(control.teacher_scores, plain.teacher_scores)


def test_same_label_donors_pair_rows_of_one_class_and_length():
    classes = np.array([0, 0, 1, 0, 1, 1, 0, 1, 0, 2])
    lengths = np.array([5, 5, 7, 9, 7, 3, 5, 8, 12, 4])
    donors = same_label_donors(classes, lengths)
    np.testing.assert_array_equal(np.sort(donors), np.arange(10))  # a permutation
    assert np.all(classes[donors] == classes)
    assert donors[9] == 9  # the only row of class 2 keeps its own
    assert np.all(donors[:9] != np.arange(9))
    # class 0: the run of length 5 (rows 0, 1, 6) cycles; rows 3 (9) and 8 (12) are runs
    # of one and join it
    assert {0: donors[0], 1: donors[1]} == {0: 1, 1: 6}
    assert set(donors[[0, 1, 6, 3, 8]]) == {0, 1, 6, 3, 8}
    # class 1: lengths 3, 7, 7, 8: the single 3 joins the 7s, the single 8 joins them too
    assert set(donors[[5, 2, 4, 7]]) == {5, 2, 4, 7}


@pytest.mark.parametrize("setting", ["smat", "gradient"])
def test_swapped_control_gives_each_row_a_same_class_rows_explanation(teacher, setting):
    """Row i's explanation is its donor's, with no mass past the donor's length; the
    logits stay the row's own."""
    graphdef, params = teacher
    data = synthetic_encoded(24, seed=5)
    own = cache_teacher(graphdef, params, data, setting=setting, ig_steps=4, batch_size=8)
    control = cache_teacher(graphdef, params, data, setting=setting, ig_steps=4,
                            batch_size=8, explanation_source="swapped_same_label")
    np.testing.assert_array_equal(control.teacher_logits, own.teacher_logits)
    lengths = data.attention_mask.sum(1)
    donors = same_label_donors(own.teacher_logits.argmax(1), lengths)
    assert np.any(donors != np.arange(24))
    name = "teacher_features" if setting == "smat" else "teacher_scores"
    swapped, original = getattr(control, name), getattr(own, name)
    for row, donor in enumerate(donors):
        n = lengths[donor]
        np.testing.assert_array_equal(swapped[row, ..., :n], original[donor, ..., :n])
        assert np.all(swapped[row, ..., n:] == NO_MASS)
    regression = functional.split(tiny_classifier(seed=1, task="regression"))
    with pytest.raises(ValueError, match="a regression teacher has none"):
        cache_teacher(*regression, data, setting=setting, ig_steps=4, batch_size=8,
                      explanation_source="swapped_same_label")


def test_fixed_head_rows_with_uniform_weights_are_attention_all(teacher):
    """Eq. 11 with frozen coefficients: uniform ones give the static all-layers explainer's
    scores; weight on one head gives that head's pooled logits."""
    heads = _rows(teacher, "attention_heads", 20, 0)
    static = _rows(teacher, "attention_all", 20, 0)
    uniform = fixed_head_rows(heads, [1 / 8] * 8)
    np.testing.assert_allclose(uniform.teacher_scores, static.teacher_scores, rtol=1e-5,
                               atol=1e-6)
    assert uniform.teacher_features.shape == (20, 0)
    one = fixed_head_rows(heads, [0, 0, 0, 0, 0, 1, 0, 0])  # layer 1, head 1
    mask = heads.attention_mask == 1
    np.testing.assert_allclose(one.teacher_scores[mask], heads.teacher_features[:, 1, 1][mask],
                               rtol=1e-6)
    assert not np.allclose(one.teacher_scores, uniform.teacher_scores)
    with pytest.raises(ValueError, match="has 7 coefficients; the teacher has 2 layers x 4"):
        fixed_head_rows(heads, [1 / 7] * 7)


def test_fixed_heads_setting_checks_its_weights():
    StudentTrainConfig(explainer="attention_heads", head_weights=(0.5, 0.5))
    with pytest.raises(ValueError, match="needs StudentTrainConfig.head_weights"):
        StudentTrainConfig(explainer="attention_heads")
    with pytest.raises(ValueError, match="summing to 0.9"):
        StudentTrainConfig(explainer="attention_heads", head_weights=(0.5, 0.4))
    with pytest.raises(ValueError, match="only read by the 'attention_heads' setting"):
        StudentTrainConfig(explainer="attention_all", head_weights=(1.0,))
    with pytest.raises(ValueError, match="read only by the 'smat' setting"):
        StudentTrainConfig(explainer="attention_all", outer_rows="pool")


def test_pool_outer_rows_draw_the_outer_batches_from_the_pool_only(teacher, tmp_path,
                                                                  monkeypatch):
    """outer_rows="pool": the inner steps train on the first 80% of the pool and the outer
    loss reads only the last 20%, never a validation row."""
    train = _rows(teacher, "smat", 40, 0)
    valid = _rows(teacher, "smat", 16, 7)
    inner, outer = split_pool_for_outer(train)
    assert len(inner.labels) == 32 and len(outer.labels) == 8
    seen_train, seen_outer = [], []

    def recording_step(states, train_batch, outer_batch, *args, **kwargs):
        seen_train.append(np.asarray(train_batch["teacher_logits"]))
        seen_outer.append(np.asarray(outer_batch["teacher_logits"]))
        return real_step(states, train_batch, outer_batch, *args, **kwargs)

    real_step = smat.training.scaffold.scaffold_seed_step
    monkeypatch.setattr(smat.training.scaffold, "scaffold_seed_step", recording_step)
    config = with_loop(StudentTrainConfig(explainer="smat", outer_rows="pool", **FAST),
                       max_epochs=1)
    train_student(tiny_classifier(seed=5), train, valid, valid, task="classification",
                  config=config, output_dir=tmp_path, progress=False)

    def rows_of(batches):
        return {tuple(np.round(row, 5)) for batch in batches for row in batch[0]}

    assert rows_of(seen_outer) <= {tuple(np.round(r, 5)) for r in outer.teacher_logits}
    assert rows_of(seen_train) <= {tuple(np.round(r, 5)) for r in inner.teacher_logits}
    assert not rows_of(seen_outer) & {tuple(np.round(r, 5)) for r in valid.teacher_logits}
