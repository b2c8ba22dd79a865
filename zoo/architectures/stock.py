"""A zoo model rebuilt from stock Keras: the baseline "plain Keras" that zoo's speed is measured against.

zoo models differ from what a user would write in plain Keras in two ways
only: zoo's own layers that replace a stock one for speed (the fused
`BatchNormalization`, the `Conv2D` whose 1x1 convolutions train as matmuls,
the `DepthwiseConv2D` with cheaper gradients on small images), and the
`ZooModel` train step. `stock_keras_model`
undoes both: the same graph, layer names and weights, with each such layer
swapped for its stock parent and a plain `keras.Model` around it. Layers
with no stock equivalent (e.g. ResNet's zero-padding shortcut) are kept.
(zoo's fused optimizers are the compile step's business: the benchmarks give
the baseline Keras's own.)
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.depthwise import DepthwiseConv2D

# zoo layer -> the stock Keras layer it replaces (same constructor arguments and weights).
STOCK_EQUIVALENTS = {BatchNormalization: keras.layers.BatchNormalization, Conv2D: keras.layers.Conv2D,
                     DepthwiseConv2D: keras.layers.DepthwiseConv2D}


def stock_layer(layer):
    """A fresh copy of `layer` as its stock Keras class where it has one, else of its own class."""
    cls = STOCK_EQUIVALENTS.get(type(layer), type(layer))
    return cls.from_config(layer.get_config())


def stock_keras_model(model: keras.Model) -> keras.Model:
    """`model`'s graph and weights as a plain `keras.Model` of stock layers (not compiled).

    Example:
        >>> plain = stock_keras_model(zoo.build("resnet20"))
        >>> type(plain.get_layer("stem_bn"))   # keras.layers.BatchNormalization
    """
    clone = keras.models.clone_model(model, clone_function=stock_layer)
    plain = keras.Model(clone.inputs, clone.outputs, name=f"keras_{model.name}")
    plain.set_weights(model.get_weights())
    return plain
