"""Throughput of smat's batched AOPC (comprehensiveness + sufficiency) vs a per-example loop.

Both sides use the same jitted model function ``predict(params, ids, mask, tt) -> probs``
of a randomly initialised smat ``SequenceClassifier`` and ERASER's five bins, on examples
of random real length between T/4 and T padded to T tokens:

- smat: ``smat.evaluation.batched_comprehensiveness_sufficiency`` — examples in
  length-sorted batches, each cut to its longest row (rounded up to 16 columns); every
  perturbed input of every bin of a batch is built and scored in one jitted computation.
- peer: the common implementation pattern — a Python loop over examples that ranks
  the tokens on the host, builds that example's 1 + 2 * 5 perturbed inputs with NumPy,
  cuts them to the example's own length (rounded up to 16 columns, like smat) and scores
  them with one call of the same jitted model (so the peer already batches over bins and
  skips padding; only the loop over examples remains).

Secondary numbers: smat without cutting padding (``length_multiple = T``), the naive loop
with one model call per perturbed input, and a bound: the model calls alone on smat's
batches with every perturbed input built beforehand (``model_only_seconds``); no
implementation batched this way can beat the loop by more than loop time / that time
(``ratio_bound_model_only``). The results of both sides are checked to
agree before timing. Compile time is excluded (each side is run once first). Prints
``RESULT aopc_batched <examples/s ratio>`` as its last line and writes
benchmarks/results/aopc_batched.json.

Run: ``.venv/bin/python benchmarks/aopc_batched.py [--examples 256 --batch-size 16 --model tiny]``
(under a minute on 2 CPU cores with the defaults; on a GPU pass ``--batch-size 128`` or more).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import platform
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from jax.tree_util import Partial

from smat.data import length_sorted_batches, padded_length
from smat.evaluation import DEFAULT_BINS, batched_comprehensiveness_sufficiency
from smat.models import SequenceClassifier, TextConfig, functional
from smat.store.run_log import write_json_atomic

MASK_ID = 3
LENGTH_MULTIPLE = 16


def build_model(name: str, seq_len: int):
    if name == "tiny":
        config = TextConfig.tiny(max_position_embeddings=max(64, seq_len))
    elif name == "minilm":
        config = TextConfig.all_minilm_l6_v2()
    else:
        raise ValueError(f"Unknown --model {name!r}; choose 'tiny' or 'minilm'.")
    model = SequenceClassifier(config, num_labels=2, pooling="cls", rngs=nnx.Rngs(0))
    graphdef, params = functional.split(model)

    def predict(params, input_ids, attention_mask, token_type_ids):
        out = functional.apply(graphdef, params, input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids, attention="none")
        return jax.nn.softmax(out.logits, axis=-1)

    return config, params, predict


def make_data(num: int, seq_len: int, vocab: int, seed: int):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq_len // 4, seq_len + 1, num)
    pos = np.arange(seq_len)[None]
    att = (pos < lengths[:, None]).astype(np.int32)
    ids = rng.integers(5, vocab, (num, seq_len)).astype(np.int32)
    ids[:, 0] = 1  # [CLS]
    ids[np.arange(num), lengths - 1] = 2  # [SEP]
    ids = np.where(att == 1, ids, 0).astype(np.int32)
    special = (ids <= 2) | (att == 0)
    scores = rng.normal(size=(num, seq_len)).astype(np.float32)
    return ids, att, np.zeros_like(ids), special, scores


def perturbed_inputs(ids, att, special, scores, length):
    """One example's 1 + 2 * 5 inputs (full, comprehensiveness bins, sufficiency bins),
    built with NumPy on the host and cut to `length` columns."""
    ids, att = ids[:length], att[:length]
    maskable = np.flatnonzero((att == 1) & ~special[:length])
    order = maskable[np.argsort(-scores[:length][maskable], kind="stable")]
    variants = [ids]
    for keep in (False, True):
        for q in DEFAULT_BINS:
            k = min(max(1, math.ceil(round(q * len(maskable), 9))), len(maskable))
            v = ids.copy()
            v[order[k:] if keep else order[:k]] = MASK_ID
            variants.append(v)
    return np.stack(variants)


def model_only_seconds(predict_jit, params, ids, att, tt, special, scores, batch_size):
    """Seconds of the model calls alone on smat's length-sorted batches, with every perturbed
    input built beforehand: a floor for any AOPC implementation batched this way, so
    ``loop seconds / this`` bounds the ratio any of them can reach against the loop."""
    calls = []
    for rows, _ in length_sorted_batches(att, batch_size=batch_size):
        length = padded_length(att[rows], LENGTH_MULTIPLE)
        x = np.concatenate([perturbed_inputs(ids[r], att[r], special[r], scores[r], length)
                            for r in rows])
        n = len(x) // len(rows)
        calls.append((x, np.repeat(att[rows, :length], n, axis=0),
                      np.repeat(tt[rows, :length], n, axis=0)))
    for call in calls:  # compile each shape
        jax.block_until_ready(predict_jit(params, *call))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready([predict_jit(params, *call) for call in calls])
        best = min(best, time.perf_counter() - start)
    return best


def loop_aopc(predict_jit, params, ids, att, tt, special, scores, per_input=False):
    """Reference: per-example host loop, one model call per example (all its variants).

    Each example is cut to its own length rounded up to LENGTH_MULTIPLE columns. With
    ``per_input=True`` each perturbed input gets its own model call (the naive loop over
    examples and bins), reported as a secondary number.
    """
    comp, suff = np.zeros(len(ids)), np.zeros(len(ids))
    for b in range(len(ids)):
        length = padded_length(att[b:b + 1], LENGTH_MULTIPLE)
        x = perturbed_inputs(ids[b], att[b], special[b], scores[b], length)
        n = len(x)
        a = np.broadcast_to(att[b, :length], (n, length))
        t = np.broadcast_to(tt[b, :length], (n, length))
        if per_input:
            probs = np.concatenate([np.asarray(predict_jit(params, x[i:i + 1], a[i:i + 1],
                                                           t[i:i + 1])) for i in range(n)])
        else:
            probs = np.asarray(predict_jit(params, x, a, t))
        y = int(np.argmax(probs[0]))
        p = probs[:, y]
        kbins = len(DEFAULT_BINS)
        comp[b] = np.mean(p[0] - p[1:1 + kbins])
        suff[b] = np.mean(p[0] - p[1 + kbins:])
    return comp, suff


def batched_aopc(predict, params, ids, att, tt, special, scores, batch_size,
                 length_multiple=LENGTH_MULTIPLE):
    r = batched_comprehensiveness_sufficiency(
        Partial(predict, params), ids, scores, attention_mask=att, special_tokens_mask=special,
        token_type_ids=tt, replacement_id=MASK_ID, batch_size=batch_size,
        length_multiple=length_multiple)
    return r.comprehensiveness, r.sufficiency  # numpy: the computation has finished


def time_both(predict, predict_jit, params, data, args):
    """Seconds for the per-example loop, the per-input loop, smat and smat without cutting
    padding, each warmed up (compiled for every shape it meets) first."""
    att = data[1]
    first_of_length = {padded_length(att[i:i + 1], LENGTH_MULTIPLE): i for i in range(len(att))}
    warm = sorted(first_of_length.values())
    loop_aopc(predict_jit, params, *(x[warm] for x in data))  # compile (11, L) per length
    loop_aopc(predict_jit, params, *(x[warm] for x in data), per_input=True)  # (1, L)
    untrimmed = functools.partial(batched_aopc, length_multiple=args.seq_len)
    batched_aopc(predict, params, *data, args.batch_size)
    untrimmed(predict, params, *data, args.batch_size)
    t_loop, _ = best_of(lambda: loop_aopc(predict_jit, params, *data), args.repeats)
    t_per_input, _ = best_of(lambda: loop_aopc(predict_jit, params, *data, per_input=True), 1)
    t_ours, _ = best_of(lambda: batched_aopc(predict, params, *data, args.batch_size),
                        args.repeats)
    t_untrimmed, _ = best_of(lambda: untrimmed(predict, params, *data, args.batch_size),
                             args.repeats)
    return t_loop, t_per_input, t_ours, t_untrimmed


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16,
                        help="examples per AOPC call (x11 model rows); on CPU large batches "
                             "leave the cache, on an accelerator use 128 or more")
    parser.add_argument("--model", default="tiny", choices=["tiny", "minilm"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--matmul-precision", default="default",
                        choices=["default", "high", "highest"],
                        help="precision of the timed runs (GPU: 'default' allows TF32)")
    parser.add_argument("--output", type=Path,
                        default=Path(__file__).parent / "results" / "aopc_batched.json")
    args = parser.parse_args()

    config, params, predict = build_model(args.model, args.seq_len)
    data = make_data(args.examples, args.seq_len, config.vocab_size, seed=0)
    predict_jit = jax.jit(predict)

    # Warm-up (compiles each side's shapes), then check both compute the same numbers.
    # The loop compiles once per distinct cut length (at most T / 16 shapes of 11 rows).
    # The check runs in full float32 (no TF32 on GPU), where both sides agree to rounding.
    with jax.default_matmul_precision("highest"):
        ref = loop_aopc(predict_jit, params, *data)
        ours = batched_aopc(predict, params, *data, args.batch_size)
    np.testing.assert_allclose(ours[0], ref[0], atol=1e-4)
    np.testing.assert_allclose(ours[1], ref[1], atol=1e-4)
    with jax.default_matmul_precision(args.matmul_precision):
        timings = time_both(predict, predict_jit, params, data, args)

    t_loop, t_per_input, t_ours, t_untrimmed = timings
    with jax.default_matmul_precision(args.matmul_precision):
        t_model = model_only_seconds(predict_jit, params, *data, args.batch_size)
    ratio = t_loop / t_ours
    result = {
        "benchmark": "aopc_batched",
        "metric": "examples/s ratio (smat batched / per-example loop)",
        "ratio": ratio,
        "smat_examples_per_s": args.examples / t_ours,
        "loop_examples_per_s": args.examples / t_loop,
        "smat_seconds": t_ours,
        "loop_seconds": t_loop,
        "smat_untrimmed_examples_per_s": args.examples / t_untrimmed,
        "ratio_untrimmed": t_loop / t_untrimmed,
        "length_multiple": LENGTH_MULTIPLE,
        "model_only_seconds": t_model,
        "ratio_bound_model_only": t_loop / t_model,
        "per_input_loop_examples_per_s": args.examples / t_per_input,
        "ratio_vs_per_input_loop": t_per_input / t_ours,
        "examples": args.examples,
        "seq_len": args.seq_len,
        "batch_size": args.batch_size,
        "bins": list(DEFAULT_BINS),
        "model": args.model,
        "matmul_precision": args.matmul_precision,
        "device": str(jax.devices()[0]),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "max_abs_diff": float(max(np.abs(ours[0] - ref[0]).max(), np.abs(ours[1] - ref[1]).max())),
    }
    write_json_atomic(args.output, result)
    print(json.dumps(result, indent=2))
    print(f"RESULT aopc_batched {ratio:.2f}")


if __name__ == "__main__":
    main()
