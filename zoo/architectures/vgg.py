"""VGG networks: the ImageNet VGG-16/19, and VGG-style networks with batch normalization.

Simonyan & Zisserman 2015, "Very Deep Convolutional Networks for
Large-Scale Image Recognition" (ICLR), https://arxiv.org/abs/1409.1556:
stacks of 3x3 convs with 2x2 max pooling between stages, then fully
connected layers.

- `vgg16`, `vgg19`: Table 1's configurations D and E, laid out (names,
  weight order) as `keras.applications.VGG16/19`, so their `.h5` weight
  files load by layer name.
- `vgg_bn`: each conv followed by batch normalization (Ioffe & Szegedy
  2015, https://arxiv.org/abs/1502.03167), as in torchvision's `vgg*_bn`,
  which lets such nets train without the paper's staged initialization.
"""

from __future__ import annotations

import keras

from zoo.architectures.blocks import (
    check_image_input,
    check_input_shape,
    check_pooling,
    classifier_head,
    conv_bn_act,
    global_pool,
    make_model,
)
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.registry import KerasTwin, register_model

_PAPER = (
    "Simonyan & Zisserman 2015, Very Deep Convolutional Networks (ICLR), https://arxiv.org/abs/1409.1556; "
    "Ioffe & Szegedy 2015, Batch Normalization (ICML), https://arxiv.org/abs/1502.03167"
)
_POOLINGS = ("flatten", "avg", "max")


def vgg_stage(x, filters: tuple, name: str):
    """A 3x3 conv-BN-ReLU layer per entry of `filters`, then 2x2 max pooling."""
    for i, f in enumerate(filters):
        x = conv_bn_act(x, int(f), 3, name=f"{name}_block{i + 1}")
    return keras.layers.MaxPooling2D(2, name=f"{name}_pool")(x)


def vgg_bn(
    input_shape,
    num_classes,
    name: str = "vgg_bn",
    stages: tuple = ((64,), (128,), (256, 256), (512, 512)),
    fc_units: tuple = (512,),
    pooling: str = "flatten",
    dropout: float = 0.5,
    classifier_activation: str | None = "softmax",
):
    """A VGG net with batch norm: conv stages, then fully connected layers with dropout.

    Args:
        stages: per stage, the filters of its 3x3 convs, e.g. VGG-11's
            `((64,), (128,), (256, 256), (512, 512), (512, 512))`.
        fc_units: hidden fully connected layers (VGG: (4096, 4096)).
        pooling: "flatten" (as VGG), or global "avg" / "max" pooling.
        dropout: dropout before every fully connected layer (VGG: 0.5).
    """
    shape = check_input_shape(input_shape, 3, name, allow_none_axes=(0, 1) if pooling != "flatten" else ())
    if not stages or any(not s or any(int(f) < 1 for f in s) for s in stages):
        raise ValueError(f"stages must be non-empty sequences of positive ints. Received: stages={stages}")
    if any(int(u) < 1 for u in fc_units):
        raise ValueError(f"fc_units must be positive ints. Received: fc_units={fc_units}")
    if pooling not in _POOLINGS:
        raise ValueError(f"pooling must be one of {_POOLINGS}. Received: pooling={pooling!r}")
    if any(d is not None and d < 2 ** len(stages) for d in shape[:2]):
        raise ValueError(
            f"{name}: {len(stages)} stages halve the image {len(stages)} times; "
            f"it must be at least {2 ** len(stages)} px. Received: input_shape={shape}"
        )
    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    for i, filters in enumerate(stages):
        x = vgg_stage(x, filters, name=f"stage{i + 1}")
    x = keras.layers.Flatten(name="flatten")(x) if pooling == "flatten" else global_pool(x, pooling)
    for i, units in enumerate(fc_units):
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"fc{i + 1}_dropout")(x)
        x = keras.layers.Dense(int(units), activation="relu", name=f"fc{i + 1}_dense")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)


@register_model(family="cnn", paper=_PAPER, input_shape=(32, 32, 3), params=5_560_266, num_classes=10)
def vgg8_bn(input_shape, num_classes, name="vgg8_bn", **kwargs):
    """VGG-8 with batch norm for 32x32 images: convs 64-M-128-M-256-256-M-512-512-M, FC 512, classifier.

    Eight weight layers (six 3x3 convs, two dense), about 5.5M parameters;
    a small member of the VGG family for CIFAR-sized inputs.

    Example:
        >>> model = zoo.build("vgg8_bn", num_classes=100, dropout=0.3)
    """
    return vgg_bn(input_shape, num_classes, name, **kwargs)


# --- The ImageNet VGG-16/19 (Table 1, D and E), laid out as keras.applications ------------------

# 3x3 convs per stage; the stages have 64, 128, 256, 512, 512 channels.
CONFIGURATIONS = {16: (2, 2, 3, 3, 3), 19: (2, 2, 4, 4, 4)}
_STAGE_FILTERS = (64, 128, 256, 512, 512)


def vgg(
    input_shape,
    num_classes,
    name: str = "vgg",
    convs_per_stage: tuple = CONFIGURATIONS[16],
    include_top: bool = True,
    pooling: str | None = None,
    fc_units: int = 4096,
    dropout: float = 0.5,
    classifier_activation: str | None = "softmax",
):
    """The ImageNet VGG (Simonyan & Zisserman 2015), as keras.applications builds it.

    Five stages of 3x3 conv-ReLU layers (`blockS_convI`), each ending in
    2x2 max pooling, then (with the top) flatten, two ReLU fully connected
    layers `fc1`, `fc2` and the classifier.

    Args:
        convs_per_stage: convs in each of the 5 stages (D: (2, 2, 3, 3, 3), E: (2, 2, 4, 4, 4)).
        include_top: end with the fully connected layers (else with the features).
        pooling: None, "avg" or "max": without the top as keras.applications;
            with it, global pooling instead of flatten (any input size).
        fc_units: width of fc1 and fc2.
        dropout: before fc2 and the classifier, as the paper trains (Keras' model has none;
            it changes nothing at inference).

    Example:
        >>> model = zoo.build("vgg16", include_top=False, pooling="avg", input_shape=(64, 64, 3))
    """
    flatten = include_top and pooling is None
    check_input_shape(input_shape, 3, name, allow_none_axes=() if flatten else (0, 1))
    check_image_input(input_shape, name)
    check_pooling(pooling, name)
    if len(convs_per_stage) != len(_STAGE_FILTERS) or min(convs_per_stage) < 1:
        raise ValueError(f"convs_per_stage must be 5 positive ints. Received: convs_per_stage={convs_per_stage}")
    inputs = keras.Input(tuple(input_shape), name="image")
    x = inputs
    for stage, (convs, filters) in enumerate(zip(convs_per_stage, _STAGE_FILTERS), start=1):
        for i in range(1, convs + 1):
            x = Conv2D(filters, 3, padding="same", activation="relu", name=f"block{stage}_conv{i}")(x)
        x = keras.layers.MaxPooling2D(2, strides=2, name=f"block{stage}_pool")(x)
    if not include_top:
        return make_model(inputs, x if pooling is None else global_pool(x, pooling), name)
    x = keras.layers.Flatten(name="flatten")(x) if flatten else global_pool(x, pooling)
    x = keras.layers.Dense(fc_units, activation="relu", name="fc1")(x)
    if dropout:
        x = keras.layers.Dropout(dropout, name="fc1_dropout")(x)
    x = keras.layers.Dense(fc_units, activation="relu", name="fc2")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout)
    return make_model(inputs, outputs, name)


def _register_imagenet(depth: int, configuration: str, params: int):
    model_name = f"vgg{depth}"

    def builder(input_shape, num_classes, name=model_name, **kwargs):
        return vgg(input_shape, num_classes, name, convs_per_stage=CONFIGURATIONS[depth], **kwargs)

    builder.__name__ = builder.__qualname__ = model_name
    builder.__doc__ = (
        f"VGG-{depth} (Table 1, configuration {configuration}), weight-compatible with "
        f"keras.applications.VGG{depth}.\n\nSee `vgg` for the options (`include_top`, `pooling`, `dropout`)."
    )
    return register_model(
        family="cnn", paper=f"{_PAPER}; layout of keras.applications.VGG{depth}", input_shape=(224, 224, 3),
        params=params, num_classes=1000, keras_twin=KerasTwin(f"VGG{depth}"),
        variant_of=None if depth == 16 else "vgg16",
    )(builder)


vgg16 = _register_imagenet(16, "D", params=138_357_544)
vgg19 = _register_imagenet(19, "E", params=143_667_240)
