"""An exponential moving average of the weights (Polyak & Juditsky 1992), for evaluation and export.

avg <- decay * avg + (1 - decay) * w after every applied update. With EMA on,
validation inside `fit` runs on the averaged weights (`EMAForEvaluation`
swaps them in and back), and after `fit` (`after_fit`) they are copied into the
model for the final evaluation and the export.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.core.train_step import TrainFeature, select, state_variable


class EMA(TrainFeature):
    name = "ema"
    order = 95

    def __init__(self, decay: float = 0.999):
        if not 0 < decay < 1:
            raise ValueError(f"EMA decay must be in (0, 1). Received: decay={decay!r}")
        self.decay = float(decay)

    @classmethod
    def from_config(cls, config):
        return cls(config.ema_decay)

    def build(self, model):
        self._model_vars = list(model.trainable_variables)
        self.averages = [
            state_variable(v.shape, v.dtype, name=f"ema_{i}", initializer=keras.ops.convert_to_numpy(v))  # a copy: never the weight's own buffer
            for i, v in enumerate(self._model_vars)
        ]

    def after_update(self, model, applied, ready):
        for avg, v in zip(self.averages, self._model_vars):
            new = self.decay * avg.value + (1 - self.decay) * ops.cast(v.value, avg.dtype)
            avg.assign(select(applied, new, avg.value))

    def swap(self):
        """Exchanges the model's weights and the averages (call from outside `fit`'s step)."""
        for avg, v in zip(self.averages, self._model_vars):
            current = keras.ops.convert_to_numpy(v)  # a copy, not a view of the variable
            v.assign(keras.ops.convert_to_numpy(avg))
            avg.assign(current)

    def copy_to_model(self):
        for avg, v in zip(self.averages, self._model_vars):
            v.assign(keras.ops.convert_to_numpy(avg))

    def after_fit(self, model):
        self.copy_to_model()  # the final evaluation and the export see the averaged weights

    def state_variables(self):
        return list(self.averages)

    def callbacks(self):
        return [EMAForEvaluation(self)]


class EMAForEvaluation(keras.callbacks.Callback):
    """Evaluates on the averaged weights during `fit`, then restores the training weights."""

    def __init__(self, ema: EMA):
        super().__init__()
        self.ema = ema

    def on_test_begin(self, logs=None):
        self.ema.swap()

    def on_test_end(self, logs=None):
        self.ema.swap()
