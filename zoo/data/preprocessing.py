"""Per-example preprocessing functions used by dataset specs.

Each step maps one ``(x, y)`` example to the tensors a model consumes. In a streaming ``tf.data``
pipeline it runs inside ``Dataset.map`` *before* the cache, so the work is done once and later
epochs read ready-made float32 tensors; for a split held in memory it runs per batch. The steps
zoo's own datasets use are `zoo.data.batches.Preprocess` objects with a NumPy form as well, which
the batches served without TensorFlow (JAX, PyTorch) apply to a whole batch at once.
"""

from __future__ import annotations

import numpy as np

from zoo.data.batches import Preprocess


def _scale_image_tf(x, y):
    import tensorflow as tf

    return tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)


def _scale_image_np(x, y):
    return x.astype(np.float32) / np.float32(255), y.astype(np.int32)


def _sequence_tf(x, y):
    import tensorflow as tf

    x, y = _scale_image_tf(x, y)
    return tf.squeeze(x, axis=-1), y


def _sequence_np(x, y):
    x, y = _scale_image_np(x, y)
    return x[..., 0], y


def _cifar_shape_tf(x, y):
    import tensorflow as tf

    x, y = _scale_image_tf(x, y)
    x = tf.pad(x, [[2, 2], [2, 2], [0, 0]])
    return tf.tile(x, [1, 1, 3]), y


def _cifar_shape_np(x, y):
    x, y = _scale_image_np(x, y)
    x = np.pad(x, [(0, 0), (2, 2), (2, 2), (0, 0)])
    return np.repeat(x, 3, axis=-1), y


def _cast_image_tf(x, y):
    import tensorflow as tf

    return tf.cast(x, tf.float32), tf.cast(y, tf.int32)


def _cast_image_np(x, y):
    return x.astype(np.float32), y.astype(np.int32)


# uint8 image -> float32 in [0, 1]; integer label -> int32.
scale_image = Preprocess("scale_image", _scale_image_tf, _scale_image_np)

# (H, W, 1) uint8 image -> (H, W) float32 sequence of H steps with W features.
image_to_sequence = Preprocess("image_to_sequence", _sequence_tf, _sequence_np)

# (28, 28, 1) uint8 image -> (32, 32, 3) float32 in [0, 1]: padded by 2 pixels, gray copied to RGB.
# CIFAR-10's input shape with offline data, for the 32x32 models (resnet20, mobilenet_v2).
image_to_cifar_shape = Preprocess("image_to_cifar_shape", _cifar_shape_tf, _cifar_shape_np)

# uint8 image -> float32 in [0, 255] (image folders read with `raw=True`); integer label -> int32.
cast_image = Preprocess("cast_image", _cast_image_tf, _cast_image_np)


def generic_supervised(x, y):
    """Default for TFDS datasets zoo has no spec for.

    Integer images (uint8 pixels) are scaled to [0, 1]; other numeric inputs are
    cast to float32; integer labels become int32 (what Keras' sparse losses expect).
    """
    import tensorflow as tf

    x = _to_float(x)
    if y.dtype.is_integer:
        y = tf.cast(y, tf.int32)
    elif y.dtype.is_floating:
        y = tf.cast(y, tf.float32)
    return x, y


def generic_features(example):
    """Default for TFDS datasets without supervised keys: convert every feature."""
    import tensorflow as tf

    return tf.nest.map_structure(_to_float, example)


def _to_float(t):
    import tensorflow as tf

    if t.dtype == tf.uint8:
        return tf.cast(t, tf.float32) / 255.0
    if t.dtype.is_integer or t.dtype.is_floating:
        return tf.cast(t, tf.float32)
    return t  # strings and other non-numeric features pass through untouched
