"""Gradient accumulation over k micro-batches: one optimizer step per k batches.

The applied gradient is the mean of the k micro-batch gradients, so with
equal micro-batches and SGD the weights after k micro-batches equal one step
on the k-times larger batch. The optimizer's `iterations` (and so its
learning-rate schedule) counts applied updates, not micro-batches.
"""

from __future__ import annotations

from keras import ops

from zoo.core.train_step import TrainFeature, state_variable


class GradientAccumulation(TrainFeature):
    name = "accumulation"
    order = 60
    needs_global_gradients = True

    def __init__(self, steps: int):
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"Gradient accumulation needs steps >= 1 (an integer). Received: steps={steps!r}")
        self.steps = steps

    @classmethod
    def from_config(cls, config):
        return cls(config.accumulation_steps)

    def build(self, model):
        self._sums = [state_variable(v.shape, "float32", name=f"accum_{i}") for i, v in enumerate(model.trainable_variables)]
        self._count = state_variable((), "int64", name="accum_count")

    def gate(self, model, grads, ready):
        if self.steps == 1:
            return grads, ready
        for s, g in zip(self._sums, grads):
            if g is not None:
                s.assign_add(ops.cast(g, s.dtype))
        self._count.assign_add(1)
        done = ops.equal(self._count.value % self.steps, 0)
        mean = [None if g is None else ops.cast(s.value / self.steps, g.dtype) for s, g in zip(self._sums, grads)]
        return mean, ops.logical_and(ready, done)

    def after_update(self, model, applied, ready):
        if self.steps == 1:
            return
        done = ops.equal(self._count.value % self.steps, 0)
        for s in self._sums:
            s.assign(ops.where(done, ops.zeros_like(s.value), s.value))

    def state_variables(self):
        return [*self._sums, self._count] if self.steps > 1 else []
