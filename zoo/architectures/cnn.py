"""Convolutional networks."""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, classifier_head, conv_bn_act, make_model
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.registry import register_model


@register_model(
    family="cnn",
    paper="LeCun, Bottou, Bengio & Haffner 1998, Gradient-based learning applied to document recognition (Proc. IEEE 86(11))",
    input_shape=(28, 28, 1), params=61_706,
)
def lenet5(
    input_shape,
    num_classes,
    name="lenet5",
    activation: str = "relu",
    pooling: str = "max",
    classifier_activation: str | None = "softmax",
):
    """LeNet-5: C1 6@5x5, S2, C3 16@5x5, S4, F5 120, F6 84, output.

    The paper pads 28x28 digits to 32x32; `padding="same"` on C1 does the
    same for a 28x28 input, so the layer sizes (and the 61,706 parameters
    of the fully connected C3 variant) match the paper's. The modern
    defaults are ReLU and max pooling; pass `activation="tanh",
    pooling="avg"` for the original's squashing units and subsampling.
    """
    h, w, _ = check_input_shape(input_shape, 3, "lenet5")
    if pooling not in ("max", "avg"):
        raise ValueError(f"pooling must be 'max' or 'avg'. Received: pooling={pooling!r}")
    pool = keras.layers.MaxPooling2D if pooling == "max" else keras.layers.AveragePooling2D
    inputs = keras.Input(tuple(input_shape), name="image")
    pad = "same" if min(h, w) < 32 else "valid"
    x = Conv2D(6, 5, padding=pad, activation=activation, name="c1_conv")(inputs)
    x = pool(2, name="s2_pool")(x)
    x = Conv2D(16, 5, activation=activation, name="c3_conv")(x)
    x = pool(2, name="s4_pool")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(120, activation=activation, name="f5_dense")(x)
    x = keras.layers.Dense(84, activation=activation, name="f6_dense")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation)
    return make_model(inputs, outputs, name)


@register_model(
    family="cnn",
    paper="Ioffe & Szegedy 2015, Batch Normalization (ICML); layout after Simonyan & Zisserman 2015, VGG (ICLR)",
    input_shape=(28, 28, 1), params=29_978,
)
def convnet_bn(
    input_shape,
    num_classes,
    name="convnet_bn",
    filters: tuple = (16, 32, 32),
    pooling: str = "flatten",
    dropout: float = 0.2,
    bn_momentum: float = 0.9,
    padding: str = "same",
    classifier_activation: str | None = "softmax",
):
    """A small batch-norm convnet, the default MNIST model.

    Per stage a 3x3 conv-BN-ReLU, with 2x2 max pooling between stages; then
    flatten (or global average pooling) and a linear classifier. About 1.5M
    multiply-adds per 28x28 image, fewer than the keras.io "simple MNIST
    convnet" (2.4M), yet batch norm lets it reach 99% test accuracy in two
    epochs instead of not quite in six. `bn_momentum=0.9` (not Keras' 0.99)
    lets the moving statistics keep up in such short runs.

    `padding="valid"` shrinks every stage by 2 pixels (28 -> 26 -> 13 -> 11 -> 5 -> 3
    on MNIST, as the keras.io convnet's 26 -> 13 -> 11 -> 5): with (16, 32, 64) filters
    that is 0.8M multiply-adds, the `mnist_speedrun` recipe's model, which reaches 99%
    in one epoch.

    Example:
        >>> model = zoo.build("convnet_bn", filters=(32, 64, 64), pooling="avg")
    """
    check_input_shape(input_shape, 3, "convnet_bn")
    if not filters or any(int(f) < 1 for f in filters):
        raise ValueError(f"filters must be a non-empty sequence of positive ints. Received: filters={filters}")
    if pooling not in ("flatten", "avg"):
        raise ValueError(f"pooling must be 'flatten' or 'avg'. Received: pooling={pooling!r}")
    if padding not in ("same", "valid"):
        raise ValueError(f"padding must be 'same' or 'valid'. Received: padding={padding!r}")
    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    for i, f in enumerate(filters):
        x = conv_bn_act(x, int(f), 3, name=f"stage{i + 1}", bn_momentum=bn_momentum, padding=padding)
        if i < len(filters) - 1:
            x = keras.layers.MaxPooling2D(2, name=f"stage{i + 1}_pool")(x)
    if pooling == "avg":
        x = keras.layers.GlobalAveragePooling2D(name="avg_pool")(x)
    else:
        x = keras.layers.Flatten(name="flatten")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)
