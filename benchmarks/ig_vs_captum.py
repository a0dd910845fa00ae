"""Integrated Gradients throughput and memory: smat (JAX/XLA) vs Captum (PyTorch), CPU.

Both sides explain the same all-MiniLM-L6-v2 classifier (smat ``pooling="mean"`` head with
fixed random weights; on the torch side HF ``BertModel`` + the same mean-pool/linear head,
the model the parity tests compare) on the same batch of 8 x 64 real tokens (random
vocabulary ids between [CLS] and [SEP]), attributing at the word embeddings with a zero
baseline, ``n_steps=50``, gauss-legendre, predicted-class targets.

- Throughput: explanations/s of one timed run after a warm-up (compile excluded), for each
  setting of Captum's ``internal_batch_size`` and of smat's ``chunk_size``; the best of each
  side is compared.
- Peak memory: each setting runs in its own process; the peak resident set of the timed
  run above the resident set before it (Linux ``/proc/self/clear_refs`` + ``VmHWM``).
- Achieved GFLOP/s of smat over the measured float32 matmul peak of XLA on this machine
  (best of a 2048^3 matmul). The FLOPs are the model's matmul FLOPs counted from its
  shape (:func:`ig_matmul_flops`: forward plus the input-gradient backward, per step);
  XLA's own cost analysis is recorded too, but on CPU it reports about a sixth of that
  count for the same program, so it cannot be the yardstick.
- The bound on the ratio: both sides do the same matmuls, so no float32 implementation
  can exceed Captum's throughput by more than the best measured matmul rate (XLA or
  PyTorch, 2048^3) over Captum's achieved GFLOP/s (``ratio_bound_at_matmul_peak``).
- Memory scaling: XLA's compiled temporary-buffer size of smat IG at ``n_steps=512`` over
  ``n_steps=32`` with the same ``chunk_size`` (compile only; the run itself would take
  minutes on 2 cores).

Torch and XLA both use all of the machine's cores (torch.set_num_threads(os.cpu_count())).
Prints ``RESULT ig_vs_captum <throughput ratio smat / captum>`` as its last line and writes
benchmarks/results/ig_vs_captum.json.

Run: ``.venv/bin/python benchmarks/ig_vs_captum.py`` (several minutes on 2 CPU cores);
``--smoke`` uses a 2-layer tiny model, 2 x 16 tokens and 8 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from smat.store.run_log import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULT_PATH = ROOT / "benchmarks" / "results" / "ig_vs_captum.json"


# ------------------------------------------------------------------ memory helpers


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _reset_peak() -> int:
    """Reset the peak-RSS counter; return the current RSS in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS")


# ------------------------------------------------------------------ shared setup


def token_batch(tokenizer, *, batch_size: int, seq_len: int, vocab_size: int) -> np.ndarray:
    """Random vocabulary ids between [CLS] and [SEP] (seeded): the benchmarks' sentences."""
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, vocab_size, size=(batch_size, seq_len)).astype(np.int32)
    ids[:, 0] = tokenizer.cls_token_id
    ids[:, -1] = tokenizer.sep_token_id
    return ids


def smat_classifier(smoke: bool):
    """The MiniLM (or, smoke, tiny) classifier with a fixed random mean-pool head, its
    tokenizer and its (graphdef, params)."""
    from smat.models import from_pretrained, functional, minilm_path

    model, tokenizer = from_pretrained(minilm_path(), task="classification", num_labels=3,
                                       pooling="mean", seed=0)
    if smoke:
        from flax import nnx

        from smat.models import SequenceClassifier, TextConfig

        model = SequenceClassifier(TextConfig.tiny(vocab_size=tokenizer.vocab_size),
                                   num_labels=3, pooling="mean", rngs=nnx.Rngs(0))
    return model, tokenizer, functional.split(model)


def smat_setting(text: str) -> tuple[int, int]:
    """(batch_size, length_multiple) from a "BxM" setting string (the dataset benchmarks'
    ``--smat-settings``)."""
    try:
        batch_size, length_multiple = map(int, text.split("x"))
    except ValueError:
        raise ValueError(f"a smat setting is BATCHxMULTIPLE, e.g. 8x4; got {text!r}") from None
    return batch_size, length_multiple


def batch_shapes(attention_mask: np.ndarray, setting: tuple[int, int]) -> list[tuple[int, int]]:
    """(rows, columns) of each batch of smat's length-sorted evaluation
    (:func:`smat.models.inference.map_batches`) of `attention_mask` at a (batch_size,
    length_multiple) setting."""
    from smat.data import length_sorted_batches, padded_length

    batch_size, length_multiple = setting
    return [(len(rows), padded_length(attention_mask[rows], length_multiple))
            for rows, _ in length_sorted_batches(attention_mask, batch_size=batch_size)]


def ig_matmul_flops(config, batch_size: int, seq_len: int, n_steps: int) -> float:
    """Matmul FLOPs of IG on a BERT-style encoder: n_steps x (forward + input gradient).

    Per layer and token, the forward's dense layers cost 2(4D^2 + 2DF) (Q, K, V, output,
    and the two feed-forward matmuls) and attention 4TD (QK^T and AV); the backward to the
    inputs (no weight gradients) repeats the dense part once and attention twice (both
    operands of each attention product are activations).
    """
    d, f, t = config.hidden_size, config.intermediate_size, seq_len
    dense = 2 * (4 * d * d + 2 * d * f)
    per_token = 2 * dense + 3 * (4 * t * d)
    return float(n_steps * config.num_layers * batch_size * seq_len * per_token)


def progress(message: str) -> None:
    """A time-stamped line on stderr, at once (a worker's stages show in a timed-out log)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def torch_device() -> str:
    """"cuda" when PyTorch sees a GPU (the peer then runs on it too), else "cpu".

    On a GPU, PyTorch's float32 matmuls are then allowed TF32, as XLA's are by default
    (JAX's default matmul precision), so both sides do the same arithmetic.
    """
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    return "cuda"


def torch_synchronize() -> None:
    """Wait for queued GPU work, so a wall-clock timer measures it (no-op on CPU)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ------------------------------------------------------------------ workers


def worker_smat(args) -> dict:
    import jax
    import jax.numpy as jnp

    import baselines

    model, tokenizer, (graphdef, params) = smat_classifier(args.smoke)
    ids = token_batch(tokenizer, batch_size=args.batch_size, seq_len=args.seq_len,
                      vocab_size=tokenizer.vocab_size)
    mask = np.ones_like(ids)
    f, x, m = baselines.attribution_inputs(graphdef, params, input_ids=ids, attention_mask=mask)

    def explain(z, n_steps, chunk_size):
        return baselines.integrated_gradients(f, z, m, n_steps=n_steps,
                                              chunk_size=chunk_size).attributions

    run = jax.jit(explain, static_argnums=(1, 2))
    compiled = run.lower(x, args.n_steps, args.chunk_size).compile()
    # XLA's cost analysis does not multiply a scanned loop body by its trip count, so
    # count one unrolled gradient step (forward + backward at batch B) times n_steps.
    target = jnp.argmax(f(x, m), -1)
    one_step = jax.jit(jax.grad(lambda z: jnp.sum(
        jnp.take_along_axis(f(z, m), target[:, None], axis=1))))
    cost = one_step.lower(x).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = {"flops": ig_matmul_flops(model.encoder.config, args.batch_size, args.seq_len,
                                      args.n_steps),
             "xla_cost_analysis_flops": cost["flops"] * args.n_steps}
    jax.block_until_ready(compiled(x))  # warm-up
    rss = _reset_peak()
    start = time.perf_counter()
    jax.block_until_ready(compiled(x))
    seconds = time.perf_counter() - start
    peak = _status_kib("VmHWM") - rss
    result = {"seconds": seconds, "peak_mib": peak / 1024,
              **{k: float(v) for k, v in flops.items()}}
    if args.memory_steps:
        temp = {}
        for n in args.memory_steps:
            analysis = run.lower(x, n, args.chunk_size).compile().memory_analysis()
            temp[str(n)] = analysis.temp_size_in_bytes / 2**20
        result["compiled_temp_mib"] = temp
    return result


def torch_classifier(model, smoke: bool, device: str = "cpu"):
    """The same classifier in PyTorch: HF ``BertModel`` (MiniLM weights, or a random tiny
    one) + the smat model's mean-pool / linear head, on `device`. Returns
    ``(forward(x, mask), hf)``."""
    import torch
    from transformers import BertModel

    from smat.models import minilm_path

    if smoke:
        from transformers import BertConfig

        cfg = model.encoder.config
        hf = BertModel(BertConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
                                  num_hidden_layers=cfg.num_layers,
                                  num_attention_heads=cfg.num_heads,
                                  intermediate_size=cfg.intermediate_size,
                                  max_position_embeddings=cfg.max_position_embeddings),
                       add_pooling_layer=False).eval()
    else:
        hf = BertModel.from_pretrained(minilm_path(), add_pooling_layer=False).eval()
    kernel = np.array(model.classifier.kernel[...])
    head = torch.nn.Linear(*kernel.shape)
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(kernel.T.copy()))
        head.bias.copy_(torch.from_numpy(np.array(model.classifier.bias[...])))
    hf.to(device)
    head.to(device)

    def forward(x, mask):
        hidden = hf(inputs_embeds=x, attention_mask=mask).last_hidden_state
        m = mask.to(hidden.dtype).unsqueeze(-1)
        return head((hidden * m).sum(1) / m.sum(1))

    return forward, hf


def worker_captum(args) -> dict:
    import torch
    from captum.attr import IntegratedGradients

    torch.set_num_threads(os.cpu_count())
    model, tokenizer, _ = smat_classifier(args.smoke)
    device = torch_device()
    forward, hf = torch_classifier(model, args.smoke, device=device)
    ids = torch.from_numpy(token_batch(tokenizer, batch_size=args.batch_size,
                                       seq_len=args.seq_len,
                                       vocab_size=tokenizer.vocab_size).astype(np.int64))
    ids = ids.to(device)
    mask = torch.ones_like(ids)

    x = hf.embeddings.word_embeddings(ids).detach()
    with torch.no_grad():
        target = forward(x, mask).argmax(-1)
    ig = IntegratedGradients(forward)
    batch_rows = None if args.internal_batch_size == 0 else args.internal_batch_size

    def explain(n_steps):
        return ig.attribute(x, target=target, additional_forward_args=(mask,), n_steps=n_steps,
                            method="gausslegendre", internal_batch_size=batch_rows)

    explain(2)  # warm-up
    torch_synchronize()
    rss = _reset_peak()
    start = time.perf_counter()
    explain(args.n_steps)
    torch_synchronize()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mib": (_status_kib("VmHWM") - rss) / 1024}


def _matmul_gflops(n: int, run) -> float:
    """Best of 5 timed float32 (n, n) @ (n, n) products, after one warm-up; GFLOP/s."""
    run()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def worker_matmul(args) -> dict:
    import jax
    import jax.numpy as jnp

    n = 1024 if args.smoke else 2048
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    dot = jax.jit(jnp.dot)
    return {"gflops": _matmul_gflops(n, lambda: jax.block_until_ready(dot(a, a)))}


def worker_torch_matmul(args) -> dict:
    import torch

    torch.set_num_threads(os.cpu_count())
    n = 1024 if args.smoke else 2048
    a = torch.randn(n, n, dtype=torch.float32, device=torch_device())

    def product():
        a @ a
        torch_synchronize()

    return {"gflops": _matmul_gflops(n, product)}


WORKERS = {"smat": worker_smat, "captum": worker_captum, "matmul": worker_matmul,
           "torch_matmul": worker_torch_matmul}


def spawn_worker(script: str | Path, kind: str, arguments: list[str]) -> dict:
    """Run ``script --worker kind *arguments`` in its own process and return the JSON it
    prints last. The worker's stderr (progress, errors) goes to this process's as it
    happens, so a failure shows its cause."""
    cmd = [sys.executable, str(script), "--worker", kind, *arguments]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    if out.returncode:
        raise RuntimeError(f"worker {kind} of {Path(script).name} failed (exit "
                           f"{out.returncode}; its stderr is above)")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spawn(kind: str, common: list[str], extra: list[str]) -> dict:
    return spawn_worker(__file__, kind, [*common, *extra])


# ------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--worker", choices=sorted(WORKERS))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--n-steps", type=int, default=50)
    parser.add_argument("--chunk-size", type=int, default=25)
    parser.add_argument("--internal-batch-size", type=int, default=0, help="0 = None")
    parser.add_argument("--memory-steps", type=int, nargs="*", default=[])
    parser.add_argument("--output", type=Path, default=RESULT_PATH)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    if args.smoke:
        args.batch_size, args.seq_len, args.n_steps = 2, 16, 8
    common = ["--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len),
              "--n-steps", str(args.n_steps)] + (["--smoke"] if args.smoke else [])
    rows = args.batch_size * args.n_steps
    captum_settings = [0, rows // 2, rows // 5]  # None (all rows at once), 2 and 5 batches
    smat_chunks = [args.n_steps, args.n_steps // 2, max(args.n_steps // 5, 1)]
    memory_chunk, memory_steps = (4, [8, 32]) if args.smoke else (16, [32, 512])

    matmul = spawn("matmul", common, [])
    torch_matmul = spawn("torch_matmul", common, [])
    captum = {str(s): spawn("captum", common, ["--internal-batch-size", str(s)])
              for s in captum_settings}
    smat = {str(c): spawn("smat", common, ["--chunk-size", str(c)]) for c in smat_chunks}
    memory = spawn("smat", common, ["--chunk-size", str(memory_chunk), "--memory-steps",
                                    *map(str, memory_steps)])["compiled_temp_mib"]

    best_captum = min(captum.values(), key=lambda r: r["seconds"])
    best_smat = min(smat.values(), key=lambda r: r["seconds"])
    ratio = best_captum["seconds"] / best_smat["seconds"]
    achieved = best_smat["flops"] / best_smat["seconds"] / 1e9
    # Both sides do the same matmuls (Captum's autograd.grad also skips weight gradients),
    # so no float32 implementation on this machine can beat Captum by more than the best
    # matmul rate over Captum's achieved rate.
    captum_achieved = best_smat["flops"] / best_captum["seconds"] / 1e9
    peak = max(matmul["gflops"], torch_matmul["gflops"])
    small, large = (memory[str(n)] for n in memory_steps)
    result = {
        "benchmark": "ig_vs_captum",
        "metric": "IG explanations/s ratio smat / captum (best setting each)",
        "ratio": ratio,
        "smat_explanations_per_s": args.batch_size / best_smat["seconds"],
        "captum_explanations_per_s": args.batch_size / best_captum["seconds"],
        "smat_runs_by_chunk_size": smat,
        "captum_runs_by_internal_batch_size (0 = None)": captum,
        "smat_peak_mib": best_smat["peak_mib"],
        "captum_peak_mib": best_captum["peak_mib"],
        "smat_achieved_gflops": achieved,
        "matmul_peak_gflops": matmul["gflops"],
        "fraction_of_matmul_peak": achieved / matmul["gflops"],
        "captum_achieved_gflops": captum_achieved,
        "torch_matmul_peak_gflops": torch_matmul["gflops"],
        "ratio_bound_at_matmul_peak": peak / captum_achieved,
        "flop_count": "model matmul FLOPs (ig_matmul_flops); XLA's count in the runs",
        "compiled_temp_mib_by_n_steps": memory,
        "memory_chunk_size": memory_chunk,
        f"memory_ratio_{memory_steps[1]}_over_{memory_steps[0]}": large / small,
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "n_steps": args.n_steps,
        "smoke": args.smoke,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
    }
    output = args.output if not args.smoke else args.output.with_name("ig_vs_captum_smoke.json")
    write_json_atomic(output, result)
    print(json.dumps(result, indent=2))
    print(f"RESULT ig_vs_captum {ratio:.2f}")


if __name__ == "__main__":
    main()
