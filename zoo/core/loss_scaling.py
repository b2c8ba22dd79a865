"""Dynamic loss scaling for `mixed_float16` (Micikevicius et al. 2018, https://arxiv.org/abs/1710.03740).

The loss is multiplied by a dynamic scale before the backward pass and the
gradients divided by it after; a step whose gradients are not finite applies
no update and halves the scale, and `growth_steps` finite steps in a row
double it. It lives beside the model base because `ZooModel` adds it by
itself to any model Keras compiled with a `LossScaleOptimizer` (the policy
is mixed_float16), whether or not the training package is used.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.core.train_step import TrainFeature, select, state_variable


class LossScaling(TrainFeature):
    """Dynamic loss scaling for float16; `ZooModel.compile` adds it to any `mixed_float16` model."""

    name = "loss_scaling"
    order = 70  # after accumulation: checks the gradient about to be applied
    needs_global_gradients = True

    def __init__(self, initial_scale: float = 2.0**15, growth_steps: int = 2000):
        if not initial_scale > 0 or growth_steps < 1:
            raise ValueError(f"initial_scale must be > 0 and growth_steps >= 1. Received: {initial_scale}, {growth_steps}")
        self.initial_scale = float(initial_scale)
        self.growth_steps = int(growth_steps)

    def build(self, model):
        self.scale = state_variable((), "float32", name="loss_scale", initializer=keras.initializers.Constant(self.initial_scale))
        self._good_steps = state_variable((), "int64", name="loss_scale_good_steps")
        self._finite = self._window_done = None

    def scale_loss(self, loss):
        return loss * ops.cast(self.scale, loss.dtype)

    def unscale_gradients(self, grads):
        return [None if g is None else ops.cast(g, "float32") / self.scale for g in grads]

    def gate(self, model, grads, ready):
        finite = ops.all(ops.stack([ops.all(ops.isfinite(g)) for g in grads if g is not None]))
        # `ready` says whether this step ends an update (false mid-accumulation): the scale
        # only changes when an update is applied or skipped.
        self._finite, self._window_done = finite, ready
        return grads, ops.logical_and(ready, finite)

    def after_update(self, model, applied, ready):
        finite, done = self._finite, self._window_done
        scale, good = self.scale.value, self._good_steps.value
        grow = ops.logical_and(finite, ops.equal(good + 1, self.growth_steps))
        new_scale = ops.where(finite, ops.where(grow, scale * 2.0, scale), scale / 2.0)
        new_good = ops.where(ops.logical_and(finite, ops.logical_not(grow)), good + 1, ops.zeros_like(good))
        self.scale.assign(select(done, new_scale, scale))
        self._good_steps.assign(select(done, new_good, good))

    def state_variables(self):
        return [self.scale, self._good_steps]
