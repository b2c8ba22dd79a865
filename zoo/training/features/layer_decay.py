"""Layer-wise learning-rate decay: layers nearer the input learn more slowly than those nearer the head.

Pretrained early layers hold generic features worth keeping; the head is
new. Clark et al. 2020 (ELECTRA, https://arxiv.org/abs/2003.10555) and
Bao et al. 2022 (BEiT, https://arxiv.org/abs/2106.08254) scale layer l's
learning rate by `decay ** (L - l)`. Here the decay is normalized by depth,
so one value suits a 10-layer and a 200-layer network: `first_layer` is the
first weighted layer's learning rate relative to the head's (1), and the
layers between interpolate geometrically. The head (`zoo.architectures.heads`)
learns at the full rate.

Keras optimizers take one learning rate, so the feature scales each
variable's *update*: it keeps the weights from before the optimizer step
and moves each variable only `scale` of the way to where the optimizer put
it. For SGD, Adam and AdamW the update is proportional to the learning rate
(weight decay included), so this is exactly a per-variable learning rate;
with momentum SGD the momentum buffer itself stays unscaled.
"""

from __future__ import annotations

from keras import ops

from zoo.architectures.heads import split_head
from zoo.core.train_step import TrainFeature, add_to_variables


class LayerwiseLRDecay(TrainFeature):
    """Per-variable learning-rate multipliers from `first_layer` (the first weighted layer) to 1 (the head)."""

    name = "layer_decay"
    order = 90  # after the update is applied, before EMA averages it
    needs_global_gradients = True  # brings the step through transform_gradients / after_update

    def __init__(self, first_layer: float):
        if not 0 < first_layer < 1:
            raise ValueError(f"first_layer must be in (0, 1). Received: first_layer={first_layer!r}")
        self.first_layer = float(first_layer)

    @classmethod
    def from_config(cls, config):
        return cls(config.layer_lr_decay)

    def build(self, model):
        backbone, head = split_head(model)
        depth = len(backbone)
        self.scales = {}  # variable path -> learning-rate multiplier
        for i, layer in enumerate(backbone):
            scale = self.first_layer ** ((depth - i) / depth)
            for v in layer.weights:
                self.scales[v.path] = scale
        for layer in head:
            for v in layer.weights:
                self.scales[v.path] = 1.0

    def multipliers(self, variables) -> list[float]:
        return [self.scales.get(v.path, 1.0) for v in variables]

    def transform_gradients(self, model, grads):
        self._before = [ops.copy(v.value) for v in model.trainable_variables]
        return grads

    def after_update(self, model, applied, ready):
        variables = model.trainable_variables
        pairs = [(v, (s - 1.0) * (ops.cast(v.value, "float32") - ops.cast(b, "float32")))
                 for v, b, s in zip(variables, self._before, self.multipliers(variables)) if s != 1.0]
        if pairs:
            add_to_variables([v for v, _ in pairs], [d for _, d in pairs])  # v = before + s * (v - before)
        self._before = None
