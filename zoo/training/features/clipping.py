"""Gradient clipping by global norm (Pascanu et al. 2013), on the global-batch gradient.

Clipping runs after the all-reduce: clipping each replica's share (as an
optimizer's `global_clipnorm` does inside `apply`) would depend on the
replica count.
"""

from __future__ import annotations

from keras import ops

from zoo.core.train_step import TrainFeature, global_norm


class ClipByGlobalNorm(TrainFeature):
    name = "clipping"
    order = 80
    needs_global_gradients = True

    def __init__(self, clip_norm: float):
        if not clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0. Received: clip_norm={clip_norm!r}")
        self.clip_norm = float(clip_norm)

    @classmethod
    def from_config(cls, config):
        return cls(config.clip_norm)

    def transform_gradients(self, model, grads):
        norm = global_norm(grads)
        factor = self.clip_norm / ops.maximum(norm, self.clip_norm)
        return [None if g is None else g * ops.cast(factor, g.dtype) for g in grads]
