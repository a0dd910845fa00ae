"""What every optax optimizer of smat is wrapped in.

optax's Adam bias correction computes ``decay ** count`` with an int32 step count, a
float-with-int mix that JAX's strict dtype promotion rejects. smat's own code spells out
its casts (the tests run under strict promotion), so only the optimizer's update runs
under standard promotion, and its results are unchanged.
"""

from __future__ import annotations

import jax
import optax


def standard_promotion(tx: optax.GradientTransformation) -> optax.GradientTransformation:
    """`tx` whose update runs under JAX's standard dtype promotion."""

    def update(updates, state, params=None):
        with jax.numpy_dtype_promotion("standard"):
            return tx.update(updates, state, params)

    return optax.GradientTransformation(tx.init, update)
