"""Small shared builders for tests: a learnable synthetic token task, a tiny classifier,
and a subprocess killed at a chosen moment."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import numpy as np
import pytest
from flax import nnx

from smat.data import Encoded
from smat.models import SequenceClassifier, TextConfig

CUE_TOKEN = 7  # a sequence is positive when it contains this token

# The suite compiles without LLVM's optimisations (tests/conftest.py): half the compile
# time, but machine code that runs about 3x slower. A test whose time is running one large
# program (integrated gradients over MiniLM: 16 s against 6 s) compiles that program as
# users' programs are, with jax.jit(..., compiler_options=OPTIMIZED_COMPILE).
OPTIMIZED_COMPILE = {"xla_backend_optimization_level": 3,
                     "xla_llvm_disable_expensive_passes": False,
                     "xla_cpu_use_fusion_emitters": True}


def synthetic_encoded(num_examples: int, *, seq_len: int = 16, seed: int = 0,
                      vocab_size: int = 101) -> Encoded:
    """[CLS]=2 ... [SEP]=3 then padding; label 1 iff CUE_TOKEN occurs (learnable in a few steps)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, seq_len + 1, size=num_examples)
    ids = np.zeros((num_examples, seq_len), np.int32)
    mask = np.zeros((num_examples, seq_len), np.int32)
    labels = rng.integers(0, 2, size=num_examples).astype(np.int32)
    for i, length in enumerate(lengths):
        body = rng.integers(10, vocab_size, size=length - 2)
        if labels[i]:
            body[rng.integers(0, length - 2)] = CUE_TOKEN
        ids[i, :length] = np.concatenate([[2], body, [3]])
        mask[i, :length] = 1
    special = (mask == 0) | (ids == 2) | (ids == 3)
    return Encoded(ids, mask, np.zeros_like(ids), special, labels)


def tiny_classifier(*, task: str = "classification", seed: int = 0,
                    pooling: str = "scalar_mix") -> SequenceClassifier:
    """A 2-layer, 32-wide BERT classifier with random weights."""
    return SequenceClassifier(TextConfig.tiny(), num_labels=2 if task == "classification" else 1,
                              task=task, pooling=pooling, rngs=nnx.Rngs(seed))


MLQE_WORDS = ("the house is big", "a cat sleeps here", "we like the film", "it rains today",
              "the road is long", "my friend reads", "birds sing loudly", "the soup is hot")


def write_synthetic_mlqe(root, *, rows: dict[str, int], lp: str = "en-de", seed: int = 0):
    """An MLQE-PE-format folder (direct assessments + post-editing files) whose
    translations copy the source with some words replaced by "xx" and a full stop added;
    the DA z_mean is the share of words kept (learnable), and exactly the replaced words
    are tagged BAD on both sides.
    `rows`: rows per split ("train", "dev", "test")."""
    rng = np.random.default_rng(seed)
    header = "index\toriginal\ttranslation\tscores\tmean\tz_scores\tz_mean\tmodel_scores"
    for split, count in rows.items():
        folder, prefix = {"train": ("train", "train"), "dev": ("dev", "dev"),
                          "test": ("test", "test20")}[split]
        src, mt, tags, source_tags, da = [], [], [], [], [header]
        for i in range(count):
            words = MLQE_WORDS[rng.integers(len(MLQE_WORDS))].split()
            bad = rng.random(len(words)) < rng.random()
            src.append(" ".join(words))
            # the translation ends in one more word than the source (an "OK" full stop)
            mt.append(" ".join(["xx" if b else w for w, b in zip(words, bad, strict=True)]
                               + ["."]))
            word_tags = ["BAD" if b else "OK" for b in bad]
            tags.append(" ".join(["OK"] + [t for tag in [*word_tags, "OK"] for t in (tag, "OK")]))
            source_tags.append(" ".join(word_tags))
            score = 1 - bad.mean()
            da.append(f"{i}\t{src[-1]}\t{mt[-1]}\t[1, 2, 3]\t{100 * score:.1f}\t[0, 0, 0]\t"
                      f"{score:.3f}\t-0.3")
        da_dir = root / "direct-assessments" / lp / folder
        pe_dir = root / "post-editing" / lp / folder
        da_dir.mkdir(parents=True)
        pe_dir.mkdir(parents=True)
        (da_dir / f"{prefix}.{lp.replace('-', '')}.df.short.tsv").write_text(
            "\n".join(da) + "\n")
        for ext, lines in (("src", src), ("mt", mt), ("tags", tags),
                           ("source_tags", source_tags)):
            (pe_dir / f"{prefix}.{ext}").write_text("\n".join(lines) + "\n")
    return root


def interrupted_then_resumed(monkeypatch, module, name: str, *, on_call: int, run):
    """Run ``run()`` with ``module.name`` (a training step) raising KeyboardInterrupt on its
    `on_call`-th call, then again with the real step, as a user's Ctrl-C and rerun; returns
    the rerun's result. Fails unless the interrupted run did stop there."""
    import pytest

    real_step, calls = getattr(module, name), {"n": 0}

    def dying_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == on_call:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(module, name, dying_step)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.setattr(module, name, real_step)
    return run()


def run_and_kill(command: list[str], *, at: Callable[[], bool], what: str, timeout: float,
                 env: dict[str, str] | None = None) -> None:
    """Start `command` (with `env`, default this process's environment), SIGKILL it as soon
    as `at()` holds, as when a host is lost; the test fails if it ends or `timeout` seconds
    pass first."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=os.environ.copy() if env is None else env)
    deadline = time.monotonic() + timeout
    try:
        while not at():
            if process.poll() is not None:
                pytest.fail(f"the job ended (exit {process.returncode}) before {what}:\n"
                            f"{process.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout} s")
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
