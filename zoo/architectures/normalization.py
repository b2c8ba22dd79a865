"""`Normalization` that computes inside `call`, so every export format sees its mean and variance.

Keras 3's `Normalization` divides by tensors it computes once, outside any
graph (`finalize_state`), and a traced function captures them as external
tensors. SavedModel and TFLite embed captures, but tf2onnx 1.17 turns them
into required graph inputs: ONNX Runtime then refuses to run EfficientNet
("Required inputs (['.../stem_normalization_1/Sub/y:0', ...]) are missing
from input feed", measured by `benchmarks/export_matrix.py`). This subclass
reads its variables (adapted or loaded weights) or builds its constants
inside `call`, where they become graph variables and constants. Weights,
config and function are the parent's, so keras.applications files load.
"""

from __future__ import annotations

import keras
import numpy as np


@keras.saving.register_keras_serializable(package="zoo")
class Normalization(keras.layers.Normalization):
    """`keras.layers.Normalization` whose statistics are graph variables or constants; see the module docstring."""

    def _statistics(self):
        if self.input_mean is None:  # adapted or loaded: the variables
            shape = self._broadcast_shape
            return keras.ops.reshape(self.adapt_mean, shape), keras.ops.reshape(self.adapt_variance, shape)
        mean, variance = np.asarray(self.input_mean, "float32"), np.asarray(self.input_variance, "float32")
        if mean.ndim > 1 or variance.ndim > 1:
            return None
        shape = [1] * (len(self._broadcast_shape) - 1) + [-1]
        return keras.ops.convert_to_tensor(mean.reshape(shape)), keras.ops.convert_to_tensor(variance.reshape(shape))

    def call(self, inputs):
        statistics = None if self.invert or self.axis != (-1,) else self._statistics()
        if statistics is None:
            return super().call(inputs)
        inputs = keras.ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        mean, variance = (keras.ops.cast(s, self.compute_dtype) for s in statistics)
        return (inputs - mean) / keras.ops.maximum(keras.ops.sqrt(variance), keras.backend.epsilon())
