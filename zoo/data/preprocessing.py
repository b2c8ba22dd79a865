"""Per-example preprocessing functions used by dataset specs.

Each function maps one ``(x, y)`` example to the tensors a model consumes. They
run inside ``tf.data.Dataset.map`` *before* the cache, so the work is done once
and later epochs read ready-made float32 tensors.
"""

from __future__ import annotations

import tensorflow as tf


def scale_image(x, y):
    """uint8 image -> float32 in [0, 1]; integer label -> int32."""
    return tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)


def image_to_sequence(x, y):
    """(H, W, 1) uint8 image -> (H, W) float32 sequence of H steps with W features."""
    x, y = scale_image(x, y)
    return tf.squeeze(x, axis=-1), y


def image_to_cifar_shape(x, y):
    """(28, 28, 1) uint8 image -> (32, 32, 3) float32 in [0, 1]: padded by 2 pixels, gray copied to RGB.

    CIFAR-10's input shape with offline data, for the 32x32 models (resnet20, mobilenet_v2).
    """
    x, y = scale_image(x, y)
    x = tf.pad(x, [[2, 2], [2, 2], [0, 0]])
    return tf.tile(x, [1, 1, 3]), y


def generic_supervised(x, y):
    """Default for TFDS datasets zoo has no spec for.

    Integer images (uint8 pixels) are scaled to [0, 1]; other numeric inputs are
    cast to float32; integer labels become int32 (what Keras' sparse losses expect).
    """
    x = _to_float(x)
    if y.dtype.is_integer:
        y = tf.cast(y, tf.int32)
    elif y.dtype.is_floating:
        y = tf.cast(y, tf.float32)
    return x, y


def generic_features(example):
    """Default for TFDS datasets without supervised keys: convert every feature."""
    return tf.nest.map_structure(_to_float, example)


def _to_float(t):
    if t.dtype == tf.uint8:
        return tf.cast(t, tf.float32) / 255.0
    if t.dtype.is_integer or t.dtype.is_floating:
        return tf.cast(t, tf.float32)
    return t  # strings and other non-numeric features pass through untouched
