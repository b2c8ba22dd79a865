"""Residual networks: the CIFAR ResNets (20-110) and the ImageNet ResNets (18/34/50).

He, Zhang, Ren & Sun 2016, "Deep Residual Learning for Image Recognition"
(CVPR), https://arxiv.org/abs/1512.03385.

- `resnet_cifar(depth)`: Section 4.2's 6n+2-layer nets for 32x32 images
  (16/32/64 filters, option A identity shortcuts), the models of Table 6.
- `resnet_imagenet(block, blocks_per_stage)`: Table 1's nets. The layer
  structure, names and weight order are those of
  `keras.applications.ResNet50` (v1: stride on the first 1x1 conv of a
  bottleneck, bias in every conv, BN epsilon 1.001e-5), so its weights
  load with `set_weights`, and keras.applications' `.h5` files by name.
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.blocks import (
    POOLINGS,
    check_image_input,
    check_input_shape,
    check_pooling,
    classifier_head,
    global_pool,
    image_top,
    make_model,
)
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "He, Zhang, Ren & Sun 2016, Deep Residual Learning for Image Recognition (CVPR), "
    "https://arxiv.org/abs/1512.03385"
)
_SHORTCUTS = ("A", "B")
_BLOCKS = ("basic", "bottleneck")
_BN_EPSILON = 1.001e-5  # keras.applications' ResNet value, kept for weight transfer.


@keras.saving.register_keras_serializable(package="zoo")
class ZeroPadShortcut(keras.layers.Layer):
    """The paper's option A shortcut: subsample by `strides`, zero-pad the channels.

    It adds no parameters, which is why Table 6's counts (0.27M for
    ResNet-20) hold only with this shortcut.

    The subsampling is a 1x1 max pooling with stride `strides`: the same
    pixels as the slice `x[:, ::s, ::s, :]`, but oneDNN's pooling kernels run
    it and its gradient several times faster than TensorFlow's StridedSlice
    and StridedSliceGrad, which took a visible share of a ResNet-20 training
    step (`results/layers/README.md`).

    Args:
        filters: output channels; at least the input's.
        strides: spatial subsampling factor (takes every `strides`-th pixel).
    """

    def __init__(self, filters: int, strides: int = 1, **kwargs):
        super().__init__(**kwargs)
        if int(filters) < 1 or int(strides) < 1:
            raise ValueError(f"filters and strides must be >= 1. Received: filters={filters}, strides={strides}")
        self.filters = int(filters)
        self.strides = int(strides)

    def build(self, input_shape):
        if input_shape[-1] > self.filters:
            raise ValueError(
                f"ZeroPadShortcut cannot shrink channels: input has {input_shape[-1]}, filters={self.filters}"
            )

    def call(self, x):
        if self.strides > 1:
            x = keras.ops.max_pool(x, pool_size=1, strides=self.strides, padding="valid")
        extra = self.filters - x.shape[-1]
        return keras.ops.pad(x, [[0, 0], [0, 0], [0, 0], [0, extra]]) if extra else x

    def compute_output_shape(self, input_shape):
        def sub(d):
            return None if d is None else -(-d // self.strides)

        return (input_shape[0], sub(input_shape[1]), sub(input_shape[2]), self.filters)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "strides": self.strides}


# --- CIFAR ResNets (Section 4.2, Table 6) -----------------------------------------------------


def _cifar_conv_bn(x, filters, strides, name, gamma_initializer="ones"):
    x = Conv2D(
        filters, 3, strides=strides, padding="same", use_bias=False, kernel_initializer="he_normal", name=f"{name}_conv"
    )(x)
    return BatchNormalization(gamma_initializer=gamma_initializer, name=f"{name}_bn")(x)


def cifar_basic_block(x, filters: int, strides: int, shortcut: str, name: str, zero_init_last: bool = True):
    """Two 3x3 conv-BN layers plus a shortcut; option A pads, option B projects (1x1 conv-BN).

    With `zero_init_last`, the last BN's scale starts at 0, so the block
    starts as its shortcut (Goyal et al. 2017, https://arxiv.org/abs/1706.02677,
    timm's `zero_init_last`).
    """
    if strides == 1 and x.shape[-1] == filters:
        residual = x
    elif shortcut == "A":
        residual = ZeroPadShortcut(filters, strides, name=f"{name}_shortcut")(x)
    else:
        residual = Conv2D(
            filters, 1, strides=strides, use_bias=False, kernel_initializer="he_normal", name=f"{name}_shortcut_conv"
        )(x)
        residual = BatchNormalization(name=f"{name}_shortcut_bn")(residual)
    x = _cifar_conv_bn(x, filters, strides, f"{name}_1")
    x = keras.layers.Activation("relu", name=f"{name}_1_relu")(x)
    x = _cifar_conv_bn(x, filters, 1, f"{name}_2", gamma_initializer="zeros" if zero_init_last else "ones")
    x = keras.layers.Add(name=f"{name}_add")([residual, x])
    return keras.layers.Activation("relu", name=f"{name}_out")(x)


def resnet_cifar(
    input_shape,
    num_classes,
    name: str = "resnet_cifar",
    depth: int = 20,
    shortcut: str = "A",
    base_filters: int = 16,
    zero_init_last: bool = True,
    pooling: str = "avg",
    dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """The CIFAR-10 ResNet of He et al. 2016, Section 4.2: 6n+2 weighted layers.

    A 3x3 conv with 16 filters, then three stages of n basic blocks with
    16, 32 and 64 filters on 32x32, 16x16 and 8x8 maps (the first conv of
    stages 2 and 3 has stride 2), global average pooling and a linear
    classifier. `shortcut="A"` (the paper's choice for CIFAR) uses
    parameter-free zero-padding shortcuts; `"B"` uses 1x1 projections.

    Args:
        depth: 6n+2 (20, 32, 44, 56, 110, 1202 in the paper).
        shortcut: "A" (identity with zero padding) or "B" (projection).
        base_filters: filters of the first stage (16); doubled per stage.
        zero_init_last: start each block's last BN scale at 0 (the block
            starts as identity). Without it, the residual sums of the
            deep nets grow about 2x per block at initialization, beyond
            float16's range in ResNet-110 under `mixed_float16`.

    Example:
        >>> model = zoo.build("resnet56", num_classes=100)
    """
    check_input_shape(input_shape, 3, name, allow_none_axes=(0, 1))
    if depth < 8 or (depth - 2) % 6:
        raise ValueError(f"depth must be 6n+2 with n >= 1 (20, 32, 44, 56, 110, ...). Received: depth={depth}")
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}. Received: pooling={pooling!r}")
    if shortcut not in _SHORTCUTS:
        raise ValueError(f"shortcut must be one of {_SHORTCUTS}. Received: shortcut={shortcut!r}")
    if base_filters < 1:
        raise ValueError(f"base_filters must be >= 1. Received: base_filters={base_filters}")
    blocks = (depth - 2) // 6
    inputs = keras.Input(tuple(input_shape), name="image")
    x = _cifar_conv_bn(inputs, base_filters, 1, "stem")
    x = keras.layers.Activation("relu", name="stem_relu")(x)
    for stage in range(3):
        for block in range(blocks):
            strides = 2 if stage > 0 and block == 0 else 1
            x = cifar_basic_block(
                x,
                base_filters * 2**stage,
                strides,
                shortcut,
                name=f"stage{stage + 1}_block{block + 1}",
                zero_init_last=zero_init_last,
            )
    x = global_pool(x, pooling)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)


def _register_cifar(depth: int, paper_params: str, params: int):
    paper = f"{_PAPER}; Table 6 (CIFAR-10, {paper_params} params)"

    def builder(input_shape, num_classes, name=f"resnet{depth}", **kwargs):
        return resnet_cifar(input_shape, num_classes, name, depth=depth, **kwargs)

    builder.__name__ = builder.__qualname__ = f"resnet{depth}"
    builder.__doc__ = (
        f"ResNet-{depth} for 32x32 images (He et al. 2016, Table 6: {paper_params} parameters).\n\n"
        f"`resnet_cifar(depth={depth})`; see it for the options (`shortcut`, `zero_init_last`, `pooling`, `dropout`)."
    )
    return register_model(family="cnn", paper=paper, input_shape=(32, 32, 3), params=params, num_classes=10)(builder)


# The paper's counts (trainable weights, rounded), then the registered ones (BatchNorm statistics too).
resnet20 = _register_cifar(20, "0.27M", params=271_098)
resnet32 = _register_cifar(32, "0.46M", params=466_426)
resnet44 = _register_cifar(44, "0.66M", params=661_754)
resnet56 = _register_cifar(56, "0.85M", params=857_082)
resnet110 = _register_cifar(110, "1.7M", params=1_736_058)


# --- ImageNet ResNets (Table 1), laid out as keras.applications ------------------------------


def _conv_bn(x, filters, kernel_size, name, strides=1, padding="valid"):
    x = Conv2D(filters, kernel_size, strides=strides, padding=padding, name=f"{name}_conv")(x)
    return BatchNormalization(epsilon=_BN_EPSILON, name=f"{name}_bn")(x)


def bottleneck_block(x, filters: int, strides: int = 1, conv_shortcut: bool = True, name: str = "block"):
    """1x1 (stride) -> 3x3 -> 1x1 (4x filters), as keras.applications' `residual_block_v1`."""
    residual = _conv_bn(x, 4 * filters, 1, f"{name}_0", strides=strides) if conv_shortcut else x
    x = _conv_bn(x, filters, 1, f"{name}_1", strides=strides)
    x = keras.layers.Activation("relu", name=f"{name}_1_relu")(x)
    x = _conv_bn(x, filters, 3, f"{name}_2", padding="same")
    x = keras.layers.Activation("relu", name=f"{name}_2_relu")(x)
    x = _conv_bn(x, 4 * filters, 1, f"{name}_3")
    x = keras.layers.Add(name=f"{name}_add")([residual, x])
    return keras.layers.Activation("relu", name=f"{name}_out")(x)


def basic_block(x, filters: int, strides: int = 1, conv_shortcut: bool = True, name: str = "block"):
    """3x3 (stride) -> 3x3, the block of ResNet-18/34, named like the bottleneck block."""
    residual = _conv_bn(x, filters, 1, f"{name}_0", strides=strides) if conv_shortcut else x
    x = _conv_bn(x, filters, 3, f"{name}_1", strides=strides, padding="same")
    x = keras.layers.Activation("relu", name=f"{name}_1_relu")(x)
    x = _conv_bn(x, filters, 3, f"{name}_2", padding="same")
    x = keras.layers.Add(name=f"{name}_add")([residual, x])
    return keras.layers.Activation("relu", name=f"{name}_out")(x)


def resnet_imagenet(
    input_shape,
    num_classes,
    name: str = "resnet",
    block: str = "bottleneck",
    blocks_per_stage: tuple = (3, 4, 6, 3),
    include_top: bool = True,
    pooling: str | None = None,
    dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """The ImageNet ResNet (He et al. 2016, Table 1), as keras.applications builds v1.

    A 7x7/2 stem and 3x3/2 max pool, four stages (`conv2`..`conv5`) of
    64/128/256/512-filter blocks, the first of each stage (but `conv2`)
    with stride 2, global pooling and a linear classifier. Bottleneck
    stages open with a projection shortcut (option B); basic stages only
    where the shape changes.

    Args:
        block: "basic" (ResNet-18/34) or "bottleneck" (ResNet-50 and up).
        blocks_per_stage: blocks in each stage, e.g. (3, 4, 6, 3).
        include_top: end with the classifier (else with the features, as keras.applications).
        pooling: None, "avg" or "max": the global pooling before the classifier
            ("avg", as the paper, if None), or of the features without the top (None: the 4D map).

    Example:
        >>> model = zoo.build("resnet50", input_shape=(160, 160, 3), num_classes=102)
    """
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if block not in _BLOCKS:
        raise ValueError(f"block must be one of {_BLOCKS}. Received: block={block!r}")
    if not blocks_per_stage or any(int(b) < 1 for b in blocks_per_stage):
        raise ValueError(f"blocks_per_stage must be positive ints. Received: blocks_per_stage={blocks_per_stage}")
    block_fn, expansion = (bottleneck_block, 4) if block == "bottleneck" else (basic_block, 1)
    inputs = keras.Input(tuple(input_shape), name="image")
    x = keras.layers.ZeroPadding2D(((3, 3), (3, 3)), name="conv1_pad")(inputs)
    x = _conv_bn(x, 64, 7, "conv1", strides=2)
    x = keras.layers.Activation("relu", name="conv1_relu")(x)
    x = keras.layers.ZeroPadding2D(((1, 1), (1, 1)), name="pool1_pad")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    for stage, blocks in enumerate(blocks_per_stage):
        filters = 64 * 2**stage
        for i in range(int(blocks)):
            strides = 2 if stage > 0 and i == 0 else 1
            projection = i == 0 and (strides > 1 or x.shape[-1] != filters * expansion)
            x = block_fn(x, filters, strides, projection, name=f"conv{stage + 2}_block{i + 1}")
    outputs = image_top(x, include_top=include_top, num_classes=num_classes, pooling=pooling,
                        classifier_activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)


@register_model(family="cnn", paper=f"{_PAPER}; Table 1", input_shape=(224, 224, 3), params=11_703_912,
                num_classes=1000)
def resnet18(input_shape, num_classes, name="resnet18", **kwargs):
    """ResNet-18: basic blocks (2, 2, 2, 2); see `resnet_imagenet` for the options."""
    return resnet_imagenet(input_shape, num_classes, name, block="basic", blocks_per_stage=(2, 2, 2, 2), **kwargs)


@register_model(family="cnn", paper=f"{_PAPER}; Table 1", input_shape=(224, 224, 3), params=21_823_208,
                num_classes=1000)
def resnet34(input_shape, num_classes, name="resnet34", **kwargs):
    """ResNet-34: basic blocks (3, 4, 6, 3); see `resnet_imagenet` for the options."""
    return resnet_imagenet(input_shape, num_classes, name, block="basic", blocks_per_stage=(3, 4, 6, 3), **kwargs)


@register_model(
    family="cnn",
    paper=f"{_PAPER}; Table 1; layout of keras.applications.ResNet50",
    input_shape=(224, 224, 3), params=25_636_712,
    num_classes=1000,
    keras_twin=KerasTwin("ResNet50"),
)
def resnet50(input_shape, num_classes, name="resnet50", **kwargs):
    """ResNet-50: bottleneck blocks (3, 4, 6, 3), weight-compatible with keras.applications.ResNet50.

    Example:
        >>> model = zoo.build("resnet50")   # 25,636,712 parameters, as keras.applications
    """
    return resnet_imagenet(
        input_shape, num_classes, name, block="bottleneck", blocks_per_stage=(3, 4, 6, 3), **kwargs
    )
