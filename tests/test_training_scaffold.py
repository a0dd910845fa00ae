"""Tests of the bi-level SMaT step (smat.training.scaffold, paper Eqs. 3-9) on a tiny
attention model."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from smat import explainers
from smat.explainers import Saliency
from smat.store.run_log import check_finite
from smat.training.scaffold import (
    ScaffoldConfig,
    ScaffoldFunctions,
    TeacherOutput,
    init_state,
    pilot_objective,
    scaffold_step,
)

VOCAB, DIM, LAYERS, HEADS, HEAD_DIM, CLASSES, SEQ = 11, 8, 1, 3, 4, 3, 6
TRACES = {"student_forward": 0}


# ----------------------------------------------------------------- a tiny attention model


def tiny_init(key, *, classes=CLASSES, dtype=jnp.float32):
    """Embeddings -> LAYERS self-attention layers (HEADS heads) -> mean pool -> linear."""
    k_emb, k_out, *k_layers = jax.random.split(key, 2 + LAYERS)

    def normal(k, shape, scale):
        return scale * jax.random.normal(k, shape, dtype)

    layers = []
    for k in k_layers:
        kq, kk, kv, ko = jax.random.split(k, 4)
        layers.append({
            "wq": normal(kq, (DIM, HEADS, HEAD_DIM), 0.8),
            "wk": normal(kk, (DIM, HEADS, HEAD_DIM), 0.8),
            "wv": normal(kv, (DIM, HEADS, HEAD_DIM), 0.5),
            "wo": normal(ko, (HEADS, HEAD_DIM, DIM), 0.5),
        })
    return {"emb": normal(k_emb, (VOCAB, DIM), 1.0), "layers": layers,
            "w_out": normal(k_out, (DIM, classes), 0.5), "b_out": jnp.zeros((classes,), dtype)}


def tiny_apply(params, batch, dropout_rng=None):
    """Returns (logits (B, C), pooled attention logits (L, B, H, T)) of the tiny model."""
    mask = batch["attention_mask"] != 0  # (B, T)
    x = params["emb"][batch["input_ids"]]  # (B, T, D)
    if dropout_rng is not None:
        keep = jax.random.bernoulli(dropout_rng, 0.9, x.shape)
        x = jnp.where(keep, x / 0.9, 0.0)
    count = jnp.sum(mask, axis=-1).astype(x.dtype)  # (B,)
    pooled_rows = []
    for layer in params["layers"]:
        q = jnp.einsum("btd,dhk->bhtk", x, layer["wq"])
        k = jnp.einsum("btd,dhk->bhtk", x, layer["wk"])
        v = jnp.einsum("btd,dhk->bhtk", x, layer["wv"])
        logits = jnp.einsum("bhqk,bhsk->bhqs", q, k) / np.sqrt(HEAD_DIM)  # (B, H, T, T)
        probs = jax.nn.softmax(logits, axis=-1, where=mask[:, None, None, :])
        x = x + jnp.tanh(jnp.einsum("bhqs,bhsk,hkd->bqd", probs, v, layer["wo"]))
        query_sum = jnp.sum(jnp.where(mask[:, None, :, None], logits, 0.0), axis=2)  # (B, H, T)
        pooled_rows.append(query_sum / count[:, None, None])
    pooled_x = jnp.sum(jnp.where(mask[..., None], x, 0.0), axis=1) / count[:, None]  # (B, D)
    return pooled_x @ params["w_out"] + params["b_out"][None, :], jnp.stack(pooled_rows)


# Jitted once each: eager op-by-op execution compiles every primitive separately (slow on CPU).
init_jit = jax.jit(tiny_init, static_argnames=("classes", "dtype"))
apply_jit = jax.jit(tiny_apply)


def counting_apply(params, batch, dropout_rng=None):
    TRACES["student_forward"] += 1  # runs only while tracing
    return tiny_apply(params, batch, dropout_rng)


def deterministic_apply(params, batch, dropout_rng=None):
    del dropout_rng
    return tiny_apply(params, batch)


EXPLAINER_CONFIG = explainers.AttentionExplainerConfig(num_layers=LAYERS, num_heads=HEADS)
attention_explainer = functools.partial(explainers.apply, config=EXPLAINER_CONFIG)


def explainer64(params, pooled, mask):
    """Paper Eq. 11 in the input dtype (smat.explainers.apply computes in float32)."""
    lam = jax.nn.softmax(params["phi"]).reshape(LAYERS, HEADS)  # (L, H)
    rows = jnp.where(mask[None, :, None, :], pooled, 0.0)  # (L, B, H, T)
    return Saliency(jnp.einsum("lh,lbht->bt", lam, rows), mask)


# Shared by most tests so that the step compiles once for all of them (same static arguments).
CONFIG = ScaffoldConfig(beta=1.0, inner_learning_rate=0.5, outer_learning_rate=0.05)
EVERY_SECOND = dataclasses.replace(CONFIG, meta_interval=2)
FUNCTIONS = ScaffoldFunctions(student_forward=deterministic_apply,
                              student_explainer=attention_explainer,
                              teacher_explainer=attention_explainer)


def make_batch(key, teacher_params, *, lengths=(6, 4, 5, 2), seq=SEQ):
    ids = jax.random.randint(key, (len(lengths), seq), 1, VOCAB)
    mask = (jnp.arange(seq)[None, :] < jnp.asarray(lengths)[:, None]).astype(jnp.int32)
    batch = {"input_ids": jnp.where(mask == 1, ids, 0), "attention_mask": mask}
    logits, pooled = apply_jit(teacher_params, batch)
    return {**batch, "teacher_logits": logits, "teacher_features": pooled}


def setup(*, dtype=jnp.float32, classes=CLASSES, config=CONFIG, phi=None):
    """Teacher, train/valid batches with cached teacher outputs, and an initial state."""
    teacher = init_jit(jax.random.key(1), classes=classes, dtype=dtype)
    train = make_batch(jax.random.key(2), teacher)
    valid = make_batch(jax.random.key(3), teacher, lengths=(3, 6, 6, 1))
    phi = explainers.init(None, EXPLAINER_CONFIG) if phi is None else phi
    state = init_state(
        config, student_params=init_jit(jax.random.key(0), classes=classes, dtype=dtype),
        student_explainer_params=copy(phi), teacher_explainer_params=copy(phi),
        rng=jax.random.key(4),
    )
    return teacher, train, valid, state


def copy(tree):
    return jax.tree.map(jnp.copy, tree)


def tree_equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"task": "ranking"}, ValueError, "task"),
        ({"meta_interval": 0}, ValueError, "meta_interval"),
        ({"meta_interval": 1.5}, TypeError, "meta_interval"),
        ({"beta": -1.0}, ValueError, "beta"),
        ({"inner_learning_rate": 0.0}, ValueError, "inner_learning_rate"),
        ({"outer_clip_norm": -5.0}, ValueError, "outer_clip_norm"),
        ({"explanation_temperature": 0.0}, ValueError, "explanation_temperature"),
        ({"hypergradient": "implicit"}, ValueError, "hypergradient"),
    ],
)
def test_config_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        ScaffoldConfig(**kwargs)


def test_config_defaults_follow_design():
    c = ScaffoldConfig()
    assert c.hypergradient == "reverse"  # nested jax.grad (design §5)
    assert (c.inner_learning_rate, c.inner_weight_decay, c.inner_clip_norm) == (5e-3, 0.01, 5.0)
    assert (c.outer_learning_rate, c.outer_clip_norm, c.meta_interval) == (5e-4, 5.0, 1)


def test_functions_must_be_callable():
    with pytest.raises(TypeError, match="student_forward"):
        ScaffoldFunctions(student_forward=None)
    with pytest.raises(TypeError, match="teacher_explainer"):
        ScaffoldFunctions(student_forward=tiny_apply, teacher_explainer="attention")


# ------------------------------------------------------------------- meta-gradient (Eq. 8-9)


def test_meta_gradient_matches_finite_differences():
    with jax.enable_x64(True):
        # A clip small enough to act: the pilot is the real inner optimizer update (Eq. 8 as
        # the authors' code runs it), clip factor, weight decay and all.
        config = ScaffoldConfig(beta=2.0, inner_learning_rate=0.5, outer_learning_rate=0.01,
                                inner_clip_norm=0.5, inner_weight_decay=0.01)
        functions = ScaffoldFunctions(  # with dropout: the pilot's dropout key is checked too
            student_forward=tiny_apply, student_explainer=explainer64, teacher_explainer=explainer64
        )
        phi0 = jnp.asarray([0.3, -0.2, 0.5], jnp.float64)
        _, train, valid, state = setup(dtype=jnp.float64, config=config, phi={"phi": phi0})
        rng = copy(state.rng)  # the state is donated to the step
        state, metrics = scaffold_step(state, train, valid, config=config, functions=functions)
        theta, phi_s = state.student_params, state.student_explainer_params
        pilot_key = jax.random.fold_in(jax.random.fold_in(rng, 0), 1)
        mask = train["attention_mask"] != 0

        def ce(logits, teacher_logits):
            labels = jnp.argmax(teacher_logits, axis=-1)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))

        def kl(p_scores, q_scores):  # KL(softmax p || softmax q) over real tokens
            log_p = jax.nn.log_softmax(jnp.where(mask, p_scores, -jnp.inf))
            log_q = jax.nn.log_softmax(jnp.where(mask, q_scores, -jnp.inf))
            terms = jnp.where(mask, jnp.exp(log_p) * (log_p - jnp.where(mask, log_q, 0.0)), 0.0)
            return jnp.sum(terms, axis=-1).mean()

        @jax.jit
        def objective(phi_vector):  # Eqs. 3, 8 and 9 written out independently
            teacher = explainer64({"phi": phi_vector}, train["teacher_features"], mask).scores

            def l_student(th, ps):
                logits, pooled = tiny_apply(th, train, pilot_key)
                student = explainer64(ps, pooled, mask).scores
                return ce(logits, train["teacher_logits"]) + 2.0 * kl(teacher, student)

            grads = jax.grad(l_student, argnums=(0, 1))(theta, phi_s)
            norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree.leaves(grads)))
            clip = jnp.minimum(1.0, 0.5 / norm)  # global norm over theta and phiS together
            pilot = jax.tree.map(lambda p, g: p - 0.5 * (clip * g + 0.01 * p), theta, grads[0])
            return ce(tiny_apply(pilot, valid)[0], valid["teacher_logits"]), norm

        assert objective(phi0)[1] > 0.6  # the clip is active, and its factor depends on phiT
        eps = 1e-5
        fd = np.array([objective(phi0.at[i].add(eps))[0] - objective(phi0.at[i].add(-eps))[0]
                       for i in range(phi0.shape[0])]) / (2 * eps)
        grad = jax.jit(jax.grad(pilot_objective), static_argnames=("config", "functions"))(
            {"phi": phi0}, theta, phi_s, state.inner_opt_state, train, valid, pilot_key,
            config=config, functions=functions,
        )["phi"]
        assert grad.dtype == jnp.float64
        assert np.linalg.norm(fd) > 1e-3  # a real, non-trivial meta-gradient
        assert np.linalg.norm(grad - fd) / np.linalg.norm(fd) <= 1e-4
        np.testing.assert_allclose(metrics["outer_grad_norm"], np.linalg.norm(fd), rtol=1e-4)
        np.testing.assert_allclose(metrics["outer_loss"], objective(phi0)[0], rtol=1e-10)
        # Adam's first step moves each coordinate by -lr * g / (|g| + 1e-8) (outer clip
        # inactive): -lr * sign(g) up to the epsilon, relative 1e-4 for |g| ~ 1e-4.
        step = state.teacher_explainer_params["phi"] - phi0
        np.testing.assert_allclose(step, -0.01 * fd / (np.abs(fd) + 1e-8), rtol=1e-4)


@pytest.mark.parametrize("clip", [100.0, 0.05])
def test_reverse_and_forward_over_reverse_hypergradients_agree(clip):
    """The same meta-gradient with the inner clip idle (100) and active (0.05), where the
    pilot update is no longer linear in the gradient."""
    reverse = dataclasses.replace(CONFIG, inner_clip_norm=clip)
    forward = dataclasses.replace(reverse, hypergradient="forward_over_reverse")
    _, train, valid, state = setup(config=reverse)
    a, metrics_a = scaffold_step(copy(state), train, valid, config=forward, functions=FUNCTIONS)
    b, metrics_b = scaffold_step(copy(state), train, valid, config=reverse, functions=FUNCTIONS)
    assert float(metrics_a["outer_grad_norm"]) > 0
    assert (float(metrics_b["grad_norm"]) > clip) == (clip < 1)
    for name in ("outer_loss", "outer_grad_norm", "outer_update_norm"):
        np.testing.assert_allclose(metrics_a[name], metrics_b[name], rtol=1e-4, err_msg=name)
    np.testing.assert_allclose(a.teacher_explainer_params.phi, b.teacher_explainer_params.phi,
                               rtol=1e-5)


def test_pilot_update_leaves_student_unchanged():
    _, train, valid, state = setup()
    # Step 0 (the first inner step): a meta step for CONFIG, not for EVERY_SECOND.
    state = state._replace(step=jnp.zeros((), jnp.int32))
    a, metrics_a = scaffold_step(copy(state), train, valid, config=CONFIG, functions=FUNCTIONS)
    b, metrics_b = scaffold_step(copy(state), train, valid, config=EVERY_SECOND,
                                 functions=FUNCTIONS)
    assert (float(metrics_a["meta_update"]), float(metrics_b["meta_update"])) == (1.0, 0.0)
    assert tree_equal(a.student_params, b.student_params)
    assert tree_equal(a.student_explainer_params, b.student_explainer_params)
    assert tree_equal(a.inner_opt_state, b.inner_opt_state)
    assert not tree_equal(a.teacher_explainer_params, state.teacher_explainer_params)
    assert tree_equal(b.teacher_explainer_params, state.teacher_explainer_params)
    assert not tree_equal(a.student_params, state.student_params)  # the inner step did run
    assert float(metrics_b["outer_grad_norm"]) == 0.0 and float(metrics_a["outer_grad_norm"]) > 0


def test_beta_zero_outer_gradient_is_exactly_zero():
    config = dataclasses.replace(CONFIG, beta=0.0)
    _, train, valid, state = setup(config=config)
    grad = jax.jit(jax.grad(pilot_objective), static_argnames=("config", "functions"))(
        state.teacher_explainer_params, state.student_params, state.student_explainer_params,
        state.inner_opt_state, train, valid, None, config=config, functions=FUNCTIONS,
    )
    assert all(bool(jnp.all(g == 0)) for g in jax.tree.leaves(grad))
    phi_t = copy(state.teacher_explainer_params)
    state, metrics = scaffold_step(state, train, valid, config=config, functions=FUNCTIONS)
    assert tree_equal(state.teacher_explainer_params, phi_t)
    assert float(metrics["kl"]) == 0.0 and float(metrics["meta_update"]) == 0.0
    assert float(metrics["sim_loss"]) == float(metrics["loss"])


# ------------------------------------------------------------------------ compilation


def test_train_step_compiles_once_over_five_steps():
    _, train, valid, state = setup()
    functions = dataclasses.replace(FUNCTIONS, student_forward=counting_apply)
    TRACES["student_forward"] = 0
    counts = []
    for _ in range(5):
        state, metrics = scaffold_step(state, train, valid, config=CONFIG, functions=functions)
        counts.append(TRACES["student_forward"])
    assert counts[0] > 0
    assert counts == [counts[0]] * 5
    assert int(state.step) == 5


def test_meta_interval_two_updates_teacher_explainer_every_second_step():
    _, train, valid, state = setup(config=EVERY_SECOND)
    changed, flags = [], []
    for _ in range(5):
        before = copy(state.teacher_explainer_params)
        state, metrics = scaffold_step(state, train, valid, config=EVERY_SECOND,
                                       functions=FUNCTIONS)
        changed.append(not tree_equal(before, state.teacher_explainer_params))
        flags.append(float(metrics["meta_update"]))
    # The outer update follows inner steps 2 and 4 (the authors' phase).
    assert changed == [False, True, False, True, False]
    assert flags == [0.0, 1.0, 0.0, 1.0, 0.0]


# ------------------------------------------------------------------------ losses and paths


def test_padding_changes_nothing():
    teacher, train, valid, state = setup()
    pad = 3
    padded = {"input_ids": jnp.pad(train["input_ids"], ((0, 0), (0, pad)), constant_values=7),
              "attention_mask": jnp.pad(train["attention_mask"], ((0, 0), (0, pad)))}
    logits, pooled = apply_jit(teacher, padded)
    padded |= {"teacher_logits": logits, "teacher_features": pooled}
    _, plain = scaffold_step(copy(state), train, valid, config=CONFIG, functions=FUNCTIONS)
    _, long = scaffold_step(copy(state), padded, valid, config=CONFIG, functions=FUNCTIONS)
    assert float(plain["kl"]) > 0
    for name in ("loss", "sim_loss", "kl", "grad_norm", "outer_loss", "outer_grad_norm"):
        np.testing.assert_allclose(long[name], plain[name], rtol=1e-4, err_msg=name)


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_classification_and_regression_losses(task):
    classes = CLASSES if task == "classification" else 1
    config = dataclasses.replace(CONFIG, task=task)
    _, train, valid, state = setup(classes=classes, config=config)
    logits, pooled = apply_jit(state.student_params, train)
    if task == "classification":
        labels = jnp.argmax(train["teacher_logits"], axis=-1)
        expected_sim = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    else:
        expected_sim = jnp.mean((logits - train["teacher_logits"]) ** 2)
    mask = train["attention_mask"] != 0
    p = explainers.to_distribution(attention_explainer(state.teacher_explainer_params,
                                                       train["teacher_features"], mask))
    q = explainers.to_distribution(attention_explainer(state.student_explainer_params, pooled,
                                                       mask))
    expected_kl = jnp.sum(jnp.where(mask, p * (jnp.log(p) - jnp.log(q)), 0.0), -1).mean()
    state, metrics = scaffold_step(state, train, valid, config=config, functions=FUNCTIONS)
    np.testing.assert_allclose(metrics["sim_loss"], expected_sim, rtol=1e-5)
    np.testing.assert_allclose(metrics["kl"], expected_kl, rtol=1e-4)
    np.testing.assert_allclose(metrics["loss"], expected_sim + expected_kl, rtol=1e-5)
    assert float(metrics["outer_grad_norm"]) > 0


def test_loss_decreases_on_a_learnable_toy_problem():
    _, train, valid, state = setup()
    history = []
    for _ in range(25):
        state, metrics = scaffold_step(state, train, valid, config=CONFIG, functions=FUNCTIONS)
        history.append(metrics)
    history = jax.device_get(history)
    check_finite(history, first_step=0, last_step=24)
    losses, kls = [m["loss"] for m in history], [m["kl"] for m in history]
    assert losses[-1] < 0.5 * losses[0]
    assert kls[-1] < kls[0]


def test_cached_and_in_step_teacher_agree():
    teacher, train, valid, state = setup()

    def teacher_forward(teacher_params, batch):
        logits, pooled = tiny_apply(teacher_params, batch)
        return TeacherOutput(logits=logits, features=pooled)

    in_step = dataclasses.replace(FUNCTIONS, teacher_forward=teacher_forward)
    raw_train = {k: train[k] for k in ("input_ids", "attention_mask")}
    raw_valid = {k: valid[k] for k in ("input_ids", "attention_mask")}
    a, cached = scaffold_step(copy(state), train, valid, config=CONFIG, functions=FUNCTIONS)
    b, computed = scaffold_step(copy(state), raw_train, raw_valid, teacher, config=CONFIG,
                                functions=in_step)
    for name in cached:
        np.testing.assert_allclose(computed[name], cached[name], rtol=1e-6, err_msg=name)


def test_static_teacher_explainer_from_cached_scores():
    _, train, _, state = setup()
    functions = dataclasses.replace(FUNCTIONS, teacher_explainer=None)
    state = state._replace(teacher_explainer_params=None, outer_opt_state=None)
    scores = jax.random.normal(jax.random.key(9), train["input_ids"].shape)
    with pytest.raises(ValueError, match="teacher_scores"):
        scaffold_step(copy(state), train, None, config=CONFIG, functions=functions)
    state, metrics = scaffold_step(state, train | {"teacher_scores": scores}, None,
                                   config=CONFIG, functions=functions)
    assert float(metrics["kl"]) > 0 and float(metrics["meta_update"]) == 0.0
    assert state.teacher_explainer_params is None


def test_dropout_rng_is_folded_per_step():
    _, train, _, state = setup()
    functions = ScaffoldFunctions(student_forward=tiny_apply)  # dropout on, no explainers
    config = dataclasses.replace(CONFIG, beta=0.0)
    base = state._replace(teacher_explainer_params=None, outer_opt_state=None)
    _, m0 = scaffold_step(copy(base), train, None, config=config, functions=functions)
    _, m0_again = scaffold_step(copy(base), train, None, config=config, functions=functions)
    _, m1 = scaffold_step(base._replace(step=jnp.ones((), jnp.int32)), train, None,
                          config=config, functions=functions)
    assert float(m0["loss"]) == float(m0_again["loss"])  # deterministic given (rng, step)
    assert float(m0["loss"]) != float(m1["loss"])  # a new dropout mask at the next step


# ----------------------------------------------------------------------------- errors


def test_missing_inputs_are_named():
    _, train, valid, state = setup()
    no_mask = {k: v for k, v in train.items() if k != "attention_mask"}
    with pytest.raises(ValueError, match="attention_mask"):
        scaffold_step(copy(state), no_mask, valid, config=CONFIG, functions=FUNCTIONS)
    no_logits = {k: v for k, v in train.items() if k != "teacher_logits"}
    with pytest.raises(ValueError, match="teacher_logits"):
        scaffold_step(copy(state), no_logits, valid, config=CONFIG, functions=FUNCTIONS)
    with pytest.raises(ValueError, match="valid_batch"):
        scaffold_step(copy(state), train, None, config=CONFIG, functions=FUNCTIONS)



# ----------------------------------------------------------------- with smat.models


@pytest.mark.slow
@pytest.mark.parametrize("modality", ["text", "image"])
def test_step_with_smat_sequence_classifier(modality):
    # the same SMaT step on a text model (token ids) and a ViT (pixel values): it compiles
    # once, and the teacher explainer's head weights move
    from flax import nnx

    from smat.models import SequenceClassifier, TextConfig, ViTConfig, functional
    from smat.training.scaffold import ClassifierForward, ClassifierTeacher

    encoder = TextConfig.tiny() if modality == "text" else ViTConfig.tiny()
    graphdef, theta = functional.split(
        SequenceClassifier(encoder, num_labels=2, rngs=nnx.Rngs(0)))
    teacher_def, teacher = functional.split(
        SequenceClassifier(encoder, num_labels=2, rngs=nnx.Rngs(1)))
    explainer = explainers.AttentionExplainer(explainers.AttentionExplainerConfig(
        num_layers=encoder.num_layers, num_heads=encoder.num_heads))
    functions = ScaffoldFunctions(
        student_forward=ClassifierForward(graphdef), student_explainer=explainer.apply,
        teacher_explainer=explainer.apply, teacher_forward=ClassifierTeacher(teacher_def))
    if modality == "text":
        ids = jax.random.randint(jax.random.key(0), (4, 12), 1, encoder.vocab_size)
        mask = (jnp.arange(12)[None, :] < jnp.array([12, 8, 5, 10])[:, None]).astype(jnp.int32)
        batch = {"input_ids": jnp.where(mask == 1, ids, 0), "attention_mask": mask}
    else:
        # [CLS] + 16 patches; the mask also says which tokens the explanations cover
        batch = {"pixel_values": jax.random.normal(jax.random.key(0), (4, 3, 16, 16)),
                 "attention_mask": jnp.ones((4, encoder.num_patches + 1), jnp.int32)}
    config = ScaffoldConfig(inner_learning_rate=0.1, outer_learning_rate=0.05)
    state = init_state(config, student_params=theta, student_explainer_params=explainer.init(None),
                       teacher_explainer_params=explainer.init(None), rng=jax.random.key(0))
    phi_t = copy(state.teacher_explainer_params)
    cache_sizes = []
    for _ in range(3):
        # A rebuilt (equal) adapter must hit the compiled step, not recompile it.
        functions = dataclasses.replace(functions, student_forward=ClassifierForward(graphdef))
        state, metrics = scaffold_step(state, batch, batch, teacher, config=config,
                                       functions=functions)
        cache_sizes.append(scaffold_step._cache_size())
    assert cache_sizes == [cache_sizes[0]] * 3
    check_finite(jax.device_get(metrics), first_step=0, last_step=2)
    assert float(metrics["kl"]) > 0 and float(metrics["outer_grad_norm"]) > 0
    assert not tree_equal(phi_t, state.teacher_explainer_params)
