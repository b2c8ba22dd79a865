"""EfficientNetV2 B0-B3, S, M, L: fused MBConv in the early stages, trained faster at smaller images.

Tan & Le 2021, "EfficientNetV2: Smaller Models and Faster Training" (ICML),
https://arxiv.org/abs/2104.00298.

The layer structure, names, initializers and weight order are those of
`keras.applications.EfficientNetV2B0..L`, so their `.h5` weight files load
by layer name. The model takes pixels in [0, 255]: B0-B3 rescale to [0, 1]
and normalize with ImageNet's mean and std, S/M/L rescale to [-1, 1]
(`include_preprocessing=True`, as Keras). Unlike V1, the strided depthwise
convs pad "same", and BatchNorm momentum is 0.9.
"""

from __future__ import annotations

import dataclasses
import math

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import check_image_input, check_pooling, image_top, make_model
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.depthwise import DepthwiseConv2D
from zoo.architectures.efficientnet import CONV_INITIALIZER, DENSE_INITIALIZER, squeeze_excite
from zoo.architectures.normalization import Normalization
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Tan & Le 2021, EfficientNetV2: Smaller Models and Faster Training (ICML), https://arxiv.org/abs/2104.00298; "
    "layout of keras.applications.EfficientNetV2"
)
_BN_MOMENTUM = 0.9


@dataclasses.dataclass(frozen=True)
class Stage:
    """A row of the paper's Table 4 (S) or keras.applications' block table: repeats of one block type."""

    fused: bool
    repeats: int
    filters_in: int
    filters_out: int
    expand_ratio: int
    strides: int
    se_ratio: float = 0.0
    kernel_size: int = 3


_B = (
    Stage(True, 1, 32, 16, 1, 1), Stage(True, 2, 16, 32, 4, 2), Stage(True, 2, 32, 48, 4, 2),
    Stage(False, 3, 48, 96, 4, 2, 0.25), Stage(False, 5, 96, 112, 6, 1, 0.25), Stage(False, 8, 112, 192, 6, 2, 0.25),
)
_S = (
    Stage(True, 2, 24, 24, 1, 1), Stage(True, 4, 24, 48, 4, 2), Stage(True, 4, 48, 64, 4, 2),
    Stage(False, 6, 64, 128, 4, 2, 0.25), Stage(False, 9, 128, 160, 6, 1, 0.25), Stage(False, 15, 160, 256, 6, 2, 0.25),
)
_M = (
    Stage(True, 3, 24, 24, 1, 1), Stage(True, 5, 24, 48, 4, 2), Stage(True, 5, 48, 80, 4, 2),
    Stage(False, 7, 80, 160, 4, 2, 0.25), Stage(False, 14, 160, 176, 6, 1, 0.25),
    Stage(False, 18, 176, 304, 6, 2, 0.25), Stage(False, 5, 304, 512, 6, 1, 0.25),
)
_L = (
    Stage(True, 4, 32, 32, 1, 1), Stage(True, 7, 32, 64, 4, 2), Stage(True, 7, 64, 96, 4, 2),
    Stage(False, 10, 96, 192, 4, 2, 0.25), Stage(False, 19, 192, 224, 6, 1, 0.25),
    Stage(False, 25, 224, 384, 6, 2, 0.25), Stage(False, 7, 384, 640, 6, 1, 0.25),
)
# variant: (stages, width, depth, resolution), keras.applications' values.
VARIANTS = {
    "b0": (_B, 1.0, 1.0, 224), "b1": (_B, 1.0, 1.1, 240), "b2": (_B, 1.1, 1.2, 260), "b3": (_B, 1.2, 1.4, 300),
    "s": (_S, 1.0, 1.0, 384), "m": (_M, 1.0, 1.0, 480), "l": (_L, 1.0, 1.0, 480),
}
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_VARIANCE = (0.229**2, 0.224**2, 0.225**2)


def _bn_act(x, activation, prefix):
    """BatchNorm `{prefix}bn` and activation `{prefix}activation` (prefix e.g. "stem_", "block1a_expand_")."""
    x = BatchNormalization(momentum=_BN_MOMENTUM, name=f"{prefix}bn")(x)
    return keras.layers.Activation(activation, name=f"{prefix}activation")(x)


def _conv(x, filters, kernel_size, strides, name):
    return Conv2D(filters, kernel_size, strides=strides, padding="same", use_bias=False,
                  kernel_initializer=CONV_INITIALIZER, name=name)(x)


def _residual(x, inputs, stage_strides, filters_in, filters_out, drop_rate, name):
    if stage_strides == 1 and filters_in == filters_out:
        if drop_rate:
            x = keras.layers.Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = keras.layers.Add(name=f"{name}add")([x, inputs])
    return x


def mbconv_block(x, s: Stage, filters_in, filters_out, strides, drop_rate, activation, name):
    """1x1 expansion -> depthwise kxk ("same" padding) -> SE -> linear 1x1 projection (+ residual)."""
    inputs = x
    filters = filters_in * s.expand_ratio
    if s.expand_ratio != 1:
        x = _conv(x, filters, 1, 1, f"{name}expand_conv")
        x = _bn_act(x, activation, f"{name}expand_")
    x = DepthwiseConv2D(s.kernel_size, strides=strides, padding="same", use_bias=False,
                        depthwise_initializer=CONV_INITIALIZER, name=f"{name}dwconv2")(x)
    x = _bn_act(x, activation, name)
    if 0 < s.se_ratio <= 1:
        x = squeeze_excite(x, max(1, int(filters_in * s.se_ratio)), activation, name)
    x = _conv(x, filters_out, 1, 1, f"{name}project_conv")
    x = BatchNormalization(momentum=_BN_MOMENTUM, name=f"{name}project_bn")(x)
    return _residual(x, inputs, strides, filters_in, filters_out, drop_rate, name)


def fused_mbconv_block(x, s: Stage, filters_in, filters_out, strides, drop_rate, activation, name):
    """kxk expansion conv (stride) -> SE -> 1x1 projection; without expansion one kxk conv (Tan & Le 2021, Fig. 2)."""
    inputs = x
    if s.expand_ratio != 1:
        x = _conv(x, filters_in * s.expand_ratio, s.kernel_size, strides, f"{name}expand_conv")
        x = _bn_act(x, activation, f"{name}expand_")
    if 0 < s.se_ratio <= 1:
        x = squeeze_excite(x, max(1, int(filters_in * s.se_ratio)), activation, name)
    expanded = s.expand_ratio != 1
    x = _conv(x, filters_out, 1 if expanded else s.kernel_size, 1 if expanded else strides, f"{name}project_conv")
    x = BatchNormalization(momentum=_BN_MOMENTUM, name=f"{name}project_bn")(x)
    if not expanded:
        x = keras.layers.Activation(activation, name=f"{name}project_activation")(x)
    return _residual(x, inputs, strides, filters_in, filters_out, drop_rate, name)


def efficientnet_v2(
    input_shape,
    num_classes,
    name: str = "efficientnet_v2",
    variant: str = "b0",
    dropout: float = 0.2,
    drop_connect_rate: float = 0.2,
    activation: str = "swish",
    include_preprocessing: bool = True,
    include_top: bool = True,
    pooling: str | None = None,
    classifier_activation: str | None = "softmax",
):
    """EfficientNetV2 (Tan & Le 2021), as keras.applications builds it.

    A 3x3/2 stem, fused-MBConv then MBConv stages (the variant's table,
    channels times its width rounded to multiples of 8, repeats times its
    depth rounded up), a 1x1 conv to 1280 x width channels, pooling and a
    linear classifier.

    Args:
        variant: "b0".."b3", "s", "m" or "l".
        dropout: before the classifier.
        drop_connect_rate: stochastic depth, rising linearly over the blocks.
        include_preprocessing: take [0, 255] pixels (see the module docstring).
        include_top: end with the classifier (else with the features).
        pooling: None, "avg" or "max", with keras.applications' meaning.

    Example:
        >>> model = zoo.build("efficientnet_v2_b0", input_shape=(128, 128, 3), num_classes=10)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}. Received: variant={variant!r}")
    stages, width, depth, _ = VARIANTS[variant]

    def filters(n):  # keras.applications' V2 rounding: to a multiple of 8, no 10% rule
        return max(8, int(n * width + 4) // 8 * 8)

    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    if include_preprocessing and variant.startswith("b"):
        x = keras.layers.Rescaling(1.0 / 255, name="stem_rescaling")(x)
        x = Normalization(mean=_IMAGENET_MEAN, variance=_IMAGENET_VARIANCE, name="stem_normalization")(x)
    elif include_preprocessing:
        x = keras.layers.Rescaling(1.0 / 128.0, offset=-1, name="stem_rescaling")(x)
    x = _conv(x, filters(stages[0].filters_in), 3, 2, "stem_conv")
    x = _bn_act(x, activation, "stem_")
    total = float(sum(s.repeats for s in stages))  # unscaled, as keras.applications counts
    b = 0
    for i, stage in enumerate(stages):
        block = fused_mbconv_block if stage.fused else mbconv_block
        for j in range(math.ceil(depth * stage.repeats)):
            x = block(
                x, stage,
                filters(stage.filters_in) if j == 0 else filters(stage.filters_out),
                filters(stage.filters_out),
                stage.strides if j == 0 else 1,
                drop_connect_rate * b / total,
                activation,
                name=f"block{i + 1}{chr(j + 97)}_",
            )
            b += 1
    x = _conv(x, filters(1280), 1, 1, "top_conv")
    x = _bn_act(x, activation, "top_")
    outputs = image_top(x, include_top=include_top, num_classes=num_classes, pooling=pooling,
                        classifier_activation=classifier_activation, dropout=dropout,
                        kernel_initializer=DENSE_INITIALIZER)
    return make_model(inputs, outputs, name)


def _register(variant: str, params: int):
    _, width, depth, resolution = VARIANTS[variant]
    model_name = f"efficientnet_v2_{variant}"
    application = f"EfficientNetV2{variant.upper()}"

    def builder(input_shape, num_classes, name=model_name, **kwargs):
        return efficientnet_v2(input_shape, num_classes, name, variant=variant, **kwargs)

    builder.__name__ = builder.__qualname__ = model_name
    builder.__doc__ = (
        f"EfficientNetV2-{variant.upper()} ({resolution} px), weight-compatible with "
        f"keras.applications.{application}.\n\n"
        "See `efficientnet_v2` for the options (`include_top`, `pooling`, `dropout`, `drop_connect_rate`)."
    )
    return register_model(
        family="cnn", paper=_PAPER, input_shape=(resolution, resolution, 3), params=params, num_classes=1000,
        keras_twin=KerasTwin(application), variant_of=None if variant == "b0" else "efficientnet_v2_b0",
    )(builder)


efficientnet_v2_b0 = _register("b0", params=7_200_312)
efficientnet_v2_b1 = _register("b1", params=8_212_124)
efficientnet_v2_b2 = _register("b2", params=10_178_374)
efficientnet_v2_b3 = _register("b3", params=14_467_622)
efficientnet_v2_s = _register("s", params=21_612_360)
efficientnet_v2_m = _register("m", params=54_431_388)
efficientnet_v2_l = _register("l", params=119_027_848)
