"""Tests for smat.compile_cache: one command's persistent cache, keyed by the machine."""

import contextlib
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from smat import compile_cache
from smat.cli import main
from smat.compile_cache import compile_cache_dir, machine_key


@contextlib.contextmanager
def _cache_every_program():
    """JAX skips caching programs that compile in under a second; cache all of them here."""
    names = ("jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    before = [getattr(jax.config, name) for name in names]
    jax.config.update(names[0], 0.0)
    jax.config.update(names[1], -1)
    try:
        yield
    finally:
        for name, value in zip(names, before, strict=True):
            jax.config.update(name, value)


def _predict(model: Path, texts: Path, *flags: str) -> list[str]:
    return ["predict", "--model", str(model), *flags, str(texts)]


def test_compile_cache_is_scoped_to_one_command(tiny_teacher, tmp_path, capsys, monkeypatch):
    # Whether XLA reloads cleanly depends on the CPU; this test is about scoping, so it
    # takes the cache as usable (the next test covers the probe).
    monkeypatch.setattr(compile_cache, "loads_cleanly", lambda folder: True)
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\nboring and slow\n")
    cache = tmp_path / "cache"
    before = jax.config.jax_compilation_cache_dir
    with _cache_every_program():
        # --batch-size 3: shapes no earlier test compiled, so the command compiles afresh.
        assert main(_predict(tiny_teacher / "model", texts, "--batch-size", "3",
                             "--compile-cache", str(cache))) == 0
        (keyed,) = cache.iterdir()  # one folder per machine kind
        assert keyed.name == machine_key()
        written = sorted(keyed.iterdir())
        assert written, "the command persisted none of its programs"
        assert jax.config.jax_compilation_cache_dir == before
        # A program compiled after the command returned is not written to its cache.
        jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.arange(7.0)).block_until_ready()
        assert sorted(keyed.iterdir()) == written
    capsys.readouterr()


def test_a_cached_command_prints_no_loader_complaints(tiny_teacher, tmp_path, capfd):
    """The second command loads what the first compiled (or, on a CPU where XLA refuses its
    own cached programs, compiles without the cache): either way no ``cpu_aot_loader`` line
    reaches the user. Checked once by hand: with the probe bypassed on a CPU whose XLA adds
    +prefer-no-gather, each loaded program printed such a line and this test failed."""
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n")
    cache = tmp_path / "cache"
    with _cache_every_program(), pytest.warns(UserWarning) if _refuses(cache) else \
            contextlib.nullcontext():
        for _ in range(2):
            jax.clear_caches()  # the second command must come to the disk cache
            assert main(_predict(tiny_teacher / "model", texts, "--batch-size", "5",
                                 "--compile-cache", str(cache))) == 0
    captured = capfd.readouterr()
    assert "cpu_aot_loader" not in captured.err and "SIGILL" not in captured.err


def _refuses(cache: Path) -> bool:
    """Whether this machine's XLA refuses its cached programs (the probe, run once here)."""
    return (jax.default_backend() == "cpu"
            and not compile_cache.loads_cleanly(cache / machine_key()))


def test_the_cache_folder_follows_the_machine(monkeypatch):
    monkeypatch.setattr(compile_cache, "_cpu_description", lambda: "x86_64 Xeon avx2 fma")
    avx2 = machine_key("cpu")
    assert machine_key("cpu") == avx2 and avx2.startswith("cpu-")
    monkeypatch.setattr(compile_cache, "_cpu_description",
                        lambda: "x86_64 Xeon avx2 avx512f fma")
    assert machine_key("cpu") != avx2


def test_compile_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("SMAT_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert compile_cache_dir(None) == Path.home() / ".cache" / "smat" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache_dir(None) == tmp_path / "jax"
    monkeypatch.setenv("SMAT_COMPILE_CACHE", str(tmp_path / "env"))
    assert compile_cache_dir(None) == tmp_path / "env"
    assert compile_cache_dir(str(tmp_path / "flag")) == tmp_path / "flag"
    for off in ("off", "OFF", "0", "false", "no"):
        assert compile_cache_dir(off) is None
    monkeypatch.setenv("SMAT_COMPILE_CACHE", "off")
    assert compile_cache_dir(None) is None


@pytest.mark.parametrize("opt_out", [["--no-compile-cache"], ["--compile-cache", "off"], []])
def test_compile_cache_opt_out(opt_out, tiny_teacher, tmp_path, monkeypatch, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n")
    cache = tmp_path / "cache"
    # With no flag, the environment variable turns the cache off (conftest sets it to off).
    monkeypatch.setenv("SMAT_COMPILE_CACHE", "off" if not opt_out else str(cache))
    with _cache_every_program():
        assert main(_predict(tiny_teacher / "model", texts, *opt_out)) == 0
    assert not cache.exists()
    capsys.readouterr()



def test_compile_seconds_count_a_new_program_and_not_a_compiled_one():
    import jax
    import jax.numpy as jnp

    from smat.compile_time import compile_seconds

    @jax.jit
    def program(x):
        return jnp.tanh(x @ x.T).sum()

    x = jnp.ones((64, 64))
    with compile_seconds() as first:
        program(x).block_until_ready()
    with compile_seconds() as again:
        program(x).block_until_ready()
    assert first() > 0
    assert again() == 0
