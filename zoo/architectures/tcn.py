"""Temporal convolutional network (TCN) for sequences.

Bai, Kolter & Koltun 2018, "An Empirical Evaluation of Generic
Convolutional and Recurrent Networks for Sequence Modeling",
https://arxiv.org/abs/1803.01271 (Figure 1): residual blocks of two
dilated causal convolutions (weight-normalized, ReLU, dropout) whose
dilation doubles per level, so the receptive field grows exponentially
with depth while output `t` never sees inputs after `t`.

Weight normalization: Salimans & Kingma 2016, https://arxiv.org/abs/1602.07868.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.architectures.blocks import check_input_shape, classifier_head, global_pool, make_model
from zoo.architectures.registry import register_model

_PAPER = (
    "Bai, Kolter & Koltun 2018, An Empirical Evaluation of Generic Convolutional and Recurrent Networks "
    "for Sequence Modeling, https://arxiv.org/abs/1803.01271"
)
_OUTPUTS = ("last", "avg", "max", "sequence")


@keras.saving.register_keras_serializable(package="zoo")
class WeightNormCausalConv1D(keras.layers.Layer):
    """A dilated causal Conv1D whose kernel is `g * v / ||v||` per output channel.

    Output `t` depends on inputs `t - (kernel_size - 1) * dilation_rate .. t`
    only (left zero padding, as the paper's "chomp"). `g` starts at `||v||`,
    so the initial kernel is `v`, as PyTorch's `weight_norm` does.
    """

    def __init__(
        self, filters: int, kernel_size: int, dilation_rate: int = 1, kernel_initializer="he_normal", **kwargs
    ):
        super().__init__(**kwargs)
        if int(filters) < 1 or int(kernel_size) < 1 or int(dilation_rate) < 1:
            raise ValueError(
                "filters, kernel_size and dilation_rate must be >= 1. Received: "
                f"filters={filters}, kernel_size={kernel_size}, dilation_rate={dilation_rate}"
            )
        self.filters = int(filters)
        self.kernel_size = int(kernel_size)
        self.dilation_rate = int(dilation_rate)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        shape = (self.kernel_size, input_shape[-1], self.filters)
        self.kernel_v = self.add_weight(name="kernel_v", shape=shape, initializer=self.kernel_initializer)
        self.kernel_g = self.add_weight(name="kernel_g", shape=(self.filters,), initializer="ones")
        self.bias = self.add_weight(name="bias", shape=(self.filters,), initializer="zeros")
        self.kernel_g.assign(ops.sqrt(ops.sum(ops.square(self.kernel_v), axis=(0, 1))))

    def call(self, x):
        v = self.kernel_v
        kernel = v * (self.kernel_g / ops.sqrt(ops.sum(ops.square(v), axis=(0, 1)) + 1e-12))
        x = ops.pad(x, [[0, 0], [(self.kernel_size - 1) * self.dilation_rate, 0], [0, 0]])
        y = ops.conv(x, kernel, strides=1, padding="valid", dilation_rate=self.dilation_rate)
        return y + self.bias

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.filters)

    def get_config(self):
        return {
            **super().get_config(),
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "dilation_rate": self.dilation_rate,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="zoo")
class LastTimestep(keras.layers.Layer):
    """`x[:, -1]`: the output at the last time step, which has seen the whole (causal) sequence."""

    def call(self, x):
        return x[:, -1]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], *input_shape[2:])


def causal_conv(x, filters: int, kernel_size: int, dilation_rate: int, weight_norm: bool, name: str):
    """A dilated causal convolution, weight-normalized or a plain `Conv1D(padding="causal")`."""
    if weight_norm:
        return WeightNormCausalConv1D(filters, kernel_size, dilation_rate, name=name)(x)
    return keras.layers.Conv1D(
        filters, kernel_size, padding="causal", dilation_rate=dilation_rate, kernel_initializer="he_normal", name=name
    )(x)


def temporal_block(x, filters: int, kernel_size: int, dilation_rate: int, dropout: float, weight_norm: bool, name: str):
    """Figure 1b: 2 x (dilated causal conv, ReLU, dropout) plus a (1x1 conv) residual, then ReLU."""
    residual = x
    if x.shape[-1] != filters:
        residual = keras.layers.Conv1D(filters, 1, name=f"{name}_shortcut_conv")(x)
    for i in (1, 2):
        x = causal_conv(x, filters, kernel_size, dilation_rate, weight_norm, name=f"{name}_{i}_conv")
        x = keras.layers.Activation("relu", name=f"{name}_{i}_relu")(x)
        if dropout:
            # The paper drops whole channels (spatial dropout) in its reference code.
            x = keras.layers.SpatialDropout1D(dropout, name=f"{name}_{i}_dropout")(x)
    x = keras.layers.Add(name=f"{name}_add")([residual, x])
    return keras.layers.Activation("relu", name=f"{name}_out")(x)


def receptive_field(kernel_size: int, dilations) -> int:
    """Time steps one output sees: 1 + 2 (k - 1) sum(dilations) (two convs per block)."""
    return 1 + 2 * (kernel_size - 1) * sum(dilations)


@register_model(family="cnn", paper=_PAPER, input_shape=(28, 28), params=94_922)
def tcn(
    input_shape,
    num_classes,
    name="tcn",
    filters: int = 64,
    kernel_size: int = 3,
    dilations: tuple = (1, 2, 4, 8),
    dropout: float = 0.0,
    weight_norm: bool = True,
    output: str = "last",
    classifier_activation: str | None = "softmax",
):
    """A TCN classifier for `(timesteps, features)` sequences; `timesteps` may be None.

    One residual block per entry of `dilations`; the receptive field is
    `1 + 2 (kernel_size - 1) sum(dilations)` steps (61 with the defaults,
    enough for MNIST read as 28 rows).

    Args:
        filters: channels of every block.
        kernel_size: taps of each causal conv.
        dilations: dilation of each block (the paper doubles it: 1, 2, 4, ...).
        dropout: spatial dropout after each conv (paper: 0.0-0.2 by task).
        weight_norm: weight-normalize the causal convs, as the paper.
        output: "last" (classify from the last step, as the paper for
            sequential MNIST), "avg" / "max" (global pooling over time), or
            "sequence" (a prediction per time step, each from past inputs only).

    Example:
        >>> model = zoo.build("tcn", input_shape=(None, 28), dilations=(1, 2, 4, 8, 16))
    """
    check_input_shape(input_shape, 2, name, allow_none_axes=(0,))
    if filters < 1 or kernel_size < 1:
        raise ValueError(
            f"filters and kernel_size must be >= 1. Received: filters={filters}, kernel_size={kernel_size}"
        )
    if not dilations or any(int(d) < 1 for d in dilations):
        raise ValueError(f"dilations must be a non-empty sequence of positive ints. Received: dilations={dilations}")
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}. Received: output={output!r}")
    inputs = keras.Input(tuple(input_shape), name="sequence")
    x = inputs
    for i, d in enumerate(dilations):
        x = temporal_block(x, filters, kernel_size, int(d), dropout, weight_norm, name=f"level{i + 1}")
    if output == "last":
        x = LastTimestep(name="last_step")(x)
    elif output in ("avg", "max"):
        x = global_pool(x, output)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)
