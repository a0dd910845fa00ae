"""Shared pytest configuration: strict JAX numerics for every test (STYLE 10)."""

import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture
def key() -> jax.Array:
    return jax.random.key(0)
