"""Sharded and vmapped paths equal the single-device, one-seed ones (design §8).

Run in their own pytest invocation with 8 host devices (see the Makefile's `test` target):

    XLA_FLAGS=--xla_force_host_platform_device_count=8 .venv/bin/python -m pytest -m multidevice
"""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import baselines
import smat.parallel as parallel
from smat.cli import main
from smat.models import functional
from smat.parallel import data_mesh, initialize_distributed, replicate, resolve_mesh, shard_batch
from smat.training.loop import LoopConfig, with_loop
from smat.training.scaffold import init_state, scaffold_step
from smat.training.teacher import (
    TeacherTrainConfig,
    TrainState,
    teacher_optimizer,
    teacher_seed_step,
    teacher_step,
    train_teacher,
)
from tests import test_training_scaffold as tiny
from tests.helpers import synthetic_encoded, tiny_classifier

pytestmark = pytest.mark.multidevice
DEVICES = 8
FAST = TeacherTrainConfig(learning_rate=3e-3, warmup_steps=3, loop=LoopConfig(
    batch_size=16, max_epochs=2, patience=2, evals_per_epoch=2, length_multiple=16))
TOL = dict(rtol=2e-5, atol=2e-6)


@pytest.fixture(autouse=True)
def eight_devices():
    if jax.device_count() < DEVICES:
        pytest.fail(f"multidevice tests need {DEVICES} devices, {jax.device_count()} visible; run "
                    f"XLA_FLAGS=--xla_force_host_platform_device_count={DEVICES} python -m "
                    "pytest -m multidevice")


def assert_trees_close(a, b, **tol):
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), **(tol or TOL))


def copy(tree):
    return jax.tree.map(jnp.copy, tree)


# ------------------------------------------------------------------ mesh and placement


def test_data_mesh_covers_the_requested_devices():
    assert data_mesh().shape == {"data": DEVICES}
    assert data_mesh(2).devices.tolist() == jax.devices()[:2]
    with pytest.raises(ValueError, match="asked for 9 devices but only 8 cpu"):
        data_mesh(9)
    with pytest.raises(ValueError, match="num_devices must be an int >= 1"):
        data_mesh(0)


def test_shard_batch_splits_rows_and_replicate_copies():
    mesh = data_mesh()
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    batch = shard_batch({"x": x, "y": x[:, 0]}, mesh)
    assert batch["x"].sharding.spec == P("data")
    shards = sorted(batch["x"].addressable_shards, key=lambda s: s.index[0].start)
    assert [s.data.shape for s in shards] == [(2, 3)] * DEVICES
    np.testing.assert_array_equal(np.concatenate([s.data for s in shards]), x)
    stacked = shard_batch(np.zeros((4, 16, 5)), mesh, axis=1)
    assert stacked.sharding.spec == P(None, "data")
    params = replicate({"w": np.ones((3, 2))}, mesh)
    assert params["w"].sharding.is_fully_replicated and len(params["w"].addressable_shards) == 8
    with pytest.raises(ValueError, match=r"\['x'\] has a batch of 12 examples.*divide over 8 "
                                         r"devices.*e\.g\. 16"):
        shard_batch({"x": np.ones((12, 3))}, mesh)
    with pytest.raises(ValueError, match="no example axis"):
        shard_batch(np.float32(1.0), mesh)


def test_resolve_mesh_explicit_ambient_or_none():
    mesh = data_mesh(4)
    assert resolve_mesh() is None
    assert resolve_mesh(mesh) is mesh
    with jax.set_mesh(mesh):
        assert resolve_mesh() == mesh
    other = jax.make_mesh((2,), ("model",), axis_types=(jax.sharding.AxisType.Auto,),
                          devices=jax.devices()[:2])
    with pytest.raises(ValueError, match="needs a 'data' axis"):
        resolve_mesh(other)


def test_initialize_distributed_only_when_multi_host(monkeypatch):
    from smat import parallel

    calls, waited = [], []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(parallel, "_wait_for_coordinator",
                        lambda address, **kw: waited.append(address))
    assert initialize_distributed(environ={}) is False
    assert initialize_distributed(num_processes=1, process_id=0, coordinator_address="h:1",
                                  environ={}) is False
    assert calls == []
    env = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4",
           "JAX_PROCESS_ID": "2"}
    assert initialize_distributed(environ=env) is True
    assert initialize_distributed(process_id=3, environ=env) is True  # a flag beats the env
    assert initialize_distributed(auto=True, environ={}) is True  # cluster auto-detection
    timeout = {"initialization_timeout": parallel.JOIN_TIMEOUT}
    assert calls == [
        {"coordinator_address": "10.0.0.1:1234", "num_processes": 4, "process_id": 2,
         **timeout},
        {"coordinator_address": "10.0.0.1:1234", "num_processes": 4, "process_id": 3,
         **timeout},
        {"coordinator_address": None, "num_processes": None, "process_id": None, **timeout}]
    # a process other than 0 first makes sure the coordinator listens
    assert waited == ["10.0.0.1:1234", "10.0.0.1:1234"]
    with pytest.raises(ValueError, match="missing --num-processes / JAX_NUM_PROCESSES, "
                                         "--process-id / JAX_PROCESS_ID"):
        initialize_distributed(coordinator_address="h:1", environ={})
    with pytest.raises(ValueError, match=r"process_id must lie in \[0, 4\); got 4"):
        initialize_distributed(process_id=4, environ=env)
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES='two' is not a valid int"):
        initialize_distributed(environ={**env, "JAX_NUM_PROCESSES": "two"})


def test_a_coordinator_nobody_runs_ends_in_one_line_not_an_abort(monkeypatch, capsys):
    """JAX aborts a process that cannot register (no Python error); smat's process 1 first
    waits for the coordinator to listen, and ends with a ValueError naming what to do."""
    import socket
    import time

    from smat.cli import main

    with socket.socket() as probe:  # a free port: nothing listens there
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    started = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: started.append(kw))
    start = time.monotonic()
    with pytest.raises(ValueError, match=rf"process 1 of 2 could not reach the coordinator "
                                         rf"at localhost:{port} within 1 s: start process 0"):
        initialize_distributed(coordinator_address=f"localhost:{port}", num_processes=2,
                               process_id=1, environ={}, timeout=1)
    assert time.monotonic() - start < 10 and started == []
    with pytest.raises(ValueError, match="must be HOST:PORT"):
        initialize_distributed(coordinator_address="nohost", num_processes=2, process_id=1,
                               environ={}, timeout=1)
    # the command line: one line, exit 2
    code = main(["predict", "--model", "nowhere", "nowhere.txt",
                 "--coordinator", f"localhost:{port}", "--num-processes", "2",
                 "--process-id", "1", "--join-timeout", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "could not reach the coordinator" in err and "Traceback" not in err


# ------------------------------------------------------------------ teacher step


def _teacher_setup(seed=0, batch_seed=0):
    graphdef, params = functional.split(tiny_classifier(seed=seed))
    optimizer = teacher_optimizer(FAST, 10)
    state = TrainState(jnp.zeros((), jnp.int32), copy(params), optimizer.init(params))
    batches = [synthetic_encoded(16, seed=batch_seed + i) for i in range(3)]
    return graphdef, optimizer, state, batches


def _run_teacher_steps(graphdef, optimizer, state, batches, key, mesh=None):
    if mesh is not None:
        state = replicate(state, mesh)
    losses = []
    for batch in batches:
        inputs = (batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.labels)
        if mesh is not None:
            inputs = shard_batch(inputs, mesh)
        state, metrics = teacher_step(graphdef, state, *inputs, key, optimizer=optimizer,
                                      task="classification")
        losses.append(float(metrics["loss"]))
    return state, losses


def test_sharded_teacher_step_equals_single_device():
    graphdef, optimizer, state, batches = _teacher_setup()
    key = jax.random.key(0)
    single, single_losses = _run_teacher_steps(graphdef, optimizer, copy(state), batches, key)
    mesh = data_mesh()
    sharded, sharded_losses = _run_teacher_steps(graphdef, optimizer, copy(state), batches, key,
                                                 mesh)
    np.testing.assert_allclose(sharded_losses, single_losses, **TOL)
    assert_trees_close(sharded.params, single.params)
    assert all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(sharded.params))
    # jit partitioned the step over the 8 devices: gradients are all-reduced across them.
    first = batches[0]
    b = shard_batch((first.input_ids, first.attention_mask, first.token_type_ids,
                     first.labels), mesh)
    hlo = teacher_step.lower(graphdef, replicate(state, mesh), *b, key, optimizer=optimizer,
                             task="classification").compile().as_text()
    assert "all-reduce" in hlo


def test_train_teacher_on_eight_devices_equals_one(tmp_path):
    train, valid = synthetic_encoded(64, seed=0), synthetic_encoded(32, seed=1)
    config = FAST
    runs = [train_teacher(tiny_classifier(), train, valid, task="classification",
                          config=config, output_dir=tmp_path / name, progress=False,
                          mesh=mesh)[0]
            for name, mesh in (("one", None), ("eight", data_mesh()))]
    assert runs[0].steps == runs[1].steps
    assert runs[0].best_step == runs[1].best_step
    assert runs[0].best_validation == pytest.approx(runs[1].best_validation)
    assert_trees_close(runs[1].params, runs[0].params, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ SMaT step


def test_sharded_scaffold_step_equals_single_device():
    teacher = tiny.init_jit(jax.random.key(1))
    lengths = (6, 4, 5, 2, 3, 6, 1, 5, 2, 6, 4, 3, 5, 6, 2, 4)
    train = tiny.make_batch(jax.random.key(2), teacher, lengths=lengths)
    valid = tiny.make_batch(jax.random.key(3), teacher, lengths=lengths[::-1])
    phi = tiny.explainers.init(None, tiny.EXPLAINER_CONFIG)
    state = init_state(tiny.CONFIG, student_params=tiny.init_jit(jax.random.key(0)),
                       student_explainer_params=copy(phi), teacher_explainer_params=copy(phi),
                       rng=jax.random.key(4))
    step = functools.partial(scaffold_step, config=tiny.CONFIG, functions=tiny.FUNCTIONS)

    single = copy(state)
    for _ in range(2):
        single, single_metrics = step(single, train, valid)
    mesh = data_mesh()
    sharded = replicate(copy(state), mesh)
    # Cached teacher features are (L, B, H, T) here: their example axis is 1.
    train_s, valid_s = (
        {**shard_batch({k: v for k, v in batch.items() if k != "teacher_features"}, mesh),
         "teacher_features": shard_batch(batch["teacher_features"], mesh, axis=1)}
        for batch in (train, valid))
    for _ in range(2):
        sharded, sharded_metrics = step(sharded, train_s, valid_s)
    assert float(sharded_metrics["meta_update"]) == 1.0
    assert_trees_close(jax.device_get(sharded_metrics), jax.device_get(single_metrics),
                       rtol=1e-4, atol=1e-6)
    assert_trees_close(sharded._replace(rng=None), single._replace(rng=None), rtol=1e-4,
                       atol=1e-6)


# ------------------------------------------------------------------ integrated gradients


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _ig_scores(graphdef, params, input_ids, attention_mask):
    f, x, mask = baselines.attribution_inputs(graphdef, params, input_ids=input_ids,
                                              attention_mask=attention_mask)
    return baselines.integrated_gradients(f, x, mask, n_steps=8, chunk_size=4).saliency.scores


def test_sharded_integrated_gradients_equal_single_device():
    graphdef, params = functional.split(tiny_classifier(seed=3))
    data = synthetic_encoded(16, seed=4)
    single = _ig_scores(graphdef, params, data.input_ids, data.attention_mask)
    mesh = data_mesh()
    ids, mask = shard_batch((data.input_ids, data.attention_mask), mesh)
    sharded = _ig_scores(graphdef, replicate(params, mesh), ids, mask)
    assert sharded.sharding.spec[0] == "data"  # the scores stay split by example
    np.testing.assert_allclose(np.asarray(sharded), np.asarray(single), rtol=1e-4, atol=1e-6)
    assert np.ptp(np.asarray(single)[data.attention_mask == 1]) > 0


# ------------------------------------------------------------------ seeds with vmap

SEEDS = (0, 1, 2, 3)


def test_vmapped_seed_steps_equal_sequential_steps_and_compose_with_sharding():
    setups = [_teacher_setup(seed=s, batch_seed=10 * s) for s in SEEDS]
    graphdef, optimizer = setups[0][:2]
    keys = [jax.random.key(s) for s in SEEDS]
    sequential = [_run_teacher_steps(graphdef, optimizer, copy(state), batches, key)[0]
                  for (_, _, state, batches), key in zip(setups, keys, strict=True)]

    def stacked_run(mesh):
        states = jax.tree.map(lambda *x: jnp.stack(x), *(copy(s[2]) for s in setups))
        stacked_keys = jnp.stack(keys)
        if mesh is not None:
            states, stacked_keys = replicate((states, stacked_keys), mesh)
        for i in range(3):
            inputs = tuple(np.stack([tuple(s[3][i])[j] for s in setups]) for j in (0, 1, 2, 4))
            if mesh is not None:
                inputs = shard_batch(inputs, mesh, axis=1)
            states, metrics = teacher_seed_step(graphdef, states, *inputs, stacked_keys,
                                                optimizer=optimizer, task="classification")
        assert metrics["loss"].shape == (len(SEEDS),)
        return states

    for mesh in (None, data_mesh()):
        states = stacked_run(mesh)
        for i, expected in enumerate(sequential):
            assert int(states.step[i]) == 3
            assert_trees_close(jax.tree.map(lambda x, i=i: x[i], states.params), expected.params)


def test_train_teacher_seeds_equals_sequential_runs(tmp_path):
    train, valid = synthetic_encoded(64, seed=0), synthetic_encoded(32, seed=1)
    config = FAST
    sequential = train_teacher([tiny_classifier(seed=s) for s in SEEDS], train, valid,
                               task="classification", config=config, seeds=SEEDS,
                               output_dir=[tmp_path / f"seq{s}" for s in SEEDS], progress=False)
    together = train_teacher([tiny_classifier(seed=s) for s in SEEDS], train, valid,
                             task="classification",
                             config=with_loop(FAST, parallel_seeds=True), seeds=SEEDS,
                             output_dir=tmp_path / "vmap", progress=False, mesh=data_mesh())
    for s, one, other in zip(SEEDS, sequential, together, strict=True):
        assert (other.steps, other.best_step) == (one.steps, one.best_step)
        assert other.best_validation == pytest.approx(one.best_validation)
        assert_trees_close(other.params, one.params, rtol=1e-4, atol=1e-5)
        logged = [json.loads(x) for x in (tmp_path / f"vmap/seed{s}/metrics.jsonl").read_text()
                  .splitlines()]
        expected = [json.loads(x) for x in (tmp_path / f"seq{s}/metrics.jsonl").read_text()
                    .splitlines()]
        assert [r["step"] for r in logged] == [r["step"] for r in expected]
        np.testing.assert_allclose([r["loss"] for r in logged], [r["loss"] for r in expected],
                                   rtol=1e-4)
    bad = tmp_path / "bad"
    with pytest.raises(ValueError, match="one model per seed"):
        train_teacher([tiny_classifier()], train, valid, task="classification",
                      config=config, seeds=(0, 1), output_dir=bad)
    with pytest.raises(ValueError, match="one train split per seed"):
        train_teacher([tiny_classifier()] * 2, [train], valid, task="classification",
                      config=config, seeds=(0, 1), output_dir=bad)
    with pytest.raises(ValueError, match="must have one size"):
        train_teacher([tiny_classifier()] * 2, train, [valid, synthetic_encoded(8)],
                      task="classification", config=config, seeds=(0, 1), output_dir=bad)
    with pytest.raises(ValueError, match="distinct"):
        train_teacher([tiny_classifier()] * 2, train, valid, task="classification",
                      config=config, seeds=(1, 1), output_dir=bad)
    with pytest.raises(ValueError, match="one output folder per seed"):
        train_teacher([tiny_classifier()] * 2, train, valid, task="classification",
                      config=config, seeds=(0, 1), output_dir=[bad])


def test_train_teacher_seeds_with_data_per_seed_equals_sequential_runs(tmp_path):
    """ROAR trains each seed on its own masked data: one split per seed."""
    trains = [synthetic_encoded(64, seed=10 + s) for s in SEEDS[:2]]
    valids = [synthetic_encoded(32, seed=20 + s) for s in SEEDS[:2]]
    sequential = [train_teacher(tiny_classifier(seed=s), t, v, task="classification",
                                config=with_loop(FAST, seed=s),
                                output_dir=tmp_path / f"seq{s}", progress=False)[0]
                  for s, t, v in zip(SEEDS[:2], trains, valids, strict=True)]
    together = train_teacher([tiny_classifier(seed=s) for s in SEEDS[:2]], trains, valids,
                             task="classification",
                             config=with_loop(FAST, parallel_seeds=True),
                             seeds=SEEDS[:2], output_dir=tmp_path / "vmap", progress=False)
    for one, other in zip(sequential, together, strict=True):
        assert (other.steps, other.best_step) == (one.steps, one.best_step)
        assert other.best_validation == pytest.approx(one.best_validation)
        assert_trees_close(other.params, one.params, rtol=1e-4, atol=1e-5)


def test_vmapped_students_sharded_over_eight_devices_equal_one_device(tmp_path):
    """Seeds (vmap) and data parallelism (sharding) compose for the SMaT student."""
    from smat.training.student import StudentTrainConfig, cache_teacher, train_student

    graphdef, params = functional.split(tiny_classifier(seed=1))
    train, valid, test = (cache_teacher(graphdef, params, synthetic_encoded(n, seed=s),
                                        setting="smat", batch_size=16)
                          for n, s in ((32, 0), (16, 1), (16, 2)))
    config = StudentTrainConfig(explainer="smat", loop=LoopConfig(
        batch_size=16, max_epochs=2, patience=5, evals_per_epoch=1, length_multiple=16,
        parallel_seeds=True))
    runs = [train_student([tiny_classifier(seed=s) for s in (0, 1)], train, valid, test,
                          task="classification", config=config, seeds=(0, 1), progress=False,
                          output_dir=tmp_path / f"devices{n}", mesh=data_mesh(n))
            for n in (1, 8)]
    for one, eight in zip(*runs, strict=True):
        assert eight.steps == one.steps == 4
        assert_trees_close(eight.student_params, one.student_params, rtol=1e-4, atol=1e-5)
        assert_trees_close(eight.teacher_explainer_params, one.teacher_explainer_params,
                           rtol=1e-4, atol=1e-6)


def test_explain_encoded_sharded_equals_one_device():
    """Explanations by name with each batch sharded over 8 devices (the last one padded)."""
    from smat.jobs.explain import explain_encoded

    graphdef, params = functional.split(tiny_classifier(seed=2))
    data = synthetic_encoded(20, seed=3)
    names = ["gradient", "integrated_gradients", "attention_all"]
    results = [explain_encoded(graphdef, params, data, names, task="classification",
                               ig_steps=8, batch_size=8, mesh=data_mesh(n)) for n in (1, 8)]
    (one, one_pred, one_prob), (eight, eight_pred, eight_prob) = results
    np.testing.assert_array_equal(eight_pred, one_pred)
    np.testing.assert_allclose(eight_prob, one_prob, rtol=1e-5)
    for name in names:
        assert eight[name].shape == (20, data.input_ids.shape[1])
        np.testing.assert_allclose(eight[name], one[name], rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------ command line


def test_cli_devices_flag(tiny_teacher_args, tmp_path, capsys):
    common = tiny_teacher_args
    assert main(["train-teacher", *common, "--devices", "9", "--output-dir",
                 str(tmp_path / "x")]) == 2
    assert "asked for 9 devices but only 8" in capsys.readouterr().err
    assert main(["train-teacher", *common, "--batch-size", "12", "--devices", "8",
                 "--output-dir", str(tmp_path / "y")]) == 2
    assert "batch of 12 examples" in capsys.readouterr().err
    # (a run over --devices 4 equals one over two processes: tests/test_multiprocess.py;
    # 8 devices equal 1 in the library: test_train_teacher_on_eight_devices_equals_one)
    assert parallel.resolve_mesh() is None  # the command's mesh does not outlive it


def test_cli_parallel_seeds_trains_each_seed_like_its_own_run(tiny_teacher_args, tmp_path,
                                                              capsys):
    common = [*tiny_teacher_args, "--devices", "8"]
    assert main(["train-teacher", *common, "--seed", "1", "--output-dir",
                 str(tmp_path / "alone")]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["train-teacher", *common, "--seeds", "2", "--parallel-seeds", "--output-dir",
                 str(tmp_path / "together")]) == 0
    together = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in together] == [0, 1]
    assert together[1]["steps"] == alone["steps"]
    assert together[1]["test"] == pytest.approx(alone["test"], abs=1 / 40)
    for seed in (0, 1):
        folder = tmp_path / "together" / f"seed{seed}"
        assert json.loads((folder / "config.json").read_text())["train"]["loop"]["seed"] == seed
        assert (folder / "model").is_dir()
        assert (folder / "checkpoints" / "metrics.jsonl").is_file()
    # A rerun reuses the finished seeds: nothing is trained or saved again.
    saved = {path: path.stat().st_mtime_ns
             for path in (tmp_path / "together").rglob("*") if path.is_file()}
    assert main(["train-teacher", *common, "--seeds", "2", "--parallel-seeds", "--output-dir",
                 str(tmp_path / "together")]) == 0
    assert json.loads(capsys.readouterr().out) == together
    assert {path: path.stat().st_mtime_ns
            for path in (tmp_path / "together").rglob("*") if path.is_file()} == saved
