"""Small building blocks shared by the architecture families.

Every layer gets a name derived from the block's, so exported graphs and
weight files stay readable (the keras-hub convention).
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.architectures.conv2d import Conv2D
from zoo.core.model import ZooModel


def classifier_head(
    x, num_classes: int, *, activation="softmax", dropout: float = 0.0, name: str = "head",
    kernel_initializer="glorot_uniform",
):
    """Dropout, a dense layer, then the activation computed in float32.

    The separate float32 activation keeps outputs float32 under a
    `mixed_float16` policy, as the Keras mixed-precision guide advises.
    With `activation=None` the model returns logits. keras.applications
    names its classifier Dense `predictions`; `KERAS_HEAD_ALIASES` maps
    that name onto this head's `head_dense`.
    """
    if dropout:
        x = keras.layers.Dropout(dropout, name=f"{name}_dropout")(x)
    x = keras.layers.Dense(num_classes, kernel_initializer=kernel_initializer, name=f"{name}_dense")(x)
    return keras.layers.Activation(activation or "linear", dtype="float32", name="predictions")(x)


KERAS_HEAD_ALIASES = {"predictions": "head_dense"}


@keras.saving.register_keras_serializable(package="zoo")
def gelu_erf(x):
    """Exact GELU (Hendrycks & Gimpel 2016) written with `erf`: 0.5 x (1 + erf(x / sqrt 2)).

    The same function as Keras' `gelu(approximate=False)`, but TensorFlow lowers
    that one to `Erfc`, an op neither tf2onnx nor the TF.js converter handles;
    `Erf` exports to ONNX and TF.js (and TFLite) as is.
    """
    return 0.5 * x * (1.0 + keras.ops.erf(x * 0.7071067811865476))



def conv_bn_act(
    x, filters: int, kernel_size=3, *, strides=1, activation="relu", name: str, padding="same", bn_momentum=0.99
):
    """Conv2D (no bias) -> BatchNormalization (zoo's, fused when training) -> activation."""
    x = Conv2D(
        filters, kernel_size, strides=strides, padding=padding, use_bias=False, name=f"{name}_conv"
    )(x)
    x = BatchNormalization(momentum=bn_momentum, name=f"{name}_bn")(x)
    return keras.layers.Activation(activation, name=f"{name}_{activation}")(x)


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Rounds a channel count to a multiple of `divisor`, never more than 10% down (TF-slim's rule)."""
    min_value = divisor if min_value is None else min_value
    new_value = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new_value < 0.9 * value:
        new_value += divisor
    return new_value


def correct_pad(x, kernel_size: int):
    """Padding that makes a stride-2 'valid' conv centre its taps like TF-slim (keras' `correct_pad`)."""
    h, w = x.shape[1:3]
    adjust = (1, 1) if h is None or w is None else (1 - h % 2, 1 - w % 2)
    c = kernel_size // 2
    return ((c - adjust[0], c), (c - adjust[1], c))


def make_model(inputs, outputs, name: str) -> ZooModel:
    """Wraps a functional graph in the zoo's model base (`zoo.core.model.ZooModel`)."""
    return ZooModel(inputs=inputs, outputs=outputs, name=name)


def check_input_shape(input_shape, rank: int, name: str, allow_none_axes: tuple = ()):
    """Validates a per-example input shape (no batch axis) of the given rank."""
    shape = tuple(input_shape)
    if len(shape) != rank:
        raise ValueError(
            f"{name} expects input_shape of rank {rank} (no batch axis). Received: input_shape={shape}"
        )
    for i, d in enumerate(shape):
        if d is None and i in allow_none_axes:
            continue
        if d is None or int(d) < 1:
            raise ValueError(f"{name}: input_shape axis {i} must be a positive integer. Received: input_shape={shape}")
    return shape


def check_image_input(input_shape, name: str, min_size: int = 32):
    """An (height, width, channels) shape; height and width may be None (any size) or at least `min_size`."""
    shape = check_input_shape(input_shape, 3, name, allow_none_axes=(0, 1))
    if any(d is not None and d < min_size for d in shape[:2]):
        raise ValueError(
            f"{name} needs images of at least {min_size}x{min_size} (it downsamples {min_size}x). "
            f"Received: input_shape={shape}"
        )
    return shape


POOLINGS = ("avg", "max")


def check_pooling(pooling, name: str):
    """keras.applications' `pooling`: None, "avg" or "max"; None keeps a headless model's feature map."""
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"{name}: pooling must be None or one of {POOLINGS}. Received: pooling={pooling!r}")
    return pooling


def image_top(x, *, include_top: bool, num_classes: int, pooling=None, classifier_activation="softmax",
              dropout: float = 0.0, kernel_initializer="glorot_uniform"):
    """The end of an ImageNet-style network, with keras.applications' `include_top`/`pooling` meaning.

    With the top: global pooling ("avg" unless `pooling` says "max"), then
    `classifier_head`. Without: the feature map, or its global "avg"/"max" pool.
    """
    if include_top:
        x = global_pool(x, pooling or "avg")
        return classifier_head(x, num_classes, activation=classifier_activation, dropout=dropout,
                               kernel_initializer=kernel_initializer)
    return x if pooling is None else global_pool(x, pooling)


def global_pool(x, pooling: str = "avg"):
    """Global average or max pooling over the spatial axes, named `avg_pool` / `max_pool`.

    Works for images (rank 4) and sequences (rank 3); the names follow
    keras.applications, so heads line up with theirs.
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}. Received: pooling={pooling!r}")
    rank = len(x.shape)
    layers = {
        3: (keras.layers.GlobalAveragePooling1D, keras.layers.GlobalMaxPooling1D),
        4: (keras.layers.GlobalAveragePooling2D, keras.layers.GlobalMaxPooling2D),
    }
    if rank not in layers:
        raise ValueError(f"global_pool expects a rank 3 or 4 tensor. Received: shape={tuple(x.shape)}")
    avg, max_ = layers[rank]
    return (avg if pooling == "avg" else max_)(name=f"{pooling}_pool")(x)
