"""The Keras layer `--mobile` puts in front of a grayscale model: `ChannelMean`, RGB in, the channels' mean out.

A module of its own, imported with Keras: `zoo._KERAS_CLASSES` lists it, so `keras.saving.load_model` finds
`zoo>ChannelMean` after a bare `import zoo` (the front is saved in `.keras` files the conversion reloads), while
`zoo.deploy.formats.mobile` itself stays free of Keras at import.
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable("zoo")
class ChannelMean(keras.layers.Layer):
    """The mean over the channel axis, kept as an axis of 1 (RGB -> gray)."""

    def call(self, x):
        return keras.ops.mean(x, axis=-1, keepdims=True)

    def compute_output_shape(self, shape):
        return (*shape[:-1], 1)
