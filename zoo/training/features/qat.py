"""Quantization-aware training (Jacob et al. 2018, https://arxiv.org/abs/1712.05877), as a train_step feature.

The model trains through fake quantizers (`zoo.quantization`): weights per channel,
activations per tensor, BatchNorm folded as the TFLite converter folds it. So the
model learns around the rounding of its int8 deployment, and `zoo export` writes a full-int8
TFLite and an ONNX QDQ model from the ranges it learned, with no calibration.

The rewrite happens before `compile` (`prepare_model`): `zoo train --qat` trains the
quantization-aware model from scratch, `zoo train --qat-from MODEL.keras --epochs 1`
fine-tunes a trained float model. With `freeze_bn_after=N`, BatchNorm statistics stop
updating after N steps and the folded weights use the moving statistics only, as in the
paper's Section 3.2 (the model then trains exactly as it will run).
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.core.train_step import TrainFeature


class QuantizationAware(TrainFeature):
    name = "qat"
    order = 5  # no step stage depends on it; it only needs to see the step counter

    def __init__(self, freeze_bn_after: int | None = None, ema_decay: float = 0.99):
        if freeze_bn_after is not None and (isinstance(freeze_bn_after, bool) or int(freeze_bn_after) < 0):
            raise ValueError(f"freeze_bn_after must be a step count >= 0 or None. Received: {freeze_bn_after!r}")
        if not 0 <= ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1). Received: ema_decay={ema_decay!r}")
        self.freeze_bn_after = None if freeze_bn_after is None else int(freeze_bn_after)
        self.ema_decay = float(ema_decay)

    @classmethod
    def from_config(cls, config):
        return cls(freeze_bn_after=config.qat_freeze_bn_after)

    def prepare_model(self, model: keras.Model) -> keras.Model:
        from zoo.quantization import is_quantized, quantize_model

        return model if is_quantized(model) else quantize_model(model, ema_decay=self.ema_decay)

    def build(self, model):
        from zoo.quantization import QuantizedLinear, is_quantized

        if not is_quantized(model):
            raise ValueError(
                f"Model {model.name!r} is not quantization-aware: rewrite it before compile with "
                "`model = QuantizationAware().prepare_model(model)` (or zoo.quantization.quantize_model)."
            )
        if model.dtype_policy.name != "float32":
            raise ValueError(f"Quantization-aware training runs in float32; model {model.name!r} has the "
                             f"{model.dtype_policy.name!r} policy (drop --mixed-precision).")
        self._folded = [layer for layer in model.layers if isinstance(layer, QuantizedLinear) and layer.batch_norm]

    def after_update(self, model, applied, ready):
        if self.freeze_bn_after is None:
            return
        # The counter is `_TrainPlan.step` before this step's increment.
        frozen = ops.cast(model._zoo_plan.step.value + 1 >= self.freeze_bn_after, "float32")
        for layer in self._folded:
            layer.bn_frozen.assign(frozen)
