"""Sharpness-aware minimization (Foret et al. 2021, https://arxiv.org/abs/2010.01412).

Each step takes the global-batch gradient g at w, moves to the worst-case
neighbour w + rho * g / ||g||, and applies the gradient computed there to w.
Costs two forward/backward passes per step. Batch-norm statistics are
updated by both passes.
"""

from __future__ import annotations

from zoo.core.train_step import TrainFeature, add_to_variables, global_norm


class SAM(TrainFeature):
    name = "sam"
    order = 40
    needs_global_gradients = True

    def __init__(self, rho: float = 0.05):
        if not rho > 0:
            raise ValueError(f"SAM needs rho > 0. Received: rho={rho!r}")
        self.rho = float(rho)

    @classmethod
    def from_config(cls, config):
        return cls(config.sam_rho)

    def wrap_gradients(self, model, grad_fn):
        def sharpness_aware(batch):
            loss, y_pred, grads = grad_fn(batch)
            scale = self.rho / (global_norm(grads) + 1e-12)
            pairs = [(v, g * scale) for v, g in zip(model.trainable_variables, grads) if g is not None]
            add_to_variables([v for v, _ in pairs], [e for _, e in pairs])
            _, _, sharp_grads = grad_fn(batch)
            add_to_variables([v for v, _ in pairs], [-e for _, e in pairs])
            return loss, y_pred, sharp_grads

        return sharpness_aware
