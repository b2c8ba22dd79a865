"""ConvNeXt Tiny to XLarge: a ResNet modernised step by step towards the Swin Transformer.

Liu, Mao, Wu, Feichtenhofer, Darrell & Xie 2022, "A ConvNet for the 2020s"
(CVPR), https://arxiv.org/abs/2201.03545.

The layer structure, names and weight order are those of
`keras.applications.ConvNeXtTiny..XLarge`, so their `.h5` weight files load
by layer name. Keras wraps the stem and each downsampling layer in a
`Sequential`; here their layers sit in the model itself, under the inner
names Keras gives them, and the weight loader splits Keras' groups by
those names. Drop-path is a `Dropout` with one draw per example, which is
what keras' `StochasticDepth` computes. The 7x7 depthwise convs and GELU
are written so that every export format takes them (`ChannelwiseConv2D`,
`gelu_erf`). The model takes pixels in [0, 255].
"""

from __future__ import annotations

import keras
import numpy as np

from zoo.architectures.blocks import check_image_input, check_pooling, gelu_erf, make_model
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.normalization import Normalization
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Liu et al. 2022, A ConvNet for the 2020s (CVPR), https://arxiv.org/abs/2201.03545; "
    "layout of keras.applications.ConvNeXt"
)
_LN_EPSILON = 1e-6
IMAGENET_MEAN_RGB = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_VARIANCE_RGB = ((0.229 * 255) ** 2, (0.224 * 255) ** 2, (0.225 * 255) ** 2)

# variant: (blocks per stage, channels per stage), the paper's Sec. 3 and keras.applications' MODEL_CONFIGS.
VARIANTS = {
    "tiny": ((3, 3, 9, 3), (96, 192, 384, 768)),
    "small": ((3, 3, 27, 3), (96, 192, 384, 768)),
    "base": ((3, 3, 27, 3), (128, 256, 512, 1024)),
    "large": ((3, 3, 27, 3), (192, 384, 768, 1536)),
    "xlarge": ((3, 3, 27, 3), (256, 512, 1024, 2048)),
}


@keras.saving.register_keras_serializable(package="zoo")
class LayerScale(keras.layers.Layer):
    """Multiplies each channel by a learned scale that starts at `init_value` (Touvron et al. 2021, CaiT).

    Args:
        init_value: the scales' initial value (ConvNeXt: 1e-6).
        projection_dim: the number of channels.
    """

    def __init__(self, init_value: float, projection_dim: int, **kwargs):
        super().__init__(**kwargs)
        if int(projection_dim) < 1:
            raise ValueError(f"projection_dim must be >= 1. Received: projection_dim={projection_dim}")
        self.init_value = float(init_value)
        self.projection_dim = int(projection_dim)

    def build(self, input_shape):
        self.gamma = self.add_weight(
            shape=(self.projection_dim,), initializer=keras.initializers.Constant(self.init_value), name="gamma"
        )

    def call(self, x):
        return x * keras.ops.cast(self.gamma, x.dtype)

    def get_config(self):
        return {**super().get_config(), "init_value": self.init_value, "projection_dim": self.projection_dim}


@keras.saving.register_keras_serializable(package="zoo")
class ChannelwiseConv2D(keras.layers.Conv2D):
    """A `Conv2D` with `groups == filters ==` input channels, computed as a depthwise convolution.

    It holds the grouped convolution's weights (kernel `(k, k, 1, C)`), so
    keras.applications' ConvNeXt files load. Keras' TensorFlow backend runs
    grouped convolutions through an XLA-compiled function ("grouped
    convolutions are broken on CPU without XLA", keras/src/backend/tensorflow/nn.py),
    which tf2onnx cannot convert (a `StatefulPartitionedCall` node); a
    depthwise convolution is native in every runtime. Reshaping the kernel to
    `(k, k, C, 1)` keeps each channel's filter, element for element.
    """

    def build(self, input_shape):
        super().build(input_shape)
        if not (self.groups == self.filters == input_shape[-1]) or self.data_format != "channels_last":
            raise ValueError(f"{self.name}: ChannelwiseConv2D needs groups == filters == input channels, channels "
                             f"last. Received: groups={self.groups}, filters={self.filters}, input_shape={input_shape}")

    def call(self, inputs):
        k = self.kernel
        kernel = keras.ops.reshape(k, (k.shape[0], k.shape[1], self.filters, 1))
        x = keras.ops.depthwise_conv(inputs, kernel, strides=self.strides, padding=self.padding,
                                     data_format=self.data_format, dilation_rate=self.dilation_rate)
        if self.use_bias:
            x = x + self.bias
        return self.activation(x) if self.activation is not None else x


def _layer_norm(x, name):
    return keras.layers.LayerNormalization(epsilon=_LN_EPSILON, name=name)(x)


def convnext_block(x, projection_dim: int, drop_path_rate: float, layer_scale_init_value: float | None, name: str):
    """7x7 depthwise conv -> LayerNorm -> 4x pointwise (Dense) -> GELU -> pointwise -> layer scale, + input."""
    inputs = x
    x = ChannelwiseConv2D(projection_dim, 7, padding="same", groups=projection_dim, name=f"{name}_depthwise_conv")(x)
    x = _layer_norm(x, f"{name}_layernorm")
    x = keras.layers.Dense(4 * projection_dim, name=f"{name}_pointwise_conv_1")(x)
    x = keras.layers.Activation(gelu_erf, name=f"{name}_gelu")(x)
    x = keras.layers.Dense(projection_dim, name=f"{name}_pointwise_conv_2")(x)
    if layer_scale_init_value is not None:
        x = LayerScale(layer_scale_init_value, projection_dim, name=f"{name}_layer_scale")(x)
    if drop_path_rate:
        x = keras.layers.Dropout(drop_path_rate, noise_shape=(None, 1, 1, 1), name=f"{name}_stochastic_depth")(x)
    return keras.layers.Add(name=f"{name}_add")([inputs, x])


def convnext(
    input_shape,
    num_classes,
    name: str = "convnext",
    depths: tuple = VARIANTS["tiny"][0],
    projection_dims: tuple = VARIANTS["tiny"][1],
    layer_prefix: str = "convnext",
    drop_path_rate: float = 0.0,
    layer_scale_init_value: float | None = 1e-6,
    include_preprocessing: bool = True,
    include_top: bool = True,
    pooling: str | None = None,
    classifier_activation: str | None = "softmax",
):
    """ConvNeXt (Liu et al. 2022), as keras.applications builds it.

    ImageNet normalization of [0, 255] pixels, a 4x4/4 "patchify" stem,
    four stages of ConvNeXt blocks separated by LayerNorm + 2x2/2 conv
    downsampling, then global average pooling, LayerNorm and a linear
    classifier.

    Args:
        depths, projection_dims: blocks and channels per stage.
        layer_prefix: the prefix of every layer name (keras.applications
            uses the model name, e.g. "convnext_tiny"; weight files carry it).
        drop_path_rate: stochastic depth, rising linearly to this rate over the blocks.
        layer_scale_init_value: initial per-channel scale of each block's
            residual branch (None: no layer scale).
        include_preprocessing: normalize [0, 255] pixels with ImageNet's mean and std.
        include_top: end with the classifier (else with the normalized features).
        pooling: None, "avg" or "max", with keras.applications' meaning.

    Example:
        >>> model = zoo.build("convnext_tiny", input_shape=(64, 64, 3), num_classes=10, drop_path_rate=0.1)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if len(depths) != 4 or len(projection_dims) != 4 or min(*depths, *projection_dims) < 1:
        raise ValueError(f"depths and projection_dims must be 4 positive ints each. "
                         f"Received: depths={depths}, projection_dims={projection_dims}")
    if not 0 <= drop_path_rate < 1:
        raise ValueError(f"drop_path_rate must be in [0, 1). Received: drop_path_rate={drop_path_rate}")
    p = layer_prefix
    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    if include_preprocessing:
        x = Normalization(mean=IMAGENET_MEAN_RGB, variance=IMAGENET_VARIANCE_RGB, name=f"{p}_prestem_normalization")(x)
    x = Conv2D(projection_dims[0], 4, strides=4, name=f"{p}_stem_conv")(x)
    x = _layer_norm(x, f"{p}_stem_layernorm")
    rates = [float(r) for r in np.linspace(0.0, drop_path_rate, sum(depths))]
    block = 0
    for stage, (blocks, dim) in enumerate(zip(depths, projection_dims)):
        if stage:
            x = _layer_norm(x, f"{p}_downsampling_layernorm_{stage - 1}")
            x = Conv2D(dim, 2, strides=2, name=f"{p}_downsampling_conv_{stage - 1}")(x)
        for j in range(blocks):
            x = convnext_block(x, dim, rates[block], layer_scale_init_value, name=f"{p}_stage_{stage}_block_{j}")
            block += 1
    if include_top:
        pool = keras.layers.GlobalMaxPooling2D if pooling == "max" else keras.layers.GlobalAveragePooling2D
        x = pool(name=f"{p}_head_{'gmp' if pooling == 'max' else 'gap'}")(x)
        x = _layer_norm(x, f"{p}_head_layernorm")
        x = keras.layers.Dense(num_classes, name=f"{p}_head_dense")(x)
        outputs = keras.layers.Activation(classifier_activation or "linear", dtype="float32", name="predictions")(x)
    else:
        if pooling is not None:
            pool = keras.layers.GlobalMaxPooling2D if pooling == "max" else keras.layers.GlobalAveragePooling2D
            x = pool(name=f"{pooling}_pool")(x)
        outputs = _layer_norm(x, f"{p}_head_layernorm")  # keras.applications' unnamed `layer_normalization`
    return make_model(inputs, outputs, name)


def _register(variant: str, params: int):
    depths, dims = VARIANTS[variant]
    model_name = f"convnext_{variant}"
    application = f"ConvNeXt{'XLarge' if variant == 'xlarge' else variant.capitalize()}"

    def builder(input_shape, num_classes, name=model_name, **kwargs):
        return convnext(input_shape, num_classes, name, depths=depths, projection_dims=dims,
                        layer_prefix=model_name, **kwargs)

    builder.__name__ = builder.__qualname__ = model_name
    builder.__doc__ = (
        f"ConvNeXt-{variant.capitalize()} (blocks {depths}, channels {dims}), weight-compatible with "
        f"keras.applications.{application}.\n\n"
        "See `convnext` for the options (`drop_path_rate`, `include_top`, `pooling`, `include_preprocessing`)."
    )
    return register_model(
        family="cnn", paper=_PAPER, input_shape=(224, 224, 3), params=params, num_classes=1000,
        keras_twin=KerasTwin(application, layer_aliases={"layer_normalization": f"{model_name}_head_layernorm"}),
        variant_of=None if variant == "tiny" else "convnext_tiny",
    )(builder)


convnext_tiny = _register("tiny", params=28_589_128)
convnext_small = _register("small", params=50_223_688)
convnext_base = _register("base", params=88_591_464)
convnext_large = _register("large", params=197_767_336)
convnext_xlarge = _register("xlarge", params=350_196_968)
