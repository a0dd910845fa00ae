"""Seeds with vmap and batches sharded over devices: the teacher step, timed (design §8).

Two measurements in one process on the host CPU, split into 8 devices with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (set here before JAX is imported):

1. 4 seeds: ``smat.training.teacher.teacher_seed_step`` (one jitted program, ``teacher_update``
   vmapped over stacked parameters, optimizer states, per-seed batches and dropout keys)
   against 4 sequential runs of ``smat.training.teacher.teacher_step``, one per seed, on the same
   batches. The speedup is sequential time / vmapped time for one step of all 4 seeds.
2. Data parallelism: ``teacher_step`` with the state replicated and the batch sharded over
   ``data_mesh(8)`` against the same code on ``data_mesh(1)``. The 8 devices are fake (they
   share this machine's cores), so the ratio measures the cost of the sharded program
   (partitioning, the gradient all-reduce, per-device dispatch), not a speedup.

Compile time is excluded (one warm-up call per variant); each timing is the best of
``--repeats`` rounds of ``--steps`` steps. Prints ``RESULT parallel_seeds <speedup>`` as its
last line and writes benchmarks/results/parallel_seeds.json.

Run: ``.venv/bin/python benchmarks/parallel_seeds.py [--model small --batch-size 32]``
(about a minute on 2 CPU cores; ``--model tiny`` for a smoke run).
"""

from __future__ import annotations

import os

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8").strip()

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from smat.models import SequenceClassifier, TextConfig, functional  # noqa: E402
from smat.parallel import data_mesh, replicate, shard_batch  # noqa: E402
from smat.store.run_log import write_json_atomic  # noqa: E402
from smat.training.teacher import (  # noqa: E402
    TeacherTrainConfig,
    TrainState,
    teacher_optimizer,
    teacher_seed_step,
    teacher_step,
)

SEEDS = (0, 1, 2, 3)
MODELS = {
    "tiny": dict(),  # 2 layers, D = 32
    "small": dict(vocab_size=1000, hidden_size=128, embedding_size=128, num_layers=4, num_heads=4,
                  intermediate_size=512, max_position_embeddings=128),
    "minilm": None,  # all-MiniLM-L6-v2's shape, random weights
}


def make_batch(rng, *, batch_size, seq_len, vocab):
    lengths = rng.integers(seq_len // 4, seq_len + 1, batch_size)
    mask = (np.arange(seq_len)[None] < lengths[:, None]).astype(np.int32)
    ids = np.where(mask == 1, rng.integers(5, vocab, (batch_size, seq_len)), 0).astype(np.int32)
    labels = rng.integers(0, 2, batch_size).astype(np.int32)
    return ids, mask, np.zeros_like(ids), labels


def best_time(run, state, *, steps, repeats):
    """Warm up (compiles), then the best per-step seconds over `repeats` rounds."""
    state = run(state)
    jax.block_until_ready(state)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            state = run(state)
        jax.block_until_ready(state)
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small", choices=sorted(MODELS))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).parent / "results" / "parallel_seeds.json")
    args = parser.parse_args()

    config = (TextConfig.all_minilm_l6_v2() if MODELS[args.model] is None
              else TextConfig.tiny(**MODELS[args.model]))
    models = [SequenceClassifier(config, num_labels=2, rngs=nnx.Rngs(s)) for s in SEEDS]
    graphdef = functional.split(models[0])[0]
    params = [functional.split(model)[1] for model in models]
    optimizer = teacher_optimizer(TeacherTrainConfig(warmup_steps=10), 10_000)
    rng = np.random.default_rng(0)
    batches = [make_batch(rng, batch_size=args.batch_size, seq_len=args.seq_len,
                          vocab=config.vocab_size) for _ in SEEDS]
    keys = [jax.random.key(s) for s in SEEDS]
    task = dict(optimizer=optimizer, task="classification")

    def fresh(p):
        p = jax.tree.map(jnp.copy, p)
        return TrainState(jnp.zeros((), jnp.int32), p, optimizer.init(p))

    timing = dict(steps=args.steps, repeats=args.repeats)

    # 1. Four seeds: sequential runs vs one vmapped program.
    def sequential(states):
        return [teacher_step(graphdef, s, *b, k, **task)[0]
                for s, b, k in zip(states, batches, keys, strict=True)]

    sequential_s = best_time(sequential, [fresh(p) for p in params], **timing)
    stacked_batch = tuple(np.stack(field) for field in zip(*batches, strict=True))
    stacked_keys = jnp.stack(keys)

    def vmapped(states):
        return teacher_seed_step(graphdef, states, *stacked_batch, stacked_keys, **task)[0]

    stacked = jax.tree.map(lambda *x: jnp.stack(x), *(fresh(p) for p in params))
    vmapped_s = best_time(vmapped, stacked, **timing)

    record = {
        "benchmark": "parallel_seeds", "model": args.model,
        "model_shape": {k: getattr(config, k) for k in ("hidden_size", "num_layers", "num_heads",
                                                        "intermediate_size")},
        "batch_size": args.batch_size, "seq_len": args.seq_len, "seeds": len(SEEDS),
        **timing,
        "sequential_4_seeds_s_per_step": round(sequential_s, 5),
        "vmapped_4_seeds_s_per_step": round(vmapped_s, 5),
        "speedup_vmapped_vs_sequential": round(sequential_s / vmapped_s, 3),
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
        "platform": jax.devices()[0].platform,
        "cpu_cores": os.cpu_count(), "machine": platform.machine(), "jax": jax.__version__,
    }
    if jax.device_count() > 1:
        record.update(sharded_timings(graphdef, params, batches, keys, stacked_batch,
                                      stacked_keys, fresh, task, timing))
    write_json_atomic(args.output, record)
    print(json.dumps(record, indent=2))
    print(f"RESULT parallel_seeds {record['speedup_vmapped_vs_sequential']:.3f}")


def sharded_timings(graphdef, params, batches, keys, stacked_batch, stacked_keys, fresh, task,
                    timing) -> dict:
    """One seed with its batch sharded over every device vs 1 device, and 4 seeds sharded."""
    devices = jax.device_count()

    def sharded_time(num_devices):
        mesh = data_mesh(num_devices)
        batch = shard_batch(batches[0], mesh)
        key = replicate(keys[0], mesh)
        return best_time(lambda s: teacher_step(graphdef, s, *batch, key, **task)[0],
                         replicate(fresh(params[0]), mesh), **timing)

    one_device_s, all_devices_s = sharded_time(1), sharded_time(devices)

    # Both at once: 4 vmapped seeds with every batch sharded over all devices.
    mesh = data_mesh(devices)
    sharded_stack = shard_batch(stacked_batch, mesh, axis=1)
    sharded_keys = replicate(stacked_keys, mesh)
    vmapped_sharded_s = best_time(
        lambda s: teacher_seed_step(graphdef, s, *sharded_stack, sharded_keys, **task)[0],
        replicate(jax.tree.map(lambda *x: jnp.stack(x), *(fresh(p) for p in params)), mesh),
        **timing)
    return {
        "one_device_s_per_step": round(one_device_s, 5),
        f"{devices}_devices_s_per_step": round(all_devices_s, 5),
        f"sharded_overhead_{devices}_vs_1": round(all_devices_s / one_device_s, 3),
        f"vmapped_4_seeds_on_{devices}_devices_s_per_step": round(vmapped_sharded_s, 5),
    }

if __name__ == "__main__":
    main()
