"""Tests for smat.host_memory: with the threshold fixed, a large block freed and asked for
again is mapped on its own instead of coming from (and growing) the heap."""

import json
import os
import subprocess
import sys

import pytest

# Allocates and frees an 8 MiB block, allocates one again and reports where glibc put it
# (mallinfo2: heap bytes, mapped bytes); argv[1] == "fixed" calls the function first.
_PROBE = """
import ctypes, json, sys
import numpy as np
from smat.host_memory import return_large_blocks_to_the_system

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
fixed = return_large_blocks_to_the_system() if sys.argv[1] == "fixed" else None
block = np.ones(8 << 20, np.uint8)
del block
block = np.ones(8 << 20, np.uint8)
info = libc.mallinfo2()
print(json.dumps({"fixed": fixed, "heap": info.arena, "mapped": info.hblkhd}))
"""


def _probe(mode: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True,
                          env=environment, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_a_freed_large_block_comes_back_mapped_not_from_the_heap():
    default, fixed = _probe("default"), _probe("fixed")
    # glibc's default: the freed block raised the threshold, so its successor is on the heap
    assert default["mapped"] < 8 << 20
    assert fixed["fixed"] is True
    assert fixed["mapped"] >= default["mapped"] + (8 << 20)
    assert default["heap"] >= fixed["heap"] + (4 << 20)


def test_the_users_environment_value_stands(monkeypatch):
    from smat.host_memory import return_large_blocks_to_the_system

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert return_large_blocks_to_the_system() is True
