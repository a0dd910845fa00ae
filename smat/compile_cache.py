"""The persistent compilation cache of one `smat` command, keyed by the machine it runs on.

A compiled XLA program is machine code for one kind of device: a CPU program built with
AVX-512 instructions raises SIGILL on a CPU without them. The cache folder is therefore one
sub-folder per machine kind (:func:`machine_key`: the backend, the CPU's model and
instruction-set flags or the accelerator's kind, and the jaxlib version), so a program is
only ever loaded where it was compiled.

On some CPUs XLA refuses its own cached programs: it records LLVM tuning preferences
(``+prefer-no-gather``) among the CPU features a program needs and then finds them missing
on the very same host, logs an error line per program (``cpu_aot_loader.cc``) and compiles
again (jax-ml/jax#38445, openxla/xla#44565). :func:`loads_cleanly` finds this out once per
machine key with a tiny program in two child processes; where the cache cannot load
cleanly, commands compile without it (the line would be noise and the cache saves nothing).

Library modules never change ``jax.config``; only :func:`persistent_compile_cache`, entered
by the command line around one command, does, and it restores the configuration on exit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import jax

__all__ = [
    "COMPILE_CACHE_ENV",
    "command_compile_cache",
    "compile_cache_dir",
    "loads_cleanly",
    "machine_key",
    "persistent_compile_cache",
]

COMPILE_CACHE_ENV = "SMAT_COMPILE_CACHE"
_OFF = ("off", "0", "false", "no", "")

# Compiles one program into the cache folder given as argv[1] (run twice: the second run
# loads it, and whatever XLA says on stderr while loading is the verdict).
_PROBE = """
import sys, jax, jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.ones((8, 8))).block_until_ready()
"""


def compile_cache_dir(flag: str | None) -> Path | None:
    """The cache folder a command asked for, before keying, or None for no cache.

    The ``--compile-cache`` flag wins, then the environment variable ``SMAT_COMPILE_CACHE``;
    either is a folder or ``off``. The default is ``$JAX_COMPILATION_CACHE_DIR`` when set,
    else ``~/.cache/smat/jax``.
    """
    choice = flag if flag is not None else os.environ.get(COMPILE_CACHE_ENV)
    if choice is not None and choice.strip().lower() in _OFF:
        return None
    if choice is not None:
        return Path(choice).expanduser()
    return Path(os.environ.get("JAX_COMPILATION_CACHE_DIR")
                or Path.home() / ".cache" / "smat" / "jax")


def _cpu_description() -> str:
    """The CPU's model name and instruction-set flags (Linux), else what Python knows."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    fields = {}
    for line in info.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())  # the first core's values
    flags = " ".join(sorted(fields.get("flags", fields.get("Features", "")).split()))
    return f"{platform.machine()} {fields.get('model name', '')} {flags}"


def machine_key(backend: str | None = None) -> str:
    """The sub-folder of the cache for programs compiled here: ``<backend>-<12 hex>``.

    Args:
      backend: "cpu", "gpu" or "tpu" (default: JAX's default backend).

    Returns:
      A name that differs whenever the CPU model or instruction-set flags (on the CPU), the
      accelerator kind (elsewhere) or the jaxlib version differ.
    """
    import jaxlib

    backend = backend or jax.default_backend()
    machine = (_cpu_description() if backend == "cpu"
               else " ".join(sorted({d.device_kind for d in jax.devices(backend)})))
    described = f"{backend}|{machine}|jaxlib {jaxlib.__version__}"
    return f"{backend}-{hashlib.sha256(described.encode()).hexdigest()[:12]}"


def loads_cleanly(folder: Path) -> bool:
    """Whether XLA loads a program it cached in `folder` without complaint (checked once,
    with a tiny program in two child processes; the verdict is kept in the folder)."""
    verdict = folder / "loads_cleanly.json"
    if verdict.is_file():
        return bool(json.loads(verdict.read_text())["loads_cleanly"])
    probe = folder / "probe"
    runs = [subprocess.run([sys.executable, "-c", _PROBE, str(probe)], capture_output=True,
                           text=True, check=False) for _ in range(2)]
    clean = all(run.returncode == 0 for run in runs) and not runs[1].stderr.strip()
    folder.mkdir(parents=True, exist_ok=True)
    verdict.write_text(json.dumps({"loads_cleanly": clean,
                                   "second_run_stderr": runs[1].stderr[-2000:]}, indent=1))
    return clean


def command_compile_cache(flag: str | None = None) -> contextlib.AbstractContextManager:
    """The persistent cache of one command (`smat` or an experiment driver): the folder its
    ``--compile-cache`` flag or the environment chose (:func:`compile_cache_dir`), with a
    warning where XLA cannot load it only if the user asked for a cache."""
    asked = flag is not None or os.environ.get(COMPILE_CACHE_ENV) is not None
    return persistent_compile_cache(compile_cache_dir(flag), asked=asked)


@contextlib.contextmanager
def persistent_compile_cache(folder: Path | None, *, asked: bool = False) -> Iterator[None]:
    """Persist compiled programs under ``folder / machine_key()`` for one command.

    A rerun of the same job then loads its programs instead of compiling them
    (docs/install.md, "Compilation cache"). On a CPU where XLA does not load its cached
    programs cleanly (:func:`loads_cleanly`) the command compiles without a cache, with a
    warning if the user `asked` for one. JAX's cache is process-wide, so on exit the
    previous directory is put back and JAX's cache object is reset: calling the command
    line from Python (as the tests do) leaves no global state behind.
    """
    from jax.experimental.compilation_cache import compilation_cache

    keyed = None if folder is None else folder / machine_key()
    if keyed is not None and jax.default_backend() == "cpu" and not loads_cleanly(keyed):
        if asked:
            warnings.warn(f"XLA does not load its cached programs cleanly on this CPU (see "
                          f"{keyed / 'loads_cleanly.json'}; jax-ml/jax#38445): compiling "
                          "without the persistent cache", stacklevel=3)
        keyed = None
    if keyed is None:
        yield
        return
    previous = jax.config.jax_compilation_cache_dir
    compilation_cache.reset_cache()
    jax.config.update("jax_compilation_cache_dir", str(keyed))
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)
        compilation_cache.reset_cache()
