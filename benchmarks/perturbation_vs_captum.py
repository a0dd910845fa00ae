"""Lime and KernelShap throughput: smat (JAX/XLA) vs Captum (PyTorch), CPU.

Both sides explain the same all-MiniLM-L6-v2 classifier as ``ig_vs_captum.py`` (smat's
mean-pool head with fixed random weights; HF ``BertModel`` + the same head in torch) on the
same 64 sentences of 64 tokens, with token features (a removed token's word embedding
becomes 0), ``n_samples=200`` coalitions per sentence and predicted-class targets. Lime
uses Captum's default sampler and cosine kernel with a linear-regression surrogate on both
sides (Captum's own default surrogate is a Lasso); KernelShap is Captum's.

Each side runs at its best batching: smat explains ``--rows`` sentences per jitted call
with every ``chunk_size`` in ``--smat-chunks`` (coalitions per model call); Captum
explains one sentence per call (its Lime fits one surrogate per example) with every
``perturbations_per_eval`` in ``--captum-batches``. Times exclude compilation / warm-up.
Prints ``RESULT perturbation_vs_captum <ratio>`` (Captum's total seconds for both methods
over smat's, best setting each) as its last line and writes
benchmarks/results/perturbation_vs_captum.json.

Run: ``.venv/bin/python benchmarks/perturbation_vs_captum.py`` (about 10 minutes on 2 CPU
cores); ``--smoke`` uses a tiny model, 4 sentences of 16 tokens and 20 coalitions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from ig_vs_captum import (
    smat_classifier,
    spawn_worker,
    token_batch,
    torch_classifier,
    torch_device,
    torch_synchronize,
)

from smat.store.run_log import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULT_PATH = ROOT / "benchmarks" / "results" / "perturbation_vs_captum.json"
METHODS = ("lime", "kernel_shap")


def worker_smat(args) -> dict:
    import jax
    import jax.numpy as jnp

    import baselines

    _, tokenizer, (graphdef, params) = smat_classifier(args.smoke)
    ids = token_batch(tokenizer, batch_size=args.sentences, seq_len=args.seq_len,
                      vocab_size=tokenizer.vocab_size)
    seconds = {}
    for method in METHODS:
        explain = getattr(baselines, method)

        @jax.jit
        def run(rows, key, explain=explain):
            f, x, m = baselines.attribution_inputs(graphdef, params, input_ids=rows,
                                                   attention_mask=jnp.ones_like(rows))
            return explain(f, x, m, key=key, n_samples=args.n_samples,
                           chunk_size=args.chunk_size).attributions

        batches = [ids[i:i + args.rows] for i in range(0, len(ids), args.rows)]
        jax.block_until_ready(run(batches[0], jax.random.key(0)))  # compile
        start = time.perf_counter()
        for i, rows in enumerate(batches):
            jax.block_until_ready(run(rows, jax.random.key(i)))
        seconds[method] = time.perf_counter() - start
    return seconds


def worker_captum(args) -> dict:
    import torch
    from captum._utils.models.linear_model import SkLearnLinearRegression
    from captum.attr import KernelShap, Lime

    torch.set_num_threads(os.cpu_count())
    model, tokenizer, _ = smat_classifier(args.smoke)
    device = torch_device()
    forward, hf = torch_classifier(model, args.smoke, device=device)
    ids = torch.from_numpy(token_batch(tokenizer, batch_size=args.sentences,
                                       seq_len=args.seq_len,
                                       vocab_size=tokenizer.vocab_size).astype(np.int64))
    ids = ids.to(device)
    explainers = {"lime": Lime(forward, interpretable_model=SkLearnLinearRegression()),
                  "kernel_shap": KernelShap(forward)}
    feature_mask = torch.arange(args.seq_len, device=device)[None, :, None]
    seconds = {}
    with torch.no_grad():
        for method, explainer in explainers.items():
            def explain(row, explainer=explainer):
                x = hf.embeddings.word_embeddings(row).detach()
                mask = torch.ones_like(row)
                target = int(forward(x, mask).argmax(-1))
                return explainer.attribute(
                    x, target=target, additional_forward_args=(mask,),
                    feature_mask=feature_mask.expand(1, args.seq_len, x.shape[-1]),
                    n_samples=args.n_samples, perturbations_per_eval=args.chunk_size)

            explain(ids[:1])  # warm-up
            torch_synchronize()
            start = time.perf_counter()
            for i in range(len(ids)):
                explain(ids[i:i + 1])
            torch_synchronize()
            seconds[method] = time.perf_counter() - start
    return seconds


WORKERS = {"smat": worker_smat, "captum": worker_captum}


def spawn(kind: str, common: list[str], chunk: int) -> dict:
    return spawn_worker(__file__, kind, ["--chunk-size", str(chunk), *common])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--worker", choices=sorted(WORKERS))
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--n-samples", type=int, default=200)
    parser.add_argument("--rows", type=int, default=8, help="smat: sentences per call")
    parser.add_argument("--chunk-size", type=int, default=50)
    parser.add_argument("--smat-chunks", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--captum-batches", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--output", type=Path, default=RESULT_PATH)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    if args.smoke:
        args.sentences, args.seq_len, args.n_samples, args.rows = 4, 16, 20, 2
        args.smat_chunks = args.captum_batches = [10]
    common = ["--sentences", str(args.sentences), "--seq-len", str(args.seq_len),
              "--n-samples", str(args.n_samples), "--rows", str(args.rows)] + (
        ["--smoke"] if args.smoke else [])
    smat = {str(c): spawn("smat", common, c) for c in args.smat_chunks}
    captum = {str(c): spawn("captum", common, c) for c in args.captum_batches}

    def best(runs):  # the setting with the least total time over both methods
        return min(runs.values(), key=lambda r: sum(r.values()))

    best_smat, best_captum = best(smat), best(captum)
    ratio = sum(best_captum.values()) / sum(best_smat.values())
    result = {
        "benchmark": "perturbation_vs_captum",
        "metric": "explanations/s ratio smat / captum, Lime + KernelShap (best setting each)",
        "ratio": ratio,
        **{f"{side}_{method}_explanations_per_s": args.sentences / runs[method]
           for side, runs in (("smat", best_smat), ("captum", best_captum))
           for method in METHODS},
        "smat_seconds_by_chunk_size": smat,
        "captum_seconds_by_perturbations_per_eval": captum,
        "sentences": args.sentences, "seq_len": args.seq_len, "n_samples": args.n_samples,
        "smat_rows_per_call": args.rows, "smoke": args.smoke, "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
    }
    output = (args.output if not args.smoke
              else args.output.with_name("perturbation_vs_captum_smoke.json"))
    write_json_atomic(output, result)
    print(json.dumps(result, indent=2))
    print(f"RESULT perturbation_vs_captum {ratio:.2f}")


if __name__ == "__main__":
    main()
