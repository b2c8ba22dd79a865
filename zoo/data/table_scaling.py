"""Robust scaling and smooth clipping of numeric table columns, fitted on the train rows.

RealMLP-TD's numeric preprocessing (Holzmüller et al. 2024, "Better by Default: Strong Pre-Tuned
MLPs and Boosted Trees on Tabular Data", https://arxiv.org/abs/2407.04491, section 3):

1. robust scaling: ``(x - median) / s`` with ``s`` the interquartile range, or half the range
   where the quartiles coincide (a column that is mostly one value), or 1 for a constant column;
2. smooth clipping: ``x / sqrt(1 + (x / 3)^2)``, which keeps the bulk of a column almost linear
   and squashes outliers towards +-3, so one extreme row cannot dominate the first layer.

The fitted centre and scale are applied by `Rescaling` (graph constants, see
:mod:`zoo.data.raw_input`); :class:`SmoothClip` has no weights. :class:`CategoryOneHot` codes a table's
string columns. Both are written in `keras.ops`, so a model carrying them runs, saves and exports on
every Keras backend; the `.keras` loaders import this module to register them.
"""

from __future__ import annotations

import keras
import numpy as np

SMOOTH_CLIP_BOUND = 3.0  # RealMLP-TD's


def fit_robust_scaling(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(center, scale)`` per column of the train rows `x` ``(rows, columns)``: median and robust spread."""
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or not len(x):
        raise ValueError(f"fit_robust_scaling expects a (rows, columns) array with rows. Received: shape={x.shape}")
    q25, median, q75 = np.quantile(x, [0.25, 0.5, 0.75], axis=0)
    half_range = (x.max(axis=0) - x.min(axis=0)) / 2
    scale = np.where(q75 > q25, q75 - q25, np.where(half_range > 0, half_range, 1.0))
    return median, scale


@keras.saving.register_keras_serializable(package="zoo")
class SmoothClip(keras.layers.Layer):
    """``x / sqrt(1 + (x / bound)^2)``: identity near 0, tending to +-`bound` (RealMLP-TD's smooth clipping)."""

    def __init__(self, bound: float = SMOOTH_CLIP_BOUND, **kwargs):
        super().__init__(**kwargs)
        if not bound > 0:
            raise ValueError(f"bound must be > 0. Received: bound={bound}")
        self.bound = float(bound)

    def call(self, inputs):
        x = keras.ops.cast(inputs, self.compute_dtype)
        return x / keras.ops.sqrt(1.0 + keras.ops.square(x / self.bound))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "bound": self.bound}


@keras.saving.register_keras_serializable(package="zoo")
class CategoryOneHot(keras.layers.Layer):
    """One-hot codes of string columns ``(batch, columns)``, each column with its own vocabulary
    (its slot 0 is for a value the train rows did not have)."""

    def __init__(self, vocabularies, **kwargs):
        super().__init__(**kwargs)
        self.vocabularies = [list(v) for v in vocabularies]
        self.lookups = [
            keras.layers.StringLookup(vocabulary=v, output_mode="one_hot", name=f"{self.name}_{i}")
            for i, v in enumerate(self.vocabularies)
        ]

    def call(self, inputs):
        return keras.ops.concatenate([lookup(inputs[:, i]) for i, lookup in enumerate(self.lookups)], axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], sum(len(v) + 1 for v in self.vocabularies))

    def get_config(self):
        return {**super().get_config(), "vocabularies": self.vocabularies}
