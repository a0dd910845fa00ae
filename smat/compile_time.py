"""Seconds JAX spends tracing, lowering and compiling programs, read from its own monitoring
events: how a timed call divides into compiling and running without running it twice."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import jax

_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
           "/jax/core/compile/jaxpr_to_mlir_module_duration",
           "/jax/core/compile/backend_compile_duration")
_total = [0.0]
_listening = [False]


def _record(event: str, seconds: float, **_) -> None:
    if event in _EVENTS:
        _total[0] += seconds


@contextlib.contextmanager
def compile_seconds() -> Iterator[Callable[[], float]]:
    """Inside, the returned function gives the seconds spent compiling so far (tracing,
    lowering and XLA compiling, in every thread) since the block began; programs loaded
    from the persistent compilation cache count only their tracing and lowering."""
    if not _listening[0]:
        jax.monitoring.register_event_duration_secs_listener(_record)
        _listening[0] = True
    start = _total[0]
    yield lambda: _total[0] - start
