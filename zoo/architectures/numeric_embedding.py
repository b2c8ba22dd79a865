"""Periodic embeddings of numeric features: each scalar becomes a small learned vector.

Gorishniy, Rubachev & Babenko 2022, "On Embeddings for Numerical Features in Tabular Deep
Learning" (NeurIPS), https://arxiv.org/abs/2203.05556, section 3.3, the "PLR" embedding: for
feature ``j``,

    e_j = ReLU(W_j [cos(2 pi c_j x_j), sin(2 pi c_j x_j)] + b_j),   c_j ~ N(0, sigma^2) (trained)

with ``k`` frequencies ``c_j`` and its own linear map ``W_j`` per feature. An MLP on these
embeddings learns the sharp, non-smooth functions of single features that trees find easily and
a plain MLP on the raw value does not (the paper's figure 1); RealMLP-TD (Holzmüller et al. 2024)
and TabM (Gorishniy et al. 2024) both build on it.

Written in `keras.ops` (elementwise ops and a batched matmul, no einsum), so it runs on every
Keras backend and converts to every export format.
"""

from __future__ import annotations

import math

import keras


@keras.saving.register_keras_serializable(package="zoo")
class PeriodicEmbedding(keras.layers.Layer):
    """PLR embeddings of the first `numeric_features` columns; the other columns (one-hot codes) pass through.

    Input ``(batch, columns)``; output ``(batch, numeric_features * units + columns - numeric_features)``:
    the flattened embeddings, then the untouched columns.

    Args:
        numeric_features: how many leading columns are numeric (None: all of them).
        frequencies: ``k``, frequencies per feature (the paper: 16-96).
        units: the embedding size per feature.
        sigma: the standard deviation of the initial frequencies; the scale of the functions of one
            feature the model starts with (the paper tunes it in [0.01, 100] for standardized inputs).
        activation: after the linear map (``"relu"``: PLR; ``None``: PL).
    """

    def __init__(self, numeric_features: int | None = None, frequencies: int = 16, units: int = 16,
                 sigma: float = 0.1, activation: str | None = "relu", **kwargs):
        super().__init__(**kwargs)
        for key, value in (("frequencies", frequencies), ("units", units)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive integer. Received: {key}={value!r}")
        if numeric_features is not None and (not isinstance(numeric_features, int) or numeric_features < 0):
            raise ValueError(f"numeric_features must be a non-negative integer or None. "
                             f"Received: numeric_features={numeric_features!r}")
        if not sigma > 0:
            raise ValueError(f"sigma must be > 0. Received: sigma={sigma}")
        self.numeric_features = numeric_features
        self.k = frequencies
        self.units = units
        self.sigma = float(sigma)
        self.activation = keras.activations.get(activation)
        self._activation_name = activation

    def _numeric(self, columns: int) -> int:
        n = columns if self.numeric_features is None else self.numeric_features
        if n > columns:
            raise ValueError(f"{self.name}: numeric_features={n} but the input has {columns} columns.")
        return n

    def build(self, input_shape):
        n = self._numeric(input_shape[-1])
        self.frequency = self.add_weight(
            name="frequency", shape=(n, self.k), initializer=keras.initializers.RandomNormal(stddev=self.sigma))
        bound = 1 / math.sqrt(2 * self.k)  # torch.nn.Linear's default, as the paper's code uses
        init = keras.initializers.RandomUniform(-bound, bound)
        self.kernel = self.add_weight(name="kernel", shape=(n, 2 * self.k, self.units), initializer=init)
        self.bias = self.add_weight(name="bias", shape=(n, self.units), initializer=init)

    def call(self, inputs):
        x = keras.ops.cast(inputs, self.compute_dtype)
        columns = x.shape[-1]
        n = self._numeric(columns)
        angle = (2 * math.pi) * keras.ops.expand_dims(x[:, :n], -1) * self.frequency  # (batch, n, k)
        periodic = keras.ops.concatenate([keras.ops.cos(angle), keras.ops.sin(angle)], axis=-1)
        # One linear map per feature as a batched matmul over features: (n, batch, 2k) @ (n, 2k, units).
        y = keras.ops.matmul(keras.ops.transpose(periodic, (1, 0, 2)), self.kernel)
        y = keras.ops.transpose(y, (1, 0, 2)) + self.bias  # (batch, n, units)
        y = keras.ops.reshape(self.activation(y), (-1, n * self.units))
        return y if n == columns else keras.ops.concatenate([y, x[:, n:]], axis=-1)

    def compute_output_shape(self, input_shape):
        n = self._numeric(input_shape[-1])
        return (input_shape[0], n * self.units + input_shape[-1] - n)

    def get_config(self):
        return {**super().get_config(), "numeric_features": self.numeric_features, "frequencies": self.k,
                "units": self.units, "sigma": self.sigma, "activation": self._activation_name}
