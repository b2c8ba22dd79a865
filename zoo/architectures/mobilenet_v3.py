"""MobileNetV3 Small and Large: inverted residuals with squeeze-and-excitation and hard-swish.

Howard, Sandler, Chu, Chen, Chen, Tan, Wang, Zhu, Pang, Vasudevan, Le &
Adam 2019, "Searching for MobileNetV3" (ICCV), https://arxiv.org/abs/1905.02244.

The layer structure, names and weight order are those of
`keras.applications.MobileNetV3Small/Large`, so their `.h5` weight files
load by layer name. Keras leaves the activations, the `Rescaling` and the
head's pooling unnamed; here they are named (they hold no weights). The
model takes pixels in [0, 255] (`include_preprocessing=True`, as Keras).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import (
    check_image_input,
    check_pooling,
    correct_pad,
    global_pool,
    make_divisible,
    make_model,
)
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.depthwise import DepthwiseConv2D
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Howard et al. 2019, Searching for MobileNetV3 (ICCV), https://arxiv.org/abs/1905.02244; "
    "layout of keras.applications.MobileNetV3"
)


@dataclasses.dataclass(frozen=True)
class Bneck:
    """One bottleneck row of the paper's Tables 1 and 2.

    `activation` is "relu" or "hswish" (the latter becomes ReLU in the
    minimalistic variant); `se` marks a squeeze-and-excitation block and a
    5x5 kernel (3x3 when minimalistic) where `kernel_size` is None.
    """

    expansion: float
    filters: int
    kernel_size: int | None
    strides: int
    se: bool
    activation: str


# Table 2 (Small) and Table 1 (Large), as keras.applications' stack_fn lists them.
SMALL = (
    Bneck(1, 16, 3, 2, True, "relu"),
    Bneck(72 / 16, 24, 3, 2, False, "relu"),
    Bneck(88 / 24, 24, 3, 1, False, "relu"),
    Bneck(4, 40, None, 2, True, "hswish"),
    Bneck(6, 40, None, 1, True, "hswish"),
    Bneck(6, 40, None, 1, True, "hswish"),
    Bneck(3, 48, None, 1, True, "hswish"),
    Bneck(3, 48, None, 1, True, "hswish"),
    Bneck(6, 96, None, 2, True, "hswish"),
    Bneck(6, 96, None, 1, True, "hswish"),
    Bneck(6, 96, None, 1, True, "hswish"),
)
LARGE = (
    Bneck(1, 16, 3, 1, False, "relu"),
    Bneck(4, 24, 3, 2, False, "relu"),
    Bneck(3, 24, 3, 1, False, "relu"),
    Bneck(3, 40, None, 2, True, "relu"),
    Bneck(3, 40, None, 1, True, "relu"),
    Bneck(3, 40, None, 1, True, "relu"),
    Bneck(6, 80, 3, 2, False, "hswish"),
    Bneck(2.5, 80, 3, 1, False, "hswish"),
    Bneck(2.3, 80, 3, 1, False, "hswish"),
    Bneck(2.3, 80, 3, 1, False, "hswish"),
    Bneck(6, 112, 3, 1, True, "hswish"),
    Bneck(6, 112, 3, 1, True, "hswish"),
    Bneck(6, 160, None, 2, True, "hswish"),
    Bneck(6, 160, None, 1, True, "hswish"),
    Bneck(6, 160, None, 1, True, "hswish"),
)
_STACKS = {"small": (SMALL, 1024), "large": (LARGE, 1280)}
_SE_RATIO = 0.25


def _bn(x, name, momentum=0.999):
    return BatchNormalization(epsilon=1e-3, momentum=momentum, name=name)(x)


def _activate(x, kind: str, name: str):
    if kind == "relu":
        return keras.layers.ReLU(name=f"{name}_relu")(x)
    return keras.layers.Activation("hard_swish", name=f"{name}_hard_swish")(x)


def squeeze_excite(x, filters: int, prefix: str):
    """Global pool -> 1x1 reduce (ReLU) -> 1x1 expand -> hard sigmoid gate (Sec. 5.3)."""
    inputs = x
    x = keras.layers.GlobalAveragePooling2D(keepdims=True, name=f"{prefix}squeeze_excite_avg_pool")(x)
    x = Conv2D(make_divisible(filters * _SE_RATIO), 1, padding="same",
               name=f"{prefix}squeeze_excite_conv")(x)
    x = keras.layers.ReLU(name=f"{prefix}squeeze_excite_relu")(x)
    x = Conv2D(filters, 1, padding="same", name=f"{prefix}squeeze_excite_conv_1")(x)
    x = keras.layers.Activation("hard_sigmoid", name=f"{prefix}squeeze_excite_hard_sigmoid")(x)
    return keras.layers.Multiply(name=f"{prefix}squeeze_excite_mul")([inputs, x])


def bneck_block(x, expansion: float, filters: int, kernel_size: int, strides: int, se: bool, activation: str,
                block_id: int, bn_momentum: float = 0.999):
    """1x1 expansion (not in the first block) -> depthwise -> SE -> linear 1x1 projection (+ residual)."""
    shortcut = x
    prefix = f"expanded_conv_{block_id}_" if block_id else "expanded_conv_"
    in_filters = x.shape[-1]
    expanded = make_divisible(in_filters * expansion)
    if block_id:
        x = Conv2D(expanded, 1, padding="same", use_bias=False, name=f"{prefix}expand")(x)
        x = _bn(x, f"{prefix}expand_bn", bn_momentum)
        x = _activate(x, activation, f"{prefix}expand")
    if strides == 2:
        x = keras.layers.ZeroPadding2D(correct_pad(x, kernel_size), name=f"{prefix}depthwise_pad")(x)
    x = DepthwiseConv2D(kernel_size, strides=strides, padding="same" if strides == 1 else "valid",
                        use_bias=False, name=f"{prefix}depthwise")(x)
    x = _bn(x, f"{prefix}depthwise_bn", bn_momentum)
    x = _activate(x, activation, f"{prefix}depthwise")
    if se:
        x = squeeze_excite(x, make_divisible(in_filters * expansion), prefix)
    x = Conv2D(filters, 1, padding="same", use_bias=False, name=f"{prefix}project")(x)
    x = _bn(x, f"{prefix}project_bn", bn_momentum)
    if strides == 1 and in_filters == filters:
        x = keras.layers.Add(name=f"{prefix}add")([shortcut, x])
    return x


def mobilenet_v3(
    input_shape,
    num_classes,
    name: str = "mobilenet_v3",
    size: str = "large",
    alpha: float = 1.0,
    minimalistic: bool = False,
    include_preprocessing: bool = True,
    include_top: bool = True,
    pooling: str | None = None,
    dropout: float = 0.2,
    bn_momentum: float = 0.999,
    classifier_activation: str | None = "softmax",
    blocks: Sequence[Bneck] | None = None,
):
    """MobileNetV3 (Howard et al. 2019), as keras.applications builds it.

    A 3x3/2 stem of 16 channels, the bottlenecks of Table 1 (Large) or 2
    (Small), a 1x1 conv to 6x the last width, then the efficient last stage
    of Sec. 5.1: pooling, a 1x1 conv to 1280 (1024 for Small), dropout and a
    1x1 conv classifier.

    Args:
        size: "small" or "large".
        alpha: width multiplier of the bottlenecks.
        minimalistic: no SE, no hard-swish, 3x3 kernels only (the paper's
            "minimalistic" models for hardware without those ops).
        include_preprocessing: scale [0, 255] pixels to [-1, 1] in the model.
        include_top: end with the classifier (else with the features).
        pooling: None, "avg" or "max", with keras.applications' meaning.
        dropout: before the classifier conv (Keras' `dropout_rate`).
        bn_momentum: BatchNorm moving-average momentum; Keras' 0.999 suits ImageNet-length runs, a
            few-epoch run wants 0.99 (see `mobilenet_v2`).
        blocks: the bottleneck rows (`Bneck`) to build instead of `size`'s table, a reduced or searched
            network (keras-hub's MobileNet backbone takes its stack as lists the same way); `size` still
            sets the head's width.

    Example:
        >>> model = zoo.build("mobilenet_v3_small", input_shape=(96, 96, 3), num_classes=10)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if size not in _STACKS:
        raise ValueError(f"size must be one of {sorted(_STACKS)}. Received: size={size!r}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0. Received: alpha={alpha}")
    if not 0 <= bn_momentum < 1:
        raise ValueError(f"bn_momentum must be in [0, 1). Received: bn_momentum={bn_momentum}")
    stack, last_point = _STACKS[size]
    if blocks is not None:
        stack = tuple(blocks)
        if not stack or not all(isinstance(b, Bneck) for b in stack):
            raise ValueError(f"blocks must be a non-empty sequence of mobilenet_v3.Bneck rows. "
                             f"Received: blocks={blocks!r}")
    big_kernel = 3 if minimalistic else 5
    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    if include_preprocessing:
        x = keras.layers.Rescaling(1.0 / 127.5, offset=-1.0, name="stem_rescaling")(x)
    stem_activation = "relu" if minimalistic else "hswish"
    x = Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="conv")(x)
    x = _bn(x, "conv_bn", bn_momentum)
    x = _activate(x, stem_activation, "conv")
    for block_id, b in enumerate(stack):
        x = bneck_block(
            x, b.expansion, make_divisible(b.filters * alpha), b.kernel_size or big_kernel, b.strides,
            b.se and not minimalistic, "relu" if minimalistic else b.activation, block_id, bn_momentum,
        )
    x = Conv2D(make_divisible(x.shape[-1] * 6), 1, padding="same", use_bias=False, name="conv_1")(x)
    x = _bn(x, "conv_1_bn", bn_momentum)
    x = _activate(x, stem_activation, "conv_1")
    if not include_top:
        outputs = x if pooling is None else global_pool(x, pooling)
        return make_model(inputs, outputs, name)
    pool = keras.layers.GlobalMaxPooling2D if pooling == "max" else keras.layers.GlobalAveragePooling2D
    x = pool(keepdims=True, name=f"{pooling or 'avg'}_pool")(x)
    if alpha > 1.0:
        last_point = make_divisible(last_point * alpha)
    x = Conv2D(last_point, 1, padding="same", name="conv_2")(x)
    x = _activate(x, stem_activation, "conv_2")
    if dropout:
        x = keras.layers.Dropout(dropout, name="head_dropout")(x)
    x = Conv2D(num_classes, 1, padding="same", name="logits")(x)
    x = keras.layers.Flatten(name="flatten")(x)
    outputs = keras.layers.Activation(classifier_activation or "linear", dtype="float32", name="predictions")(x)
    return make_model(inputs, outputs, name)


@register_model(family="cnn", paper=_PAPER, input_shape=(224, 224, 3), params=2_554_968, num_classes=1000,
                keras_twin=KerasTwin("MobileNetV3Small"))
def mobilenet_v3_small(input_shape, num_classes, name="mobilenet_v3_small", **kwargs):
    """MobileNetV3-Small (Table 2), weight-compatible with keras.applications.MobileNetV3Small.

    See `mobilenet_v3` for the options (`alpha`, `minimalistic`, `include_top`, `pooling`, `dropout`).
    """
    return mobilenet_v3(input_shape, num_classes, name, size="small", **kwargs)


@register_model(family="cnn", paper=_PAPER, input_shape=(224, 224, 3), params=5_507_432, num_classes=1000,
                keras_twin=KerasTwin("MobileNetV3Large"), variant_of="mobilenet_v3_small")
def mobilenet_v3_large(input_shape, num_classes, name="mobilenet_v3_large", **kwargs):
    """MobileNetV3-Large (Table 1), weight-compatible with keras.applications.MobileNetV3Large.

    See `mobilenet_v3` for the options (`alpha`, `minimalistic`, `include_top`, `pooling`, `dropout`).
    """
    return mobilenet_v3(input_shape, num_classes, name, size="large", **kwargs)
