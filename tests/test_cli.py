"""The `smat` command's process-wide effects: the persistent compilation cache is scoped to
one command, opt-out, and leaves JAX's global configuration as it found it (issue 12)."""

import contextlib
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from smat.cli import compile_cache_dir, main


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


def test_compile_cache_is_scoped_to_one_command(tiny_teacher, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\nboring and slow\n")
    cache = tmp_path / "cache"
    before = jax.config.jax_compilation_cache_dir
    with _cache_every_program():
        # --batch-size 3: shapes no earlier test compiled, so the command compiles afresh.
        assert main(_predict(tiny_teacher / "model", texts, "--batch-size", "3",
                             "--compile-cache", str(cache))) == 0
        written = sorted(cache.iterdir())
        assert written, "the command persisted none of its programs"
        assert jax.config.jax_compilation_cache_dir == before
        # A program compiled after the command returned is not written to its cache.
        jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.arange(7.0)).block_until_ready()
        assert sorted(cache.iterdir()) == written
    capsys.readouterr()


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


def test_tests_do_not_use_the_real_home():
    home = Path.home()
    assert home.name.startswith("smat-tests-home-"), home
