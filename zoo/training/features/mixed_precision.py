"""Mixed precision: `mixed_float16` with dynamic loss scaling, or `mixed_bfloat16`.

The policy is a property of the model's layers, so it is set when the model
is built (`policy_scope`); variables (the master weights) stay float32.
For float16 the model base adds dynamic loss scaling itself
(`zoo.core.loss_scaling.LossScaling`) whenever Keras has
wrapped the optimizer in a `LossScaleOptimizer`.
"""

from __future__ import annotations

import contextlib

import keras


POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")


def validate_policy(policy: str) -> str:
    if policy not in POLICIES:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("mixed-precision policy", policy, POLICIES)
    return policy


@contextlib.contextmanager
def policy_scope(policy: str | None):
    """Builds layers under `policy` (e.g. "mixed_float16"), then restores the previous global policy."""
    if not policy:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(validate_policy(policy))
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
