"""EfficientNet B0-B7: MBConv networks scaled in width, depth and resolution together.

Tan & Le 2019, "EfficientNet: Rethinking Model Scaling for Convolutional
Neural Networks" (ICML), https://arxiv.org/abs/1905.11946.

The layer structure, names, initializers and weight order are those of
`keras.applications.EfficientNetB0..B7`, so their `.h5` weight files load by
layer name (`zoo.build("efficientnet_b0", weights=path)`). The model takes
pixels in [0, 255]: it starts with keras' `Rescaling(1/255)` and
`Normalization` (named `stem_rescaling` and `stem_normalization` here,
declared as aliases of Keras' automatic `rescaling` and `normalization`).
"""

from __future__ import annotations

import dataclasses
import math

import keras
import numpy as np

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.normalization import Normalization
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
    "Tan & Le 2019, EfficientNet: Rethinking Model Scaling for Convolutional Neural Networks (ICML), "
    "https://arxiv.org/abs/1905.11946; layout of keras.applications.EfficientNet"
)

# keras.applications' initializers (from the reference TPU implementation).
CONV_INITIALIZER = {"class_name": "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_out",
                                                               "distribution": "truncated_normal"}}
DENSE_INITIALIZER = {"class_name": "VarianceScaling", "config": {"scale": 1.0 / 3.0, "mode": "fan_out",
                                                                "distribution": "uniform"}}
IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)
IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


@dataclasses.dataclass(frozen=True)
class MBConvStage:
    """One row of the paper's Table 1 (B0): repeats of an MBConv block."""

    kernel_size: int
    repeats: int
    filters_in: int
    filters_out: int
    expand_ratio: int
    strides: int
    se_ratio: float = 0.25


B0_STAGES = (
    MBConvStage(3, 1, 32, 16, 1, 1),
    MBConvStage(3, 2, 16, 24, 6, 2),
    MBConvStage(5, 2, 24, 40, 6, 2),
    MBConvStage(3, 3, 40, 80, 6, 2),
    MBConvStage(5, 3, 80, 112, 6, 1),
    MBConvStage(5, 4, 112, 192, 6, 2),
    MBConvStage(3, 1, 192, 320, 6, 1),
)

# variant: (width multiplier, depth multiplier, input resolution, classifier dropout), keras.applications' values.
VARIANTS = {
    "b0": (1.0, 1.0, 224, 0.2),
    "b1": (1.0, 1.1, 240, 0.2),
    "b2": (1.1, 1.2, 260, 0.3),
    "b3": (1.2, 1.4, 300, 0.3),
    "b4": (1.4, 1.8, 380, 0.4),
    "b5": (1.6, 2.2, 456, 0.4),
    "b6": (1.8, 2.6, 528, 0.5),
    "b7": (2.0, 3.1, 600, 0.5),
}


def squeeze_excite(x, reduced: int, activation: str, name: str):
    """Squeeze-and-excitation (Hu et al. 2018, https://arxiv.org/abs/1709.01507): channel gates from a global pool."""
    filters = x.shape[-1]
    se = keras.layers.GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se = keras.layers.Reshape((1, 1, filters), name=f"{name}se_reshape")(se)
    se = Conv2D(reduced, 1, padding="same", activation=activation, kernel_initializer=CONV_INITIALIZER,
                name=f"{name}se_reduce")(se)
    se = Conv2D(filters, 1, padding="same", activation="sigmoid", kernel_initializer=CONV_INITIALIZER,
                name=f"{name}se_expand")(se)
    return keras.layers.Multiply(name=f"{name}se_excite")([x, se])


def mbconv_block(
    x, *, filters_in: int, filters_out: int, kernel_size: int, strides: int, expand_ratio: int,
    se_ratio: float, drop_rate: float, activation: str, name: str,
):
    """Inverted residual with squeeze-and-excitation (Tan & Le 2019, Sec. 4; MnasNet's MBConv).

    1x1 expansion (unless `expand_ratio == 1`) -> depthwise kxk -> SE ->
    linear 1x1 projection; the residual is added (after drop-connect with
    `drop_rate`) when the shape is kept.
    """
    inputs = x
    filters = filters_in * expand_ratio
    if expand_ratio != 1:
        x = Conv2D(filters, 1, padding="same", use_bias=False, kernel_initializer=CONV_INITIALIZER,
                   name=f"{name}expand_conv")(x)
        x = BatchNormalization(name=f"{name}expand_bn")(x)
        x = keras.layers.Activation(activation, name=f"{name}expand_activation")(x)
    if strides == 2:
        x = keras.layers.ZeroPadding2D(correct_pad(x, kernel_size), name=f"{name}dwconv_pad")(x)
    x = DepthwiseConv2D(kernel_size, strides=strides, padding="same" if strides == 1 else "valid",
                        use_bias=False, depthwise_initializer=CONV_INITIALIZER, name=f"{name}dwconv")(x)
    x = BatchNormalization(name=f"{name}bn")(x)
    x = keras.layers.Activation(activation, name=f"{name}activation")(x)
    if 0 < se_ratio <= 1:
        x = squeeze_excite(x, max(1, int(filters_in * se_ratio)), activation, name)
    x = Conv2D(filters_out, 1, padding="same", use_bias=False, kernel_initializer=CONV_INITIALIZER,
               name=f"{name}project_conv")(x)
    x = BatchNormalization(name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        if drop_rate > 0:
            x = keras.layers.Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
        x = keras.layers.Add(name=f"{name}add")([x, inputs])
    return x


def efficientnet(
    input_shape,
    num_classes,
    name: str = "efficientnet",
    width: float = 1.0,
    depth: float = 1.0,
    dropout: float = 0.2,
    drop_connect_rate: float = 0.2,
    activation: str = "swish",
    include_top: bool = True,
    pooling: str | None = None,
    classifier_activation: str | None = "softmax",
):
    """EfficientNet (Tan & Le 2019) at width/depth multipliers, as keras.applications builds it.

    Rescaling to [0, 1] and per-channel normalization, a 3x3/2 stem, the
    seven MBConv stages of Table 1 (channels times `width`, repeats times
    `depth`, rounded up), a 1x1 conv to 1280 x `width` channels, pooling
    and a linear classifier.

    Args:
        width, depth: the compound-scaling multipliers (B0: 1.0, 1.0).
        dropout: before the classifier.
        drop_connect_rate: the last block's drop-connect rate; block i of n
            drops with `drop_connect_rate * i / n` (stochastic depth).
        include_top: end with the classifier (else with the features).
        pooling: None, "avg" or "max", with keras.applications' meaning.

    Example:
        >>> model = zoo.build("efficientnet_b0", input_shape=(128, 128, 3), num_classes=10)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if not width > 0 or not depth > 0:
        raise ValueError(f"width and depth must be > 0. Received: width={width}, depth={depth}")
    if not 0 <= dropout < 1 or not 0 <= drop_connect_rate < 1:
        raise ValueError(f"dropout and drop_connect_rate must be in [0, 1). Received: {dropout}, {drop_connect_rate}")

    def filters(n):
        return make_divisible(n * width, 8)

    def repeats(n):
        return math.ceil(depth * n)

    inputs = keras.Input(tuple(input_shape), name="image")
    x = keras.layers.Rescaling(1.0 / 255.0, name="stem_rescaling")(inputs)
    x = Normalization(axis=-1, name="stem_normalization")(x)
    x = keras.layers.ZeroPadding2D(correct_pad(x, 3), name="stem_conv_pad")(x)
    x = Conv2D(filters(32), 3, strides=2, padding="valid", use_bias=False,
               kernel_initializer=CONV_INITIALIZER, name="stem_conv")(x)
    x = BatchNormalization(name="stem_bn")(x)
    x = keras.layers.Activation(activation, name="stem_activation")(x)
    total = float(sum(repeats(s.repeats) for s in B0_STAGES))
    b = 0
    for i, stage in enumerate(B0_STAGES):
        for j in range(repeats(stage.repeats)):
            x = mbconv_block(
                x,
                filters_in=filters(stage.filters_in) if j == 0 else filters(stage.filters_out),
                filters_out=filters(stage.filters_out),
                kernel_size=stage.kernel_size,
                strides=stage.strides if j == 0 else 1,
                expand_ratio=stage.expand_ratio,
                se_ratio=stage.se_ratio,
                drop_rate=drop_connect_rate * b / total,
                activation=activation,
                name=f"block{i + 1}{chr(j + 97)}_",
            )
            b += 1
    x = Conv2D(filters(1280), 1, padding="same", use_bias=False, kernel_initializer=CONV_INITIALIZER,
               name="top_conv")(x)
    x = BatchNormalization(name="top_bn")(x)
    x = keras.layers.Activation(activation, name="top_activation")(x)
    outputs = image_top(x, include_top=include_top, num_classes=num_classes, pooling=pooling,
                        classifier_activation=classifier_activation, dropout=dropout,
                        kernel_initializer=DENSE_INITIALIZER)
    return make_model(inputs, outputs, name)


def fix_imagenet_variance(model) -> str | None:
    """Squares the input normalization's variance where it holds ImageNet's standard deviations.

    keras.applications' EfficientNet ImageNet files store the RGB standard
    deviations as the `Normalization` variance, so the layer divides by
    their square root; `EfficientNetB0(weights="imagenet")` makes up for it
    with an extra `Rescaling` (tensorflow/tensorflow#49930). Loading such a
    file here gives the same function: `(x/255 - mean) / std`.
    """
    layer = model.get_layer("stem_normalization")
    variance = np.asarray(layer.get_weights()[1])
    if not np.allclose(variance, IMAGENET_STDDEV_RGB, atol=1e-6):
        return None
    layer.variables[1].assign(np.square(variance).astype(variance.dtype))
    layer.finalize_state()  # the layer computes with a copy of its variables, made here
    return "stem_normalization: the file's variance held ImageNet's standard deviations; squared (tensorflow#49930)"


_TWIN_ALIASES = {"rescaling": "stem_rescaling", "normalization": "stem_normalization"}


def _register(variant: str, params: int):
    width, depth, resolution, dropout = VARIANTS[variant]
    model_name = f"efficientnet_{variant}"
    application = f"EfficientNet{variant.upper()}"

    def builder(input_shape, num_classes, name=model_name, **kwargs):
        kwargs.setdefault("dropout", dropout)
        return efficientnet(input_shape, num_classes, name, width=width, depth=depth, **kwargs)

    builder.__name__ = builder.__qualname__ = model_name
    builder.__doc__ = (
        f"EfficientNet-{variant.upper()} (width {width}, depth {depth}, {resolution} px), "
        f"weight-compatible with keras.applications.{application}.\n\n"
        "See `efficientnet` for the options (`include_top`, `pooling`, `dropout`, `drop_connect_rate`)."
    )
    return register_model(
        family="cnn", paper=_PAPER, input_shape=(resolution, resolution, 3), params=params, num_classes=1000,
        keras_twin=KerasTwin(application, layer_aliases=_TWIN_ALIASES, after_load=fix_imagenet_variance),
        variant_of=None if variant == "b0" else "efficientnet_b0",
    )(builder)


efficientnet_b0 = _register("b0", params=5_330_571)
efficientnet_b1 = _register("b1", params=7_856_239)
efficientnet_b2 = _register("b2", params=9_177_569)
efficientnet_b3 = _register("b3", params=12_320_535)
efficientnet_b4 = _register("b4", params=19_466_823)
efficientnet_b5 = _register("b5", params=30_562_527)
efficientnet_b6 = _register("b6", params=43_265_143)
efficientnet_b7 = _register("b7", params=66_658_687)
