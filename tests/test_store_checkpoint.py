"""Tests for smat.store.checkpoint: exact, atomic orbax round trips with metadata."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from smat.models import SequenceClassifier, TextConfig
from smat.store import checkpoint


def _state(seed: int = 0, **overrides):
    return nnx.state(SequenceClassifier(TextConfig.tiny(**overrides), num_labels=2,
                                        rngs=nnx.Rngs(seed)))


def _abstract(**overrides):
    return nnx.state(nnx.eval_shape(
        lambda: SequenceClassifier(TextConfig.tiny(**overrides), num_labels=2,
                                   rngs=nnx.Rngs(9))))


def _leaves_equal(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(la, lb, strict=True))


def test_round_trip_is_exact_onto_abstract_target(tmp_path):
    state = _state()
    meta = {"step": 12, "config": {"lr": 3e-5, "name": "minilm"}, "metrics": [0.5, 0.75]}
    path = checkpoint.save(tmp_path / "ckpt", state, metadata=meta)
    assert path == (tmp_path / "ckpt").resolve()
    restored = checkpoint.restore(path, target=_abstract())
    assert isinstance(restored.pytree, nnx.State)
    assert _leaves_equal(restored.pytree, state)
    assert restored.metadata == meta
    assert checkpoint.read_metadata(path) == meta
    model = nnx.merge(nnx.graphdef(nnx.eval_shape(
        lambda: SequenceClassifier(TextConfig.tiny(), num_labels=2, rngs=nnx.Rngs(9)))),
        restored.pytree)
    ids = jnp.array([[2, 3, 4]])
    original = nnx.merge(nnx.graphdef(SequenceClassifier(TextConfig.tiny(), num_labels=2,
                                                         rngs=nnx.Rngs(0))), state)
    np.testing.assert_array_equal(model(ids, attention_mask=ids > 0).logits,
                                  original(ids, attention_mask=ids > 0).logits)


def test_round_trip_mixed_dtypes_without_target(tmp_path):
    tree = {"w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 7,
            "n": {"count": jnp.array([1, 2, 3], jnp.int32),
                  "half": jnp.array([0.1, 0.2], jnp.bfloat16)}}
    checkpoint.save(tmp_path / "c", tree, metadata={})
    restored = checkpoint.restore(tmp_path / "c")
    assert _leaves_equal(restored.pytree, tree)
    assert restored.pytree["n"]["half"].dtype == jnp.bfloat16


def test_existing_path_needs_overwrite_and_overwrite_replaces(tmp_path):
    checkpoint.save(tmp_path / "c", {"a": jnp.zeros(2)}, metadata={"v": 1})
    with pytest.raises(FileExistsError, match="exists; pass overwrite=True"):
        checkpoint.save(tmp_path / "c", {"a": jnp.ones(2)}, metadata={"v": 2})
    checkpoint.save(tmp_path / "c", {"a": jnp.ones(2)}, metadata={"v": 2}, overwrite=True)
    restored = checkpoint.restore(tmp_path / "c")
    np.testing.assert_array_equal(restored.pytree["a"], np.ones(2))
    assert restored.metadata == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # no temp dirs left


def test_failed_save_leaves_nothing_behind(tmp_path):
    with pytest.raises(TypeError, match="JSON-serialisable"):
        checkpoint.save(tmp_path / "c", {"a": jnp.zeros(2)}, metadata={"bad": object()})
    with pytest.raises(TypeError, match="metadata must be a dict"):
        checkpoint.save(tmp_path / "c", {"a": jnp.zeros(2)}, metadata=[1])
    assert list(tmp_path.iterdir()) == []


def test_shape_mismatch_names_leaf_and_both_shapes(tmp_path):
    checkpoint.save(tmp_path / "c", _state(), metadata={})
    with pytest.raises(ValueError) as err:
        checkpoint.restore(tmp_path / "c", target=_abstract(intermediate_size=40))
    message = str(err.value)
    assert "does not match the target" in message
    assert ("encoder.layers.intermediate.kernel.value: checkpoint (2, 32, 37) float32 vs "
            "target (2, 32, 40) float32") in message
    with pytest.raises(ValueError, match="not in the target: b"):
        checkpoint.restore(_save_two(tmp_path),
                           target={"a": jax.ShapeDtypeStruct((2,), jnp.float32)})


def _save_two(tmp_path):
    return checkpoint.save(tmp_path / "two", {"a": jnp.zeros(2), "b": jnp.zeros(3)},
                           metadata={})


def test_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no smat checkpoint at"):
        checkpoint.restore(tmp_path / "nothing")
