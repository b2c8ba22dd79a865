"""Export-time lowering of layers whose TensorFlow graph no converter takes, numerically unchanged.

Grouped convolutions (`Conv2D(groups=g)`, g > 1: ConvNeXt's 7x7 depthwise
convolutions, RegNet's group convolutions). Keras's TensorFlow backend runs them
inside a `tf.function(jit_compile=True)` because TensorFlow's CPU kernel cannot
(`keras/src/backend/tensorflow/nn.py`, `conv`: "grouped convolutions are broken
on CPU without XLA"). In the exported graph that is a `StatefulPartitionedCall`
marked `_XlaMustCompile`, which graph optimizers do not inline: tf2onnx leaves
it unconverted and onnxruntime refuses the model ("INVALID_GRAPH ... In Node
StatefulPartitionedCall"), the TF.js converter rejects it ("Unsupported Ops:
StatefulPartitionedCall"). While the export traces the model, such a layer
computes the same convolution with ops every format has: one depthwise
convolution when every group is one channel (g == input channels), else one
convolution per group and a concatenation. Nothing changes outside the trace:
the instance attribute is removed again afterwards.
"""

from __future__ import annotations

import contextlib
import functools


def grouped_convolutions(model) -> list:
    """The convolution layers of `model` (nested ones too) with `groups > 1` that go through
    `convolution_op` (Conv2D, Conv3D; Conv1D calls `ops.conv` directly and is left as it is)."""
    from keras.src.layers.convolutional.base_conv import BaseConv

    layers = [model, *model._flatten_layers(include_self=False, recursive=True)]
    return [layer for layer in layers if isinstance(layer, BaseConv) and getattr(layer, "groups", 1) > 1
            and type(layer).call is BaseConv.call]


@contextlib.contextmanager
def portable_layers(model):
    """Within the block, grouped convolutions of `model` trace to plain (depthwise) convolutions.

    Yields the names of the layers rewritten.
    """
    layers = grouped_convolutions(model)
    for layer in layers:
        object.__setattr__(layer, "convolution_op", functools.partial(_grouped_conv, layer))
    try:
        yield [layer.name for layer in layers]
    finally:
        for layer in layers:
            layer.__dict__.pop("convolution_op", None)


def _grouped_conv(layer, inputs, kernel):
    from keras import ops

    channels_last = layer.data_format == "channels_last"
    axis = -1 if channels_last else 1
    groups = layer.groups
    in_channels = inputs.shape[axis]
    conv_args = dict(strides=layer.strides, padding=layer.padding, data_format=layer.data_format,
                     dilation_rate=layer.dilation_rate)
    if groups == in_channels and layer.rank in (1, 2):
        # kernel (*k, 1, groups * m): output channel g*m + j reads input channel g, which is
        # depthwise kernel (*k, groups, m) at [g, j]: the same order, so a reshape.
        multiplier = kernel.shape[-1] // groups
        depthwise = ops.reshape(kernel, (*kernel.shape[:-2], groups, multiplier))
        return ops.depthwise_conv(inputs, depthwise, **conv_args)
    parts = zip(ops.split(inputs, groups, axis=axis), ops.split(kernel, groups, axis=-1))
    return ops.concatenate([ops.conv(x, k, **conv_args) for x, k in parts], axis=axis)
