"""Small building blocks shared by the architecture families.

Every layer gets a name derived from the block's, so exported graphs and
weight files stay readable (the keras-hub convention).
"""

from __future__ import annotations

import keras

from zoo.architectures.batch_norm import BatchNormalization
from zoo.core.model import ZooModel


def classifier_head(x, num_classes: int, *, activation="softmax", dropout: float = 0.0, name: str = "head"):
    """Dropout, a dense layer, then the activation computed in float32.

    The separate float32 activation keeps outputs float32 under a
    `mixed_float16` policy, as the Keras mixed-precision guide advises.
    With `activation=None` the model returns logits.
    """
    if dropout:
        x = keras.layers.Dropout(dropout, name=f"{name}_dropout")(x)
    x = keras.layers.Dense(num_classes, name=f"{name}_dense")(x)
    return keras.layers.Activation(activation or "linear", dtype="float32", name="predictions")(x)


def conv_bn_act(
    x, filters: int, kernel_size=3, *, strides=1, activation="relu", name: str, padding="same", bn_momentum=0.99
):
    """Conv2D (no bias) -> BatchNormalization (zoo's, fused when training) -> activation."""
    x = keras.layers.Conv2D(
        filters, kernel_size, strides=strides, padding=padding, use_bias=False, name=f"{name}_conv"
    )(x)
    x = BatchNormalization(momentum=bn_momentum, name=f"{name}_bn")(x)
    return keras.layers.Activation(activation, name=f"{name}_{activation}")(x)


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


POOLINGS = ("avg", "max")


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
