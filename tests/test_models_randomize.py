import jax
import numpy as np
import pytest

from smat.models import functional
from smat.models.randomize import randomized_family
from tests.helpers import tiny_classifier


def _leaf(state, *path):
    node = state
    for key in path:
        node = node[key]
    return np.asarray(node.value if hasattr(node, "value") else node)


@pytest.fixture(scope="module")
def model():
    return tiny_classifier(seed=5)


def test_cascade_step_i_reinitialises_exactly_the_last_i_blocks(model):
    _, trained = functional.split(model)
    family = randomized_family(model, mode="cascading", seed=1)
    assert family.labels == ("original", "last 1", "last 2")
    assert family.randomized.tolist() == [[False, False], [False, True], [True, True]]
    path = ("encoder", "layers", "attention", "query_kernel")
    original = _leaf(trained, *path)
    stacked = _leaf(family.params, *path)  # (steps, layers, ...)
    for step, row in enumerate(family.randomized):
        for layer, randomized in enumerate(row):
            same = np.array_equal(stacked[step, layer], original[layer])
            assert same != randomized, (step, layer)
    # step 0 is the trained model, leaf for leaf; embeddings and head never change
    for a, b in zip(jax.tree.leaves(trained),
                    jax.tree.leaves(jax.tree.map(lambda x: x[0], family.params)), strict=True):
        np.testing.assert_array_equal(a, b)
    for path in (("encoder", "word_embeddings"), ("classifier", "kernel")):
        assert all(np.array_equal(s, _leaf(trained, *path)) for s in _leaf(family.params, *path))


def test_full_mode_is_the_cascades_two_ends(model):
    cascade = randomized_family(model, mode="cascading", seed=1, head=True)
    full = randomized_family(model, mode="full", seed=1, head=True)
    assert full.labels == ("original", "last 2") and full.randomized.tolist() == [
        [False, False], [True, True]]
    for ends, both in zip(jax.tree.leaves(jax.tree.map(lambda x: x[np.array([0, -1])],
                                                       cascade.params)),
                          jax.tree.leaves(full.params), strict=True):
        np.testing.assert_array_equal(ends, both)


def test_independent_steps_and_the_head_option(model):
    _, trained = functional.split(model)
    family = randomized_family(model, mode="independent", blocks=[1], head=True)
    assert family.labels == ("original", "block 1")
    kernel = _leaf(family.params, "encoder", "layers", "output", "kernel")
    original = _leaf(trained, "encoder", "layers", "output", "kernel")
    assert np.array_equal(kernel[1, 0], original[0]) and not np.array_equal(kernel[1, 1],
                                                                            original[1])
    head = _leaf(family.params, "classifier", "kernel")
    assert np.array_equal(head[0], _leaf(trained, "classifier", "kernel"))
    assert not np.array_equal(head[1], head[0])


def test_bad_settings_name_the_value_and_the_range(model):
    with pytest.raises(ValueError, match="unknown randomization mode 'random'"):
        randomized_family(model, mode="random")
    with pytest.raises(ValueError, match=r"block indices must lie in \[0, 1\].*\[2\]"):
        randomized_family(model, mode="independent", blocks=[0, 2])
    with pytest.raises(ValueError, match=r"cascading depth must lie in \[1, 2\].*got 3"):
        randomized_family(model, mode="cascading", depth=3)
