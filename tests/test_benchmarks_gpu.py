"""benchmarks/gpu.py: the stand-in MiniLM package built from float16 weights, and the
workers' persistent compilation cache."""

import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def model_folder(source: Path, dtype) -> tuple[Path, np.ndarray, np.ndarray]:
    """A tiny model folder: one float weight of `dtype`, an integer buffer, a vocabulary."""
    source.mkdir()
    weight = np.linspace(-2, 2, 6, dtype=dtype).reshape(2, 3)
    positions = np.arange(5, dtype=np.int64)[None]
    save_file({"encoder.weight": weight, "embeddings.position_ids": positions},
              source / "model.safetensors")
    (source / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    return source, weight, positions


def test_stand_in_casts_float_weights_and_keeps_integer_buffers(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gpu

    source, weight, positions = model_folder(tmp_path / "minilm16", np.float16)

    described = gpu.stand_in_package(tmp_path / "site", source)

    folder = tmp_path / "site" / gpu.MINILM_PACKAGE / "model"
    tensors = load_file(folder / "model.safetensors")
    assert tensors["encoder.weight"].dtype == np.float32
    np.testing.assert_array_equal(tensors["encoder.weight"], weight.astype(np.float32))
    assert tensors["embeddings.position_ids"].dtype == np.int64
    np.testing.assert_array_equal(tensors["embeddings.position_ids"], positions)
    assert (folder / "vocab.txt").read_text() == "[PAD]\n[UNK]\n"
    assert described == f"{source} (stored as float16, run as float32)"


def test_compile_cache_keeps_the_workers_programs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gpu

    cache = tmp_path / "jax-cache"
    env, _ = gpu.worker_environment(tmp_path, None, cache)
    program = "import jax, jax.numpy as jnp; print(jax.jit(lambda x: jnp.sin(x) * 3)(2.0))"

    assert gpu.cached_programs(cache) == 0
    subprocess.run([sys.executable, "-c", program], env=env, check=True, capture_output=True,
                   timeout=120)
    # the worker's program is on disk, though it compiled in well under JAX's default 1 s
    assert gpu.cached_programs(cache) >= 1
    assert gpu.cached_programs(None) is None


def test_pack_stores_float_weights_as_float16_that_the_stand_in_reads_back(tmp_path,
                                                                           monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import gpu

    source, weight, positions = model_folder(tmp_path / "minilm", np.float32)

    data = tmp_path / "data" / "imdb_maas"
    data.mkdir(parents=True)
    (data / "test.jsonl.gz").write_bytes(b"reviews")
    (data / "PROVENANCE.md").write_text("where from")
    gpu.pack_payload(tmp_path / "payload", source, wheels=[], data=tmp_path / "data")
    assert (tmp_path / "payload" / "imdb_maas" / "test.jsonl.gz").read_bytes() == b"reviews"

    packed = load_file(tmp_path / "payload" / "minilm16" / "model.safetensors")
    assert packed["encoder.weight"].dtype == np.float16
    assert packed["embeddings.position_ids"].dtype == np.int64
    assert (tmp_path / "payload" / "minilm16" / "vocab.txt").read_text() == "[PAD]\n[UNK]\n"
    gpu.stand_in_package(tmp_path / "site", tmp_path / "payload" / "minilm16")
    back = load_file(tmp_path / "site" / gpu.MINILM_PACKAGE / "model" / "model.safetensors")
    np.testing.assert_allclose(back["encoder.weight"], weight, rtol=1e-3)
    np.testing.assert_array_equal(back["embeddings.position_ids"], positions)
