"""DenseNet-121/169/201: every layer of a dense block sees the feature maps of all layers before it.

Huang, Liu, van der Maaten & Weinberger 2017, "Densely Connected
Convolutional Networks" (CVPR), https://arxiv.org/abs/1608.06993.

The layer structure, names and weight order are those of
`keras.applications.DenseNet121/169/201` (DenseNet-BC: 1x1 bottlenecks
of 4k channels, growth rate k = 32, compression 0.5), so their `.h5`
weight files load by layer name. As in Keras, inputs are expected
preprocessed (`keras.applications.densenet.preprocess_input`: [0, 1] then
ImageNet mean/std).
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import (
    check_image_input,
    check_pooling,
    image_top,
    make_model,
)
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Huang, Liu, van der Maaten & Weinberger 2017, Densely Connected Convolutional Networks (CVPR), "
    "https://arxiv.org/abs/1608.06993; layout of keras.applications.DenseNet"
)
_BN_EPSILON = 1.001e-5  # keras.applications' value, kept for weight transfer
GROWTH_RATE = 32

# Table 1: dense layers per block.
VARIANTS = {121: (6, 12, 24, 16), 169: (6, 12, 32, 32), 201: (6, 12, 48, 32)}


def _bn_relu(x, name):
    x = BatchNormalization(epsilon=_BN_EPSILON, name=f"{name}_bn")(x)
    return keras.layers.Activation("relu", name=f"{name}_relu")(x)


def dense_layer(x, growth_rate: int, name: str):
    """BN-ReLU-1x1 conv (4k) -> BN-ReLU-3x3 conv (k), concatenated to the input (the "-B" bottleneck)."""
    y = _bn_relu(x, f"{name}_0")
    y = Conv2D(4 * growth_rate, 1, use_bias=False, name=f"{name}_1_conv")(y)
    y = _bn_relu(y, f"{name}_1")
    y = Conv2D(growth_rate, 3, padding="same", use_bias=False, name=f"{name}_2_conv")(y)
    return keras.layers.Concatenate(name=f"{name}_concat")([x, y])


def transition(x, reduction: float, name: str):
    """BN-ReLU-1x1 conv to `reduction` x the channels, then 2x2 average pooling (the "-C" compression)."""
    x = _bn_relu(x, name)
    x = Conv2D(int(x.shape[-1] * reduction), 1, use_bias=False, name=f"{name}_conv")(x)
    return keras.layers.AveragePooling2D(2, strides=2, name=f"{name}_pool")(x)


def densenet(
    input_shape,
    num_classes,
    name: str = "densenet",
    blocks: tuple = VARIANTS[121],
    include_top: bool = True,
    pooling: str | None = None,
    dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """DenseNet-BC (Huang et al. 2017, Table 1), as keras.applications builds it.

    A 7x7/2 conv and 3x3/2 max pool, four dense blocks with transitions
    between them, a final BN-ReLU, pooling and a linear classifier.

    Args:
        blocks: dense layers per block, e.g. (6, 12, 24, 16) for DenseNet-121.
        include_top: end with the classifier (else with the features).
        pooling: None, "avg" or "max", with keras.applications' meaning.
        dropout: before the classifier (Keras' model has none).

    Example:
        >>> model = zoo.build("densenet121", input_shape=(64, 64, 3), num_classes=10)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if len(blocks) != 4 or min(blocks) < 1:
        raise ValueError(f"blocks must be 4 positive ints. Received: blocks={blocks}")
    inputs = keras.Input(tuple(input_shape), name="image")
    x = keras.layers.ZeroPadding2D(((3, 3), (3, 3)), name="conv1_pad")(inputs)
    x = Conv2D(64, 7, strides=2, use_bias=False, name="conv1_conv")(x)
    x = _bn_relu(x, "conv1")
    x = keras.layers.ZeroPadding2D(((1, 1), (1, 1)), name="pool1_pad")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, name="pool1")(x)
    for i, n in enumerate(blocks):
        for j in range(n):
            x = dense_layer(x, GROWTH_RATE, name=f"conv{i + 2}_block{j + 1}")
        if i < len(blocks) - 1:
            x = transition(x, 0.5, name=f"pool{i + 2}")
    x = BatchNormalization(epsilon=_BN_EPSILON, name="bn")(x)
    x = keras.layers.Activation("relu", name="relu")(x)
    outputs = image_top(x, include_top=include_top, num_classes=num_classes, pooling=pooling,
                        classifier_activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)


def _register(depth: int, params: int):
    model_name = f"densenet{depth}"

    def builder(input_shape, num_classes, name=model_name, **kwargs):
        return densenet(input_shape, num_classes, name, blocks=VARIANTS[depth], **kwargs)

    builder.__name__ = builder.__qualname__ = model_name
    builder.__doc__ = (
        f"DenseNet-{depth} (blocks {VARIANTS[depth]}), weight-compatible with keras.applications.DenseNet{depth}.\n\n"
        "See `densenet` for the options (`include_top`, `pooling`, `dropout`)."
    )
    return register_model(
        family="cnn", paper=_PAPER, input_shape=(224, 224, 3), params=params, num_classes=1000,
        keras_twin=KerasTwin(f"DenseNet{depth}"), variant_of=None if depth == 121 else "densenet121",
    )(builder)


densenet121 = _register(121, params=8_062_504)
densenet169 = _register(169, params=14_307_880)
densenet201 = _register(201, params=20_242_984)
