"""Parameter-efficient ensembling of an MLP: TabM-mini's members, which share every weight but two.

Gorishniy, Kotelnikov & Babenko 2024, "TabM: Advancing Tabular Deep Learning with
Parameter-Efficient Ensembling", https://arxiv.org/abs/2410.24210, section 3 ("TabM-mini"):
`k` members see the same input multiplied by their own vector ``r_i`` (initialized with random
signs), run through one shared MLP, and each has its own output layer; the prediction is the mean
of the members' predictions. Members cost k times the compute of one MLP but add only
``k * (inputs + outputs * (hidden + 1))`` weights.

The model's one output is the members' mean, so `fit` trains them on the loss of that mean; the
paper trains each member on its own loss (its section 3.1), which needs an output per member.

Both layers are written in `keras.ops` (broadcasting and a batched matmul), so they run on every
Keras backend and convert to every export format.
"""

from __future__ import annotations

import math

import keras


def _check_members(members) -> int:
    if not isinstance(members, int) or members < 1:
        raise ValueError(f"members must be a positive integer. Received: members={members!r}")
    return members


@keras.saving.register_keras_serializable(package="zoo")
class EnsembleAdapter(keras.layers.Layer):
    """``(batch, features) -> (batch, members, features)``: member i's copy multiplied by its own ``r_i``."""

    def __init__(self, members: int, **kwargs):
        super().__init__(**kwargs)
        self.members = _check_members(members)

    def build(self, input_shape):
        # TabM-mini initializes r_i with random signs (+1 or -1), so the members start apart.
        signs = keras.initializers.RandomUniform(-1.0, 1.0)
        self.r = self.add_weight(name="r", shape=(self.members, input_shape[-1]),
                                 initializer=lambda shape, dtype=None: keras.ops.sign(signs(shape, dtype)))

    def call(self, inputs):
        x = keras.ops.cast(inputs, self.compute_dtype)
        return keras.ops.expand_dims(x, 1) * self.r

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.members, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "members": self.members}


@keras.saving.register_keras_serializable(package="zoo")
class EnsembleDense(keras.layers.Layer):
    """``(batch, members, features) -> (batch, members, units)``: one dense layer per member."""

    def __init__(self, members: int, units: int, **kwargs):
        super().__init__(**kwargs)
        self.members = _check_members(members)
        if not isinstance(units, int) or units < 1:
            raise ValueError(f"units must be a positive integer. Received: units={units!r}")
        self.units = units

    def build(self, input_shape):
        bound = 1 / math.sqrt(input_shape[-1])  # torch.nn.Linear's default, as TabM's code uses
        init = keras.initializers.RandomUniform(-bound, bound)
        self.kernel = self.add_weight(name="kernel", shape=(self.members, input_shape[-1], self.units), initializer=init)
        self.bias = self.add_weight(name="bias", shape=(self.members, self.units), initializer=init)

    def call(self, inputs):
        x = keras.ops.transpose(keras.ops.cast(inputs, self.compute_dtype), (1, 0, 2))  # (members, batch, features)
        return keras.ops.transpose(keras.ops.matmul(x, self.kernel), (1, 0, 2)) + self.bias

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.members, self.units)

    def get_config(self):
        return {**super().get_config(), "members": self.members, "units": self.units}
