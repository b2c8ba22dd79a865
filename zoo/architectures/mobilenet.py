"""MobileNetV2: inverted residuals with linear bottlenecks.

Sandler, Howard, Zhu, Zhmoginov & Chen 2018, "MobileNetV2: Inverted
Residuals and Linear Bottlenecks" (CVPR), https://arxiv.org/abs/1801.04381.

The layer structure, names and weight order are those of
`keras.applications.MobileNetV2` (ReLU6, BN momentum 0.999 and epsilon
1e-3, `_make_divisible` channel rounding, explicit padding before strided
depthwise convs), so its weights load with `set_weights`, and keras.applications'
`.h5` files load by layer name (`zoo.build(..., weights=path)`). Two names
differ: the last 1x1 conv is `Conv_1_conv` (declared as an alias of Keras'
`Conv_1`) and the pooling layer is `avg_pool`.
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import (
    check_image_input,
    check_pooling,
    correct_pad,
    image_top,
    make_divisible,
    make_model,
)
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.depthwise import DepthwiseConv2D
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Sandler et al. 2018, MobileNetV2: Inverted Residuals and Linear Bottlenecks (CVPR), "
    "https://arxiv.org/abs/1801.04381; layout of keras.applications.MobileNetV2"
)

# Table 2 of the paper: (expansion t, output channels c, repeats n, first stride s).
_INVERTED_RESIDUAL_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _bn(x, name, momentum=0.999):
    return BatchNormalization(epsilon=1e-3, momentum=momentum, name=name)(x)


def inverted_residual_block(x, expansion: int, strides: int, filters: int, name: str, bn_momentum: float = 0.999):
    """1x1 expansion (skipped when `expansion == 1`) -> 3x3 depthwise -> linear 1x1 projection.

    The residual connection is added when the shape is kept.
    """
    inputs = x
    in_channels = x.shape[-1]
    if expansion != 1:
        x = Conv2D(expansion * in_channels, 1, padding="same", use_bias=False, name=f"{name}expand")(x)
        x = _bn(x, f"{name}expand_BN", bn_momentum)
        x = keras.layers.ReLU(6.0, name=f"{name}expand_relu")(x)
    if strides == 2:
        x = keras.layers.ZeroPadding2D(correct_pad(x, 3), name=f"{name}pad")(x)
    x = DepthwiseConv2D(
        3, strides=strides, use_bias=False, padding="same" if strides == 1 else "valid", name=f"{name}depthwise"
    )(x)
    x = _bn(x, f"{name}depthwise_BN", bn_momentum)
    x = keras.layers.ReLU(6.0, name=f"{name}depthwise_relu")(x)
    x = Conv2D(filters, 1, padding="same", use_bias=False, name=f"{name}project")(x)
    x = _bn(x, f"{name}project_BN", bn_momentum)
    if in_channels == filters and strides == 1:
        x = keras.layers.Add(name=f"{name}add")([inputs, x])
    return x


@register_model(
    family="cnn", paper=_PAPER, input_shape=(224, 224, 3), params=3_538_984, num_classes=1000,
    keras_twin=KerasTwin("MobileNetV2", layer_aliases={"Conv_1": "Conv_1_conv"}),
)
def mobilenet_v2(
    input_shape,
    num_classes,
    name="mobilenet_v2",
    alpha: float = 1.0,
    include_top: bool = True,
    pooling: str | None = None,
    dropout: float = 0.0,
    bn_momentum: float = 0.999,
    classifier_activation: str | None = "softmax",
):
    """MobileNetV2 (Sandler et al. 2018), weight-compatible with keras.applications.MobileNetV2.

    A 3x3/2 conv, the 17 inverted residual blocks of the paper's Table 2,
    a 1x1 conv to 1280 channels, global pooling and a linear classifier.

    Args:
        alpha: width multiplier; block channels are `make_divisible(c * alpha, 8)`.
            The last conv keeps 1280 channels unless `alpha > 1`.
        include_top: end with the classifier (else with the features, as keras.applications).
        pooling: None, "avg" or "max": the global pooling before the classifier
            ("avg" if None), or of the features without the top (None: the 4D map).
        dropout: dropout before the classifier (Keras' model has none).
        bn_momentum: BatchNorm moving-average momentum. Keras' 0.999 suits ImageNet-length runs; in
            a few-epoch run the moving statistics lag far behind (after 1,400 steps a quarter of the
            initial value remains) and evaluation fails, so short runs want 0.99.

    Example:
        >>> model = zoo.build("mobilenet_v2", alpha=0.35, input_shape=(96, 96, 3), num_classes=10)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0. Received: alpha={alpha}")
    if not 0 < bn_momentum < 1:
        raise ValueError(f"bn_momentum must be in (0, 1). Received: bn_momentum={bn_momentum}")
    inputs = keras.Input(tuple(input_shape), name="image")
    x = Conv2D(
        make_divisible(32 * alpha, 8), 3, strides=2, padding="same", use_bias=False, name="Conv1"
    )(inputs)
    x = _bn(x, "bn_Conv1", bn_momentum)
    x = keras.layers.ReLU(6.0, name="Conv1_relu")(x)
    block_id = 0
    for expansion, channels, repeats, first_stride in _INVERTED_RESIDUAL_SETTINGS:
        for i in range(repeats):
            prefix = f"block_{block_id}_" if block_id else "expanded_conv_"
            x = inverted_residual_block(
                x,
                expansion,
                first_stride if i == 0 else 1,
                make_divisible(int(channels * alpha), 8),
                name=prefix,
                bn_momentum=bn_momentum,
            )
            block_id += 1
    last_filters = make_divisible(1280 * alpha, 8) if alpha > 1.0 else 1280
    x = Conv2D(last_filters, 1, use_bias=False, name="Conv_1_conv")(x)
    x = _bn(x, "Conv_1_bn", bn_momentum)
    x = keras.layers.ReLU(6.0, name="out_relu")(x)
    outputs = image_top(x, include_top=include_top, num_classes=num_classes, pooling=pooling,
                        classifier_activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)
